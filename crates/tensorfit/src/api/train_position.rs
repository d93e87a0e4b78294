//! [`TrainPosition`]: where a training run is in its epochs, kept in its latest
//! checkpoint so that a resumed run continues exactly.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::error::{Error, Result};

/// The checkpoint entry (`extra`) holding a run's [`TrainPosition`], as JSON:
/// `{"val_fraction": 0.1, "epoch": 2, "batches_done": 1, "best": [0.31, 12],
/// "since_best": 0, "loss_sum": …, "loss_count": …}`.
pub const POSITION_KEY: &str = "data.position";

/// Where a training run is: the epoch and batch of its next step, its best validation so
/// far and the training loss since its last validation ([`crate::Runner::train`] and
/// `tensorfit train --data` keep it in their latest state). With the run's seed, which
/// recomputes each epoch's order, it is all a resumed run needs to continue as if it had
/// never stopped.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{Checkpoint, Control, DevicePolicy, FitOptions, Model, ModelDescription};
/// use tensorfit::{Sequences, TrainPosition};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let path =
///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
/// let options =
///     FitOptions { epochs: 2, batch: 4, checkpoint: Some(path.clone()), ..FitOptions::default() };
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// run.train(&data, None, &options, |_| Control::Continue)?;
/// let position = TrainPosition::load(&Checkpoint::load(&path)?.extra)?.unwrap();
/// assert_eq!((position.epoch, position.batches_done, position.best), (2, 0, None));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TrainPosition {
    /// The fraction of the data held out to validate on (`--val-fraction`; 0 when the
    /// validation set was given apart).
    pub val_fraction: f64,
    /// The epoch (from 0) of the next step.
    pub epoch: u64,
    /// How many batches of that epoch's order are trained already.
    pub batches_done: u64,
    /// The lowest validation loss so far and its step.
    pub best: Option<(f32, u64)>,
    /// Validations since the best one (early stopping's count).
    pub since_best: u64,
    /// The training loss since the last validation: its sum and count.
    pub loss_sum: f64,
    /// See [`TrainPosition::loss_sum`].
    pub loss_count: u64,
}

impl TrainPosition {
    /// Writes the position into checkpoint metadata, under [`POSITION_KEY`].
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use std::collections::HashMap;
    /// use tensorfit::{TrainPosition, POSITION_KEY};
    /// let position = TrainPosition {
    ///     epoch: 3,
    ///     batches_done: 2,
    ///     best: Some((0.25, 17)),
    ///     ..TrainPosition::default()
    /// };
    /// let mut extra = HashMap::new();
    /// position.store(&mut extra);
    /// assert!(extra[POSITION_KEY].contains("\"epoch\":3"));
    /// assert_eq!(TrainPosition::load(&extra)?, Some(position));
    /// # Ok(())
    /// # }
    /// ```
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let v = json!({
            "val_fraction": self.val_fraction,
            "epoch": self.epoch, "batches_done": self.batches_done,
            "best": self.best.map(|(loss, step)| json!([loss, step])),
            "since_best": self.since_best,
            "loss_sum": self.loss_sum, "loss_count": self.loss_count,
        });
        extra.insert(POSITION_KEY.to_string(), v.to_string());
    }

    /// The position kept in checkpoint metadata (`None` when there is none: the
    /// checkpoint is not a run's latest state).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use std::collections::HashMap;
    /// use tensorfit::{Error, TrainPosition, POSITION_KEY};
    /// let mut extra = HashMap::new();
    /// assert_eq!(TrainPosition::load(&extra)?, None); // not a run's latest state
    /// extra.insert(POSITION_KEY.to_string(), "{\"epoch\": -1}".to_string());
    /// assert!(matches!(TrainPosition::load(&extra), Err(Error::BadInput(_))));
    /// # Ok(())
    /// # }
    /// ```
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<TrainPosition>> {
        let Some(text) = extra.get(POSITION_KEY) else {
            return Ok(None);
        };
        let bad = || Error::bad_input(format!("`{POSITION_KEY}` is not a position: {text}"));
        let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
        let int = |key: &str| v[key].as_u64().ok_or_else(bad);
        let best = match &v["best"] {
            Value::Null => None,
            b => Some((
                b[0].as_f64().ok_or_else(bad)? as f32,
                b[1].as_u64().ok_or_else(bad)?,
            )),
        };
        Ok(Some(TrainPosition {
            val_fraction: v["val_fraction"].as_f64().ok_or_else(bad)?,
            epoch: int("epoch")?,
            batches_done: int("batches_done")?,
            best,
            since_best: int("since_best")?,
            loss_sum: v["loss_sum"].as_f64().ok_or_else(bad)?,
            loss_count: int("loss_count")?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_comes_back_from_a_checkpoints_extra_exactly() {
        let p = TrainPosition {
            val_fraction: 0.1,
            epoch: 3,
            batches_done: 2,
            best: Some((0.123_456_79, 17)),
            since_best: 1,
            loss_sum: 2.000_000_000_000_001,
            loss_count: 5,
        };
        let mut extra = HashMap::new();
        assert_eq!(TrainPosition::load(&extra).unwrap(), None);
        p.store(&mut extra);
        assert_eq!(TrainPosition::load(&extra).unwrap(), Some(p));
        let none = TrainPosition { best: None, ..p };
        none.store(&mut extra);
        assert_eq!(TrainPosition::load(&extra).unwrap(), Some(none));
        extra.insert(POSITION_KEY.into(), "{\"epoch\": -1}".into());
        assert!(TrainPosition::load(&extra).is_err());
    }
}
