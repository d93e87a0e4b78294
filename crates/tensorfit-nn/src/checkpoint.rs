//! Checkpoints: the model, the optimizer state and the step, in one safetensors file.
//!
//! Tensors keep PyTorch's names (`lstm.weight_ih_l0`, `bn1.running_mean`, ...), so
//! `safetensors.torch.load_file` reads a checkpoint directly and the `lstm.*` tensors
//! (prefix removed) load into `torch.nn.LSTM`. The optimizer's state is Adam's (and
//! AdamW's) moments `adam.m.<name>` and `adam.v.<name>`, or SGD's `sgd.momentum.<name>`;
//! the optimizer's settings and the schedule's state are metadata
//! ([`crate::optim`]'s `persist`). The metadata holds the format version, the model description as
//! JSON ([`description_json`]; version 1 files hold the seed-shaped classifier's sizes
//! instead, and still load), the step and a checksum of every tensor's bytes. Files are written tensor by
//! tensor ([`crate::safetensors_write`]) through [`crate::atomic_file`], so writing
//! holds no copy of the state, and a crash never leaves a half-written checkpoint under
//! the real name.

use std::collections::HashMap;
use std::path::Path;

use tensorfit_core::{Error, HostTensor, Result};

use crate::description::ModelDescription;
use crate::description_json;
use crate::layers::{ParamKind, ParamSpec};
use crate::optim::{ADAM_STATES, SGD_STATES};
use crate::params::ParamStore;
use crate::safetensors_file::SafetensorsFile;
use crate::safetensors_write::{save_tensors, write_tensors};

/// The format this version writes and reads.
/// Version 2 keeps the model description (`model`); version 1 kept the fixed
/// classifier's sizes (`config`).
pub const FORMAT_VERSION: u32 = 2;

/// The metadata key of the model description.
const MODEL_KEY: &str = "model";
/// The metadata key of version 1's classifier sizes.
const V1_CONFIG_KEY: &str = "config";

/// Everything needed to continue training or to run a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The model the tensors belong to.
    pub config: ModelDescription,
    /// Model tensors: parameters and running statistics.
    pub params: ParamStore,
    /// The optimizer's state tensors of every trainable parameter, `adam.m.<name>` and
    /// `adam.v.<name>` or `sgd.momentum.<name>` (empty for a model saved without
    /// optimizer state).
    pub optimizer: ParamStore,
    /// Optimizer steps taken.
    pub step: u64,
    /// Extra key/value pairs kept with the checkpoint (data-generator state, ...).
    pub extra: HashMap<String, String>,
}

/// The state names of the optimizer whose state tensor `name` is, if it is one.
fn is_state_of(name: &str) -> Option<&'static [&'static str]> {
    [ADAM_STATES, SGD_STATES].into_iter().find(|states| {
        states.iter().any(|s| {
            name.strip_prefix(s)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    })
}

/// FNV-1a over every tensor's name and bytes, in the order given (name order).
fn checksum(all: &[(&str, &HostTensor)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    for (name, t) in all {
        name.bytes().for_each(&mut eat);
        t.data
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .for_each(&mut eat);
    }
    h
}

impl Checkpoint {
    /// Every tensor (the model's and the optimizer's state) in name order, the order the
    /// file stores and the checksum reads them in.
    fn tensors(&self) -> Vec<(&str, &HostTensor)> {
        let mut all: Vec<(&str, &HostTensor)> = self
            .params
            .iter()
            .chain(self.optimizer.iter())
            .map(|(n, t)| (n.as_str(), t))
            .collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all
    }

    /// The file's metadata for `all` ([`Checkpoint::tensors`]).
    fn metadata(&self, all: &[(&str, &HostTensor)]) -> HashMap<String, String> {
        let mut meta = self.extra.clone();
        meta.insert("format".into(), "tensorfit-checkpoint".into());
        meta.insert("format_version".into(), FORMAT_VERSION.to_string());
        meta.insert(MODEL_KEY.into(), description_json::to_json(&self.config));
        meta.insert("step".into(), self.step.to_string());
        meta.insert("checksum".into(), format!("{:016x}", checksum(all)));
        meta
    }

    /// Serialises to safetensors bytes (the bytes [`Checkpoint::save`] writes).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let all = self.tensors();
        let mut bytes = Vec::new();
        write_tensors(&mut bytes, &all, &self.metadata(&all))?;
        Ok(bytes)
    }

    /// Parses and checks safetensors bytes: format, version, checksum, and every tensor's
    /// name and shape against the configuration.
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint> {
        let (all, meta) = ParamStore::from_safetensors(bytes, "")?;
        let get = |k: &str| {
            meta.get(k).ok_or_else(|| {
                Error::input(format!(
                    "not a tensorfit checkpoint: no `{k}` in its metadata"
                ))
            })
        };
        if get("format")? != "tensorfit-checkpoint" {
            return Err(Error::input("not a tensorfit checkpoint"));
        }
        let version: u32 = get("format_version")?
            .parse()
            .map_err(|_| Error::input("checkpoint format_version is not a number"))?;
        if !(1..=FORMAT_VERSION).contains(&version) {
            return Err(Error::input(format!(
                "checkpoint format version {version}; this tensorfit reads versions 1 to {FORMAT_VERSION}"
            )));
        }
        let want = get("checksum")?;
        let named: Vec<(&str, &HostTensor)> = all.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let got = format!("{:016x}", checksum(&named));
        if &got != want {
            return Err(Error::input(format!(
                "checkpoint checksum mismatch (stored {want}, computed {got}): the file is corrupted"
            )));
        }
        let config = match version {
            1 => description_json::from_v1_json(get(V1_CONFIG_KEY)?)?,
            _ => description_json::from_json(get(MODEL_KEY)?)?,
        };
        let step: u64 = get("step")?
            .parse()
            .map_err(|_| Error::input("checkpoint step is not a number"))?;
        let mut params = ParamStore::new();
        let mut optimizer = ParamStore::new();
        // Moved, not copied: a checkpoint is loaded once, whole.
        for (n, t) in all.into_tensors() {
            if is_state_of(&n).is_some() {
                optimizer.insert(&n, t);
            } else {
                params.insert(&n, t);
            }
        }
        params.check_against(&config)?;
        let trainable: Vec<ParamSpec> = config
            .param_specs()?
            .into_iter()
            .filter(|s| s.kind == ParamKind::Trainable)
            .collect();
        // One optimizer's state, for every trainable parameter, or none at all.
        let states = optimizer
            .iter()
            .find_map(|(n, _)| is_state_of(n))
            .unwrap_or(&[]);
        for spec in &trainable {
            for state in states {
                let name = format!("{state}.{}", spec.name);
                match optimizer.get(&name) {
                    Some(t) if t.shape != spec.shape => {
                        return Err(Error::input(format!(
                            "tensor `{name}` has shape {}, the model needs {}",
                            t.shape, spec.shape
                        )))
                    }
                    Some(_) => {}
                    None => return Err(Error::input(format!("tensor `{name}` is missing"))),
                }
            }
        }
        if optimizer.len() > states.len() * trainable.len() {
            return Err(Error::input(
                "checkpoint has optimizer tensors that are not part of this model",
            ));
        }
        let extra = meta
            .into_iter()
            .filter(|(k, _)| {
                ![
                    "format",
                    "format_version",
                    MODEL_KEY,
                    V1_CONFIG_KEY,
                    "step",
                    "checksum",
                ]
                .contains(&k.as_str())
            })
            .collect();
        Ok(Checkpoint {
            config,
            params,
            optimizer,
            step,
            extra,
        })
    }

    /// Writes atomically (`atomic_file`: a temporary file in the same directory, flushed
    /// to disk, then renamed over `path`), tensor by tensor ([`save_tensors`]): writing
    /// holds no copy of the state beyond this checkpoint.
    pub fn save(&self, path: &Path) -> Result<()> {
        let all = self.tensors();
        save_tensors(path, &all, &self.metadata(&all))
    }

    /// Reads and checks a checkpoint file.
    pub fn load(path: &Path) -> Result<Checkpoint> {
        let bytes = SafetensorsFile::open(path)?.into_bytes()?;
        Checkpoint::from_bytes(&bytes).map_err(|e| match e {
            Error::Input(m) | Error::File { message: m, .. } => Error::File {
                path: path.display().to_string(),
                message: m,
            },
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An untrained checkpoint of a small model, step 0, no optimizer state.
    fn small() -> Checkpoint {
        let config = crate::seed_shape::SeedShape {
            features: 5,
            hidden: 4,
            layers: 2,
            dense: 3,
            classes: 3,
            activation: tensorfit_core::Activation::Relu,
        }
        .description();
        Checkpoint {
            params: ParamStore::init(&config, 3).unwrap(),
            config,
            optimizer: ParamStore::new(),
            step: 0,
            extra: HashMap::new(),
        }
    }

    #[test]
    fn round_trips_and_detects_corruption() {
        let ck = Checkpoint {
            step: 7,
            extra: HashMap::from([("data_rng".to_string(), "42".to_string())]),
            ..small()
        };
        let bytes = ck.to_bytes().unwrap();
        assert_eq!(Checkpoint::from_bytes(&bytes).unwrap(), ck);
        // Flip one byte of tensor data (the end of the file is data).
        let mut bad = bytes.clone();
        let n = bad.len();
        bad[n - 3] ^= 0x40;
        let e = Checkpoint::from_bytes(&bad).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        // Truncations of every length fail cleanly.
        for cut in [0, 7, 8, 20, n / 2, n - 1] {
            assert!(Checkpoint::from_bytes(&bytes[..cut]).is_err(), "cut {cut}");
        }
    }

    #[test]
    fn atomic_save_then_load() {
        let dir = tensorfit_testing::scratch_dir("checkpoint");
        let path = dir.join("model.safetensors");
        let ck = small();
        ck.save(&path).unwrap();
        assert_eq!(Checkpoint::load(&path).unwrap(), ck);
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `ck`'s bytes with its metadata changed by `edit`.
    fn with_metadata(ck: &Checkpoint, edit: impl FnOnce(&mut HashMap<String, String>)) -> Vec<u8> {
        let (all, mut meta) = ParamStore::from_safetensors(&ck.to_bytes().unwrap(), "").unwrap();
        edit(&mut meta);
        all.to_safetensors("", meta).unwrap()
    }

    #[test]
    fn a_checkpoint_of_format_version_1_loads_as_the_seed_shape_it_describes() {
        let ck = small();
        let old = with_metadata(&ck, |meta| {
            meta.remove("model");
            meta.insert("format_version".into(), "1".into());
            meta.insert(
                "config".into(),
                r#"{"classes":3,"dense":3,"dense_activation":"relu","hidden":4,"input":5,"layers":2}"#
                    .into(),
            );
        });
        assert_eq!(Checkpoint::from_bytes(&old).unwrap(), ck);
    }

    #[test]
    fn a_checkpoint_of_a_later_format_version_is_refused_naming_both() {
        let newer = with_metadata(&small(), |meta| {
            meta.insert("format_version".into(), "3".into());
        });
        let e = Checkpoint::from_bytes(&newer).unwrap_err().to_string();
        assert!(e.contains("version 3") && e.contains("1 to 2"), "{e}");
    }
}
