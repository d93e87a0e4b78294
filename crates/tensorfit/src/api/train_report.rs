//! What [`crate::Runner::train`] tells: each event its callback sees, and how it ended.

use std::path::Path;

use tensorfit_nn::StepReport;

use super::error::Error;

/// Mean loss and accuracy over a set of sequences, each weighing the same.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{DevicePolicy, Model, ModelDescription, Sequences};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// let scores = run.evaluate_sequences(&data)?;
/// assert_eq!(scores.sequences, 8);
/// assert!((0.0..=1.0).contains(&scores.accuracy.unwrap()));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    /// The mean loss.
    pub loss: f32,
    /// The fraction classified right; `None` for a regression.
    pub accuracy: Option<f32>,
    /// The sequences scored.
    pub sequences: usize,
}

/// One validation of [`crate::Runner::train`].
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{Control, DevicePolicy, FitOptions, Model, ModelDescription, Sequences};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let (train, val) = data.split(0.25, 1)?;
/// let mut run = model.open(train.shapes(2).holding(&val, 2), &DevicePolicy::only_cpu())?;
/// let options = FitOptions { epochs: 2, batch: 2, ..FitOptions::default() };
/// let report = run.train(&train, Some(&val), &options, |_| Control::Continue)?;
/// let first = report.history[0];
/// assert_eq!((first.epoch, first.step, first.best, first.since_best), (1, 3, true, 0));
/// assert_eq!(first.scores.sequences, 2);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Validated {
    /// The epoch (from 1) in progress or just finished.
    pub epoch: u64,
    /// The optimizer steps taken so far.
    pub step: u64,
    /// The mean training loss of the steps since the last validation.
    pub train_loss: f32,
    /// The validation's scores.
    pub scores: Scores,
    /// Whether its loss is the lowest so far.
    pub best: bool,
    /// Validations since the best one (0 when this is it).
    pub since_best: u64,
}

/// What [`crate::Runner::train`]'s callback sees.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{Control, DevicePolicy, Event, FitOptions, Model, ModelDescription, Sequences};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// let options = FitOptions { epochs: 2, batch: 4, ..FitOptions::default() };
/// let (mut steps, mut epochs) = (0, 0);
/// run.train(&data, None, &options, |event| {
///     match event {
///         Event::Step { .. } => steps += 1,
///         Event::EpochEnd { .. } => epochs += 1,
///         _ => {}
///     }
///     Control::Continue
/// })?;
/// assert_eq!((steps, epochs), (4, 2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A training step, in epoch `epoch` (from 1).
    Step {
        /// The epoch in progress (from 1).
        epoch: u64,
        /// The step's report.
        report: &'a StepReport,
    },
    /// A validation.
    Validated(&'a Validated),
    /// Epoch `epoch` (from 1) is done, after `step` optimizer steps.
    EpochEnd {
        /// The epoch done.
        epoch: u64,
        /// The optimizer steps so far.
        step: u64,
    },
    /// A batch or validation set outside the plan's bound made the run plan again, once,
    /// for a bound that holds it ([`crate::Runner::replans`]).
    Replanned {
        /// The optimizer steps so far.
        step: u64,
        /// What was planned, in words.
        message: &'a str,
    },
    /// A checkpoint could not be written: the run goes on (the next one tries again).
    CheckpointFailed {
        /// The file.
        path: &'a Path,
        /// Why.
        error: &'a Error,
    },
}

/// Why [`crate::Runner::train`] ended.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{
///     Control, DevicePolicy, Event, FitOptions, Model, ModelDescription, Sequences, Stopped,
/// };
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// let options = FitOptions { epochs: 5, batch: 4, ..FitOptions::default() };
/// let report = run.train(&data, None, &options, |event| match event {
///     Event::EpochEnd { epoch: 2, .. } => Control::Stop,
///     _ => Control::Continue,
/// })?;
/// assert_eq!((report.stopped, report.epochs), (Stopped::Callback, 2));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every epoch ran.
    Finished,
    /// Early stopping: [`crate::FitOptions::patience`] validations without a lower loss.
    EarlyStopping,
    /// The callback returned [`crate::Control::Stop`].
    Callback,
}

/// How [`crate::Runner::train`] ended.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{
///     Control, DevicePolicy, FitOptions, Model, ModelDescription, Sequences, Stopped,
/// };
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let (train, val) = data.split(0.25, 1)?;
/// let mut run = model.open(train.shapes(2).holding(&val, 2), &DevicePolicy::only_cpu())?;
/// let options = FitOptions { epochs: 3, batch: 2, ..FitOptions::default() };
/// let report = run.train(&train, Some(&val), &options, |_| Control::Continue)?;
/// assert_eq!((report.stopped, report.epochs, report.steps), (Stopped::Finished, 3, 9));
/// assert_eq!(report.history.len(), 3); // a validation after each epoch
/// let (loss, step) = report.best.unwrap();
/// assert!(report.history.iter().any(|v| v.scores.loss == loss && v.step == step));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    /// The optimizer steps taken by the run in all (a resumed run's count goes on).
    pub steps: u64,
    /// The epochs finished.
    pub epochs: u64,
    /// The last step's loss (`NaN` when no step ran).
    pub last_loss: f32,
    /// Every validation of this call, in order (Keras' `History`).
    pub history: Vec<Validated>,
    /// The lowest validation loss of the run and its step (a resumed run's included).
    pub best: Option<(f32, u64)>,
    /// Why the run ended.
    pub stopped: Stopped,
}
