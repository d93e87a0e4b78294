//! The settings of a training run, kept in each of its checkpoints, so that a resumed run
//! continues the same run (same minibatches, truncation, learning rate, data and
//! held-out set) instead of whatever the command line's defaults are.
//!
//! They are stored as one JSON object under the metadata key `run_settings`; checkpoints
//! written before these settings existed have no such key and load with `None`. A run on
//! the user's files adds its own ([`DataSettings`], under `data`); a checkpoint written
//! before those were stored has none, and a run resumed from it goes on as it did then
//! (with the flags typed, or their defaults).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::json;
use tensorfit_core::{Error, Result};

use crate::options::TbpttMode;

/// The metadata key of the settings.
const KEY: &str = "run_settings";

/// What a training run was started with (and keeps when resumed).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// Identifies the run across its checkpoints (a fresh run draws a new one).
    pub run_id: String,
    /// Sequences per minibatch.
    pub batch: usize,
    /// Time steps per sequence.
    pub seq_len: usize,
    /// Truncated-BPTT length.
    pub tbptt: usize,
    /// Truncated BPTT over the last `tbptt` steps, or in windows (an update each).
    pub tbptt_mode: TbpttMode,
    /// Adam's learning rate.
    pub lr: f32,
    /// Seed of the initial weights, the data stream and the held-out set.
    pub seed: u64,
    /// Evaluate every this many steps (0: only at the end).
    pub eval_every: u64,
    /// Held-out sequences per evaluation.
    pub eval_batch: usize,
    /// A run on the user's files (`train --data`): what it read and how long it runs.
    /// `None` for the built-in task, and for a data run's checkpoint written before these
    /// were stored.
    pub data: Option<DataSettings>,
}

/// The settings of a run on the user's files besides those every run has: each changes
/// what the run trains on or how long, so a resumed run keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSettings {
    /// The training data (`--data`), as an absolute path where it could be made one.
    pub path: PathBuf,
    /// The validation file (`--val`); `None`: a part of the data validates.
    pub val: Option<PathBuf>,
    /// Passes over the training sequences.
    pub epochs: u64,
    /// Validations without a lower loss before stopping early; `None`: never.
    pub stop_patience: Option<u64>,
    /// The longest sequence read (a text's window); `None`: the format's default.
    pub max_seq_len: Option<usize>,
    /// Longer sequences are cut to `max_seq_len` (else refused).
    pub cut_long: bool,
    /// A text's windows each start from a zero state.
    pub reset_state: bool,
    /// Sequences of similar lengths batched together (`--batch-order length-grouped`);
    /// `false`: the whole epoch shuffled. Stored as `batch_order`; a checkpoint written
    /// before it was stored trained length-grouped, and resumes so.
    pub length_grouped: bool,
    /// A budget of optimizer steps (`--steps` with `--data`): the run ends at the first
    /// whole batch at or past it, or after `epochs`; `None` (and in a checkpoint written
    /// before it was stored): epochs only.
    pub max_steps: Option<u64>,
}

/// The stored names of [`DataSettings::length_grouped`] (tensorfit-data's `BatchOrder`).
const GROUPED: &str = "length-grouped";
const SHUFFLED: &str = "shuffled";

impl DataSettings {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "path": self.path.to_string_lossy(),
            "val": self.val.as_ref().map(|p| p.to_string_lossy()),
            "epochs": self.epochs, "stop_patience": self.stop_patience,
            "max_seq_len": self.max_seq_len,
            "cut_long": self.cut_long, "reset_state": self.reset_state,
            "batch_order": if self.length_grouped { GROUPED } else { SHUFFLED },
            "max_steps": self.max_steps,
        })
    }

    fn from_json(v: &serde_json::Value, bad: impl Fn(String) -> Error) -> Result<DataSettings> {
        let field = |k: &str| v.get(k).ok_or_else(|| bad(format!("`data.{k}` missing")));
        let whole = |k: &str| -> Result<Option<u64>> {
            match field(k)? {
                serde_json::Value::Null => Ok(None),
                x => x
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| bad(format!("`data.{k}` must be a whole number"))),
            }
        };
        let path = |k: &str| -> Result<Option<PathBuf>> {
            match field(k)? {
                serde_json::Value::Null => Ok(None),
                x => x
                    .as_str()
                    .map(|p| Some(PathBuf::from(p)))
                    .ok_or_else(|| bad(format!("`data.{k}` must be a path"))),
            }
        };
        let switch = |k: &str| {
            field(k)?
                .as_bool()
                .ok_or_else(|| bad(format!("`data.{k}` must be true or false")))
        };
        let max_seq_len = match whole("max_seq_len")? {
            Some(n) => Some(
                usize::try_from(n).map_err(|_| bad("`data.max_seq_len` is too large".into()))?,
            ),
            None => None,
        };
        let length_grouped = match v.get("batch_order").map(|o| o.as_str()) {
            None | Some(Some(GROUPED)) => true,
            Some(Some(SHUFFLED)) => false,
            Some(_) => {
                return Err(bad(format!(
                    "`data.batch_order` must be \"{SHUFFLED}\" or \"{GROUPED}\""
                )))
            }
        };
        Ok(DataSettings {
            path: path("path")?.ok_or_else(|| bad("`data.path` missing".into()))?,
            val: path("val")?,
            epochs: whole("epochs")?.ok_or_else(|| bad("`data.epochs` missing".into()))?,
            stop_patience: whole("stop_patience")?,
            max_seq_len,
            cut_long: switch("cut_long")?,
            reset_state: switch("reset_state")?,
            length_grouped,
            // Missing in a checkpoint written before it was stored: no budget.
            max_steps: match v.get("max_steps") {
                None => None,
                Some(_) => whole("max_steps")?,
            },
        })
    }
}

impl RunSettings {
    /// A run id that differs between runs: the time and the process.
    pub fn new_run_id() -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}-{:x}", std::process::id())
    }

    /// Writes the settings into checkpoint metadata.
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let mut v = json!({
            "run_id": self.run_id, "batch": self.batch, "seq_len": self.seq_len,
            "tbptt": self.tbptt, "tbptt_mode": self.tbptt_mode.name(),
            "lr": self.lr, "seed": self.seed,
            "eval_every": self.eval_every, "eval_batch": self.eval_batch,
        });
        if let Some(d) = &self.data {
            v["data"] = d.to_json();
        }
        extra.insert(KEY.into(), v.to_string());
    }

    /// The settings kept in checkpoint metadata; `None` for a checkpoint written before
    /// they were stored.
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<RunSettings>> {
        let Some(text) = extra.get(KEY) else {
            return Ok(None);
        };
        let bad = |what: String| Error::input(format!("checkpoint run settings: {what}"));
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let whole = |k: &str| -> Result<u64> {
            v.get(k)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| bad(format!("`{k}` must be a whole number")))
        };
        let size = |k: &str| -> Result<usize> {
            usize::try_from(whole(k)?).map_err(|_| bad(format!("`{k}` is too large")))
        };
        let lr = v
            .get("lr")
            .and_then(|x| x.as_f64())
            .ok_or_else(|| bad("`lr` must be a number".into()))? as f32;
        let run_id = v
            .get("run_id")
            .and_then(|x| x.as_str())
            .ok_or_else(|| bad("`run_id` missing".into()))?
            .to_string();
        // Checkpoints written before the windowed mode existed trained the last segment.
        let tbptt_mode = match v.get("tbptt_mode").and_then(|x| x.as_str()) {
            Some(name) => TbpttMode::parse(name).map_err(|e| bad(e.to_string()))?,
            None => TbpttMode::Last,
        };
        let data = match v.get("data") {
            Some(d) => Some(DataSettings::from_json(d, bad)?),
            None => None,
        };
        Ok(Some(RunSettings {
            run_id,
            batch: size("batch")?,
            seq_len: size("seq_len")?,
            tbptt: size("tbptt")?,
            tbptt_mode,
            lr,
            seed: whole("seed")?,
            eval_every: whole("eval_every")?,
            eval_batch: size("eval_batch")?,
            data,
        }))
    }
}

/// Whether a multiple of `every` lies in `(before, after]` (never for 0): a batch of
/// several optimizer updates still validates and checkpoints at each multiple it passes
/// (`eval_every`, `checkpoint_every`).
pub fn crossed(before: u64, after: u64, every: u64) -> bool {
    every > 0 && after / every > before / every
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_through_metadata_and_old_checkpoints_have_none() {
        let s = RunSettings {
            run_id: RunSettings::new_run_id(),
            batch: 8,
            seq_len: 12,
            tbptt: 6,
            tbptt_mode: TbpttMode::Windows,
            lr: 3e-4,
            seed: u64::MAX,
            eval_every: 0,
            eval_batch: 16,
            data: None,
        };
        let mut extra = HashMap::new();
        s.store(&mut extra);
        assert_eq!(RunSettings::load(&extra).unwrap(), Some(s.clone()));
        assert_eq!(RunSettings::load(&HashMap::new()).unwrap(), None);
        extra.insert(KEY.into(), r#"{"batch": -1}"#.into());
        assert!(RunSettings::load(&extra).is_err());
        // Written before the mode was stored: the last segment, as those runs trained.
        let mut old = HashMap::new();
        RunSettings {
            tbptt_mode: TbpttMode::Last,
            ..s
        }
        .store(&mut old);
        let mut v: serde_json::Value = serde_json::from_str(&old[KEY]).unwrap();
        v.as_object_mut().unwrap().remove("tbptt_mode");
        old.insert(KEY.into(), v.to_string());
        let loaded = RunSettings::load(&old).unwrap().unwrap();
        assert_eq!(loaded.tbptt_mode, TbpttMode::Last);
    }

    #[test]
    fn a_data_runs_settings_round_trip_and_a_bad_one_names_its_key() {
        let data = DataSettings {
            path: PathBuf::from("/data/train.safetensors"),
            val: Some(PathBuf::from("/data/val.safetensors")),
            epochs: 3,
            stop_patience: Some(2),
            max_seq_len: Some(20),
            cut_long: true,
            reset_state: false,
            length_grouped: false,
            max_steps: Some(150),
        };
        let s = RunSettings {
            run_id: "run".into(),
            batch: 4,
            seq_len: 20,
            tbptt: 20,
            tbptt_mode: TbpttMode::Last,
            lr: 0.02,
            seed: 1,
            eval_every: 2,
            eval_batch: 4,
            data: Some(data.clone()),
        };
        let mut extra = HashMap::new();
        s.store(&mut extra);
        assert_eq!(RunSettings::load(&extra).unwrap(), Some(s.clone()));
        let unset = RunSettings {
            data: Some(DataSettings {
                val: None,
                stop_patience: None,
                max_seq_len: None,
                max_steps: None,
                ..data
            }),
            ..s
        };
        unset.store(&mut extra);
        assert_eq!(RunSettings::load(&extra).unwrap(), Some(unset));
        let mut v: serde_json::Value = serde_json::from_str(&extra[KEY]).unwrap();
        v["data"]["epochs"] = json!(-1);
        extra.insert(KEY.into(), v.to_string());
        let e = RunSettings::load(&extra).unwrap_err().to_string();
        assert!(e.contains("`data.epochs` must be a whole number"), "{e}");
        // Written before the batch order was stored: those runs trained length-grouped.
        v["data"]["epochs"] = json!(3);
        v["data"].as_object_mut().unwrap().remove("batch_order");
        extra.insert(KEY.into(), v.to_string());
        let old = RunSettings::load(&extra).unwrap().unwrap();
        assert!(old.data.unwrap().length_grouped);
        // Written before the step budget was stored: epochs only.
        v["data"]["max_steps"] = json!(40);
        extra.insert(KEY.into(), v.to_string());
        let budget = RunSettings::load(&extra).unwrap().unwrap();
        assert_eq!(budget.data.unwrap().max_steps, Some(40));
        v["data"].as_object_mut().unwrap().remove("max_steps");
        extra.insert(KEY.into(), v.to_string());
        let old = RunSettings::load(&extra).unwrap().unwrap();
        assert_eq!(old.data.unwrap().max_steps, None);
    }
}
