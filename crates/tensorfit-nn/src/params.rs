//! Model tensors on the host: initialisation, lookup, and safetensors files.
//!
//! A [`ParamStore`] holds every tensor of a model by its PyTorch name. It is what moves
//! between tensorfit and the outside world: PyTorch reference files, checkpoints, and the
//! values uploaded to (and downloaded from) a device.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use tensorfit_core::safetensors::{Dtype, SafeTensors};
use tensorfit_core::{Error, HostTensor, Result, Shape};

use crate::description::ModelDescription;
use crate::layers::Init;
use crate::safetensors_file::SafetensorsFile;
use crate::safetensors_write::write_tensors;
use tensorfit_core::Rng;

/// Named host tensors, kept in name order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParamStore {
    tensors: BTreeMap<String, HostTensor>,
}

impl ParamStore {
    pub fn new() -> Self {
        ParamStore::default()
    }

    /// Every tensor at its layer's initialisation ([`Init`]), the uniform ones drawn
    /// from `seed` in table order: PyTorch's defaults (LSTM and Dense weights and biases
    /// uniform in ±1/√fan, BatchNorm weight 1, bias 0, running mean 0, running variance 1).
    pub fn init(model: &ModelDescription, seed: u64) -> Result<Self> {
        let mut rng = Rng::new(seed);
        let mut store = ParamStore::new();
        for spec in model.param_specs()? {
            let n = spec.shape.numel();
            let data = match spec.init {
                Init::Uniform { bound } => {
                    (0..n).map(|_| rng.uniform_range(-bound, bound)).collect()
                }
                Init::Constant(v) => vec![v; n],
                Init::Normal { std } => (0..n).map(|_| rng.normal() * std).collect(),
            };
            store.insert(&spec.name, HostTensor::new(spec.shape, data)?);
        }
        Ok(store)
    }

    pub fn insert(&mut self, name: &str, t: HostTensor) {
        self.tensors.insert(name.to_string(), t);
    }

    pub fn get(&self, name: &str) -> Option<&HostTensor> {
        self.tensors.get(name)
    }

    /// The tensor `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<&HostTensor> {
        self.get(name)
            .ok_or_else(|| Error::input(format!("tensor `{name}` is missing")))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &HostTensor)> {
        self.tensors.iter()
    }

    /// Every tensor by name, in name order, moved out of the store.
    pub fn into_tensors(self) -> impl Iterator<Item = (String, HostTensor)> {
        self.tensors.into_iter()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&String, &mut HostTensor)> {
        self.tensors.iter_mut()
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Checks that this store has exactly the tensors of `model` with the right shapes.
    pub fn check_against(&self, model: &ModelDescription) -> Result<()> {
        let specs = model.param_specs()?;
        for spec in &specs {
            let t = self.require(&spec.name)?;
            t.check_filled(&format!("tensor `{}`", spec.name))?;
            if t.shape != spec.shape {
                return Err(Error::input(format!(
                    "tensor `{}` has shape {}, the model needs {}",
                    spec.name, t.shape, spec.shape
                )));
            }
        }
        if let Some(extra) = self
            .tensors
            .keys()
            .find(|k| !specs.iter().any(|s| &s.name == *k))
        {
            return Err(Error::input(format!(
                "tensor `{extra}` is not part of this model"
            )));
        }
        Ok(())
    }

    /// Reads every tensor whose name starts with `prefix` (the prefix is removed) from
    /// safetensors bytes. Only F32 tensors are accepted.
    pub fn from_safetensors(bytes: &[u8], prefix: &str) -> Result<(Self, HashMap<String, String>)> {
        let bad = |m: String| Error::File {
            path: "<safetensors>".into(),
            message: m,
        };
        let st = SafeTensors::parse(bytes)
            .map_err(|e| bad(format!("not a valid safetensors file ({e})")))?;
        let mut store = ParamStore::new();
        for (name, view) in st.tensors() {
            let Some(short) = name.strip_prefix(prefix) else {
                continue;
            };
            if view.dtype != Dtype::F32 {
                return Err(bad(format!(
                    "tensor `{name}` has dtype {}; tensorfit reads F32",
                    view.dtype
                )));
            }
            let data: Vec<f32> = view
                .data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            store.insert(short, HostTensor::new(Shape::new(view.shape), data)?);
        }
        let meta = st.header().metadata().clone();
        Ok((store, meta.into_iter().collect()))
    }

    /// Reads a safetensors file (see [`ParamStore::from_safetensors`]), no further than
    /// its header says ([`SafetensorsFile`]).
    pub fn load(path: &Path, prefix: &str) -> Result<(Self, HashMap<String, String>)> {
        let bytes = SafetensorsFile::open(path)?.into_bytes()?;
        Self::from_safetensors(&bytes, prefix).map_err(|e| match e {
            Error::File { message, .. } => Error::File {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// Serialises every tensor (names prefixed with `prefix`) with `metadata`.
    pub fn to_safetensors(
        &self,
        prefix: &str,
        metadata: HashMap<String, String>,
    ) -> Result<Vec<u8>> {
        let named = self.prefixed(prefix);
        let refs: Vec<(&str, &HostTensor)> = named.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let mut bytes = Vec::new();
        write_tensors(&mut bytes, &refs, &metadata)?;
        Ok(bytes)
    }

    /// Every tensor with its name prefixed, in name order.
    fn prefixed(&self, prefix: &str) -> Vec<(String, &HostTensor)> {
        self.tensors
            .iter()
            .map(|(n, t)| (format!("{prefix}{n}"), t))
            .collect()
    }
}
