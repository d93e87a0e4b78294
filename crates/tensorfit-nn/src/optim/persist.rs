//! The optimizer settings and the schedule's state in checkpoint metadata, so a resumed
//! run continues with the same optimizer, clipping and schedule, bit for bit.
//!
//! Both are JSON objects whose numbers are written as Rust writes them (`to_string`, the
//! shortest text that parses back to the same bits; the schedule's f64 state as its
//! bits), not as JSON numbers, whose parsing may round. A checkpoint written before these
//! keys existed loads with `None`: it was an Adam run without clipping or schedule.

use std::collections::HashMap;
use std::str::FromStr;

use serde_json::{Map, Value};
use tensorfit_core::{Error, Result};

use super::{OptimSettings, ScheduleState};

/// The metadata key of the settings.
const SETTINGS_KEY: &str = "optim_settings";
/// The metadata key of the schedule's state.
const STATE_KEY: &str = "schedule_state";

fn object(extra: &HashMap<String, String>, key: &str) -> Result<Option<Map<String, Value>>> {
    let Some(text) = extra.get(key) else {
        return Ok(None);
    };
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => Ok(Some(m)),
        _ => Err(Error::input(format!(
            "checkpoint `{key}` is not a JSON object"
        ))),
    }
}

/// Field `k` of `m` (from metadata key `key`), parsed from its text.
fn field<T: FromStr>(m: &Map<String, Value>, key: &str, k: &str) -> Result<T> {
    m.get(k)
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::input(format!("checkpoint `{key}`: `{k}` is missing or malformed")))
}

/// `None` as the empty text.
fn optional<T: FromStr>(m: &Map<String, Value>, key: &str, k: &str) -> Result<Option<T>> {
    match m.get(k).and_then(Value::as_str) {
        Some("") => Ok(None),
        _ => field(m, key, k).map(Some),
    }
}

fn text<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

impl OptimSettings {
    /// Writes the settings into checkpoint metadata.
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let m: Map<String, Value> = self
            .texts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v)))
            .collect();
        extra.insert(SETTINGS_KEY.into(), Value::Object(m).to_string());
    }

    /// Each setting by its key (its flag in snake_case) as it is stored: the text Rust
    /// writes, the empty text for `None`.
    pub fn texts(&self) -> Vec<(&'static str, String)> {
        let s = |v: &dyn ToString| v.to_string();
        vec![
            ("optimizer", s(&self.optimizer)),
            ("lr", s(&self.lr)),
            ("momentum", s(&self.momentum)),
            ("nesterov", s(&self.nesterov)),
            ("weight_decay", text(self.weight_decay)),
            ("clip_norm", text(self.clip_norm)),
            ("clip_value", text(self.clip_value)),
            ("schedule", s(&self.schedule)),
            ("step_size", text(self.step_size)),
            ("gamma", text(self.gamma)),
            ("t_max", text(self.t_max)),
            ("eta_min", s(&self.eta_min)),
            ("factor", s(&self.factor)),
            ("patience", s(&self.patience)),
            ("threshold", s(&self.threshold)),
            ("cooldown", s(&self.cooldown)),
            ("min_lr", s(&self.min_lr)),
            ("warmup_steps", s(&self.warmup_steps)),
            ("warmup_start_factor", s(&self.warmup_start_factor)),
        ]
    }

    /// The settings kept in checkpoint metadata (`None` for an older checkpoint).
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<OptimSettings>> {
        let Some(m) = object(extra, SETTINGS_KEY)? else {
            return Ok(None);
        };
        let k = SETTINGS_KEY;
        Ok(Some(OptimSettings {
            optimizer: field(&m, k, "optimizer")?,
            lr: field(&m, k, "lr")?,
            momentum: field(&m, k, "momentum")?,
            nesterov: field(&m, k, "nesterov")?,
            weight_decay: optional(&m, k, "weight_decay")?,
            clip_norm: optional(&m, k, "clip_norm")?,
            clip_value: optional(&m, k, "clip_value")?,
            schedule: field(&m, k, "schedule")?,
            step_size: optional(&m, k, "step_size")?,
            gamma: optional(&m, k, "gamma")?,
            t_max: optional(&m, k, "t_max")?,
            eta_min: field(&m, k, "eta_min")?,
            factor: field(&m, k, "factor")?,
            patience: field(&m, k, "patience")?,
            threshold: field(&m, k, "threshold")?,
            cooldown: field(&m, k, "cooldown")?,
            min_lr: field(&m, k, "min_lr")?,
            warmup_steps: field(&m, k, "warmup_steps")?,
            warmup_start_factor: field(&m, k, "warmup_start_factor")?,
        }))
    }
}

impl ScheduleState {
    /// Writes the state into checkpoint metadata (the f64 values as their bits).
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let bits = |v: f64| Value::String(v.to_bits().to_string());
        let m: Map<String, Value> = [
            ("plateau_lr", bits(self.plateau_lr)),
            ("best", bits(self.best)),
            ("num_bad", Value::String(self.num_bad.to_string())),
            (
                "cooldown_left",
                Value::String(self.cooldown_left.to_string()),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        extra.insert(STATE_KEY.into(), Value::Object(m).to_string());
    }

    /// The state kept in checkpoint metadata (`None` for an older checkpoint).
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<ScheduleState>> {
        let Some(m) = object(extra, STATE_KEY)? else {
            return Ok(None);
        };
        let bits = |k: &str| field::<u64>(&m, STATE_KEY, k).map(f64::from_bits);
        Ok(Some(ScheduleState {
            plateau_lr: bits("plateau_lr")?,
            best: bits("best")?,
            num_bad: field(&m, STATE_KEY, "num_bad")?,
            cooldown_left: field(&m, STATE_KEY, "cooldown_left")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_and_schedule_state_round_trip_through_metadata_exactly() {
        let s = OptimSettings {
            optimizer: "sgd".into(),
            lr: 0.1,
            momentum: 0.9,
            nesterov: true,
            clip_norm: Some(0.7),
            schedule: "cosine".into(),
            gamma: Some(0.1 + 0.2),
            warmup_steps: 3,
            ..OptimSettings::default()
        };
        let st = ScheduleState {
            plateau_lr: 0.1 * 0.3,
            best: f64::INFINITY,
            num_bad: 2,
            cooldown_left: 1,
        };
        let mut extra = HashMap::new();
        assert_eq!(OptimSettings::load(&extra).unwrap(), None);
        assert_eq!(ScheduleState::load(&extra).unwrap(), None);
        s.store(&mut extra);
        st.store(&mut extra);
        assert_eq!(OptimSettings::load(&extra).unwrap(), Some(s));
        assert_eq!(ScheduleState::load(&extra).unwrap(), Some(st));
        extra.insert(STATE_KEY.into(), r#"{"best": 1}"#.into());
        assert!(ScheduleState::load(&extra).is_err());
    }
}
