//! The settings of a training run, kept in each of its checkpoints, so that a resumed run
//! continues the same run (same minibatches, truncation, learning rate, data and
//! held-out set) instead of whatever the command line's defaults are.
//!
//! They are stored as one JSON object under the metadata key `run_settings`; checkpoints
//! written before these settings existed have no such key and load with `None`.

use std::collections::HashMap;

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
        let v = json!({
            "run_id": self.run_id, "batch": self.batch, "seq_len": self.seq_len,
            "tbptt": self.tbptt, "tbptt_mode": self.tbptt_mode.name(),
            "lr": self.lr, "seed": self.seed,
            "eval_every": self.eval_every, "eval_batch": self.eval_batch,
        });
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
        }))
    }
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
}
