//! [`Runner::train`]: an app's training loop — epochs of shuffled batches over sequences
//! held in memory (of one length or of many), validation, early stopping, the best
//! model and the latest state written as checkpoints, a resume that continues exactly,
//! and a callback that sees every step and validation and can stop the run.

use std::path::{Path, PathBuf};

use tensorfit_data::BatchOrder;
use tensorfit_nn::{Batch, Checkpoint, Job, StepReport};

use super::error::{BadInput, Error, Result};
use super::runner::{Control, Runner};
use super::sequences::Sequences;
use super::train_position::TrainPosition;

/// The checkpoint entry holding the loop's settings that decide the data's order (batch,
/// order, seed, data size): a resumed run refuses others.
const SETTINGS_KEY: &str = "train.loop";

/// How [`Runner::train`] runs. The defaults are the ecosystem's: batches of 32 drawn from
/// the whole shuffled epoch, the last one smaller (PyTorch's `DataLoader(shuffle=True)`,
/// `drop_last=False`; Keras' `batch_size=32`), a validation after every epoch when
/// validation data is given, no early stopping, no checkpoint files.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{
///     BatchOrder, Control, DevicePolicy, FitOptions, Model, ModelDescription, Sequences,
/// };
/// let defaults = FitOptions::default();
/// assert_eq!((defaults.epochs, defaults.batch, defaults.order), (10, 32, BatchOrder::Shuffled));
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// // The latest state written at the end, and continued from when the file exists.
/// let path =
///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
/// let options = FitOptions {
///     epochs: 2,
///     batch: 4,
///     checkpoint: Some(path.clone()),
///     resume: true,
///     ..defaults
/// };
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// assert_eq!(run.train(&data, None, &options, |_| Control::Continue)?.steps, 4);
/// // A second run resumes from the file: its epochs are all done.
/// let mut again = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// let resumed = again.train(&data, None, &options, |_| Control::Continue)?;
/// assert_eq!((resumed.steps, resumed.epochs), (4, 2));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Passes over the training sequences.
    pub epochs: u64,
    /// Sequences per batch (at most: an epoch's last batch may be smaller).
    pub batch: usize,
    /// How an epoch's sequences are cut into batches: the whole epoch shuffled (the
    /// default), or sequences of similar lengths together (less padding, worse
    /// convergence: see [`BatchOrder::LengthGrouped`]).
    pub order: BatchOrder,
    /// The seed of every epoch's order.
    pub seed: u64,
    /// Also validate every this many optimizer steps (besides after every epoch).
    pub validate_every: Option<u64>,
    /// Early stopping: stop after this many validations in a row without a lower
    /// validation loss (Keras' `EarlyStopping(patience=…)`). Needs validation data.
    pub patience: Option<u64>,
    /// Write the model at each new best validation loss here (the last state at the end
    /// when there is no validation data): Keras' `ModelCheckpoint(save_best_only=True)`.
    pub best_checkpoint: Option<PathBuf>,
    /// End holding the state of the best validation (weights, optimizer state and step)
    /// instead of the last step's: Keras' `restore_best_weights`.
    pub restore_best: bool,
    /// The latest state, with the run's place in its epochs, written every
    /// [`FitOptions::checkpoint_every`] steps and at the end, to resume from.
    pub checkpoint: Option<PathBuf>,
    /// See [`FitOptions::checkpoint`] (`None`: at the end only).
    pub checkpoint_every: Option<u64>,
    /// Continue from [`FitOptions::checkpoint`] when that file exists: its state, its
    /// place in its epochs, its best validation. The run then ends with the weights of a
    /// run that never stopped.
    pub resume: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            epochs: 10,
            batch: 32,
            order: BatchOrder::Shuffled,
            seed: 0,
            validate_every: None,
            patience: None,
            best_checkpoint: None,
            restore_best: false,
            checkpoint: None,
            checkpoint_every: None,
            resume: false,
        }
    }
}

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

/// One validation of [`Runner::train`].
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

/// What [`Runner::train`]'s callback sees.
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
    /// for a bound that holds it ([`Runner::replans`]).
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

/// Why [`Runner::train`] ended.
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
    /// Early stopping: [`FitOptions::patience`] validations without a lower loss.
    EarlyStopping,
    /// The callback returned [`Control::Stop`].
    Callback,
}

/// How [`Runner::train`] ended.
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

impl Runner {
    /// Trains on `data` for [`FitOptions::epochs`] epochs of batches of up to
    /// [`FitOptions::batch`], each padded to its longest sequence (masked: the run must be
    /// planned for padded batches when the sequences differ in length, as
    /// [`Sequences::shapes`] plans them), validating on `validation` after every epoch
    /// (and every [`FitOptions::validate_every`] steps), stopping early after
    /// [`FitOptions::patience`] validations without a better loss, writing the best
    /// model and the latest state where the options say. `on_event` sees every step,
    /// validation and epoch's end and may return [`Control::Stop`]. A batch outside the
    /// plan's bound replans once ([`Runner::replans`]).
    ///
    /// ```
    /// use tensorfit::{Control, DevicePolicy, Event, FitOptions, Model, ModelDescription, Sequences};
    /// // 40 sequences of 3 to 9 steps of one feature; the class: is the first value high?
    /// let inputs: Vec<Vec<f32>> = (0..40).map(|i| vec![(i % 2) as f32; 3 + i % 7]).collect();
    /// let labels: Vec<f32> = (0..40).map(|i| (i % 2) as f32).collect();
    /// let (train, val) = Sequences::new(inputs, labels, 1).unwrap().split(0.25, 1).unwrap();
    /// let model = Model::new(ModelDescription::builder().features(1).lstm(8, 1).classify(2).build().unwrap(), 1).unwrap();
    /// let mut run = model
    ///     .open(train.shapes(8).holding(&val, 8), &DevicePolicy::only_cpu())
    ///     .unwrap();
    /// let options = FitOptions { epochs: 3, batch: 8, patience: Some(2), ..FitOptions::default() };
    /// let report = run
    ///     .train(&train, Some(&val), &options, |e| {
    ///         if let Event::Validated(v) = e {
    ///             println!("epoch {} validation loss {:.3}", v.epoch, v.scores.loss);
    ///         }
    ///         Control::Continue
    ///     })
    ///     .unwrap();
    /// assert_eq!(report.history.len(), report.epochs as usize);
    /// assert_eq!(report.steps, 3 * 4); // 30 sequences: 4 batches an epoch, the last of 6
    /// ```
    pub fn train(
        &mut self,
        data: &Sequences,
        validation: Option<&Sequences>,
        options: &FitOptions,
        mut on_event: impl FnMut(&Event) -> Control,
    ) -> Result<TrainReport> {
        check_options(options, validation.is_some())?;
        let settings = loop_settings(data, options);
        let mut pos = match options.checkpoint.as_deref() {
            Some(p) if options.resume && p.exists() => self.resume_from(p, &settings)?,
            _ => TrainPosition::default(),
        };
        let mut report = TrainReport {
            steps: self.session.trainer.step(),
            epochs: pos.epoch,
            last_loss: f32::NAN,
            history: Vec::new(),
            best: pos.best,
            stopped: Stopped::Finished,
        };
        // A run stopped early (its latest state past its patience) stays stopped.
        if options.patience.is_some_and(|p| pos.since_best >= p) {
            report.stopped = Stopped::EarlyStopping;
        }
        let mut best_state: Option<Checkpoint> = None;
        'epochs: while report.stopped == Stopped::Finished && pos.epoch < options.epochs {
            let epoch = pos.epoch;
            let order = data.epoch_order(options.batch, options.order, (options.seed, epoch))?;
            let (mut validated_at, mut asked_stop) = (None, false);
            for rows in order.iter().skip(pos.batches_done as usize) {
                let batch = data.batch(rows)?;
                self.hold_shape(step_shape(&batch), (report.steps, &mut on_event))?;
                let step = self.train_batch(&batch)?;
                let before = report.steps;
                report.steps = self.session.trainer.step();
                report.last_loss = step.loss;
                pos.batches_done += 1;
                pos.loss_sum += step.loss as f64;
                pos.loss_count += 1;
                let event = Event::Step {
                    epoch: epoch + 1,
                    report: &step,
                };
                // A stop asked for here comes after this step's validation and
                // checkpoint, so that a run resumed from it does what one never stopped
                // does.
                let asked = on_event(&event) == Control::Stop;
                if let (Some(v), Some(every)) = (validation, options.validate_every) {
                    if crossed(before, report.steps, every) {
                        validated_at = Some(report.steps);
                        let ctx = (epoch + 1, options, &mut best_state);
                        if let Some(stop) =
                            self.validate(v, &mut pos, &mut report, ctx, &mut on_event)?
                        {
                            report.stopped = stop;
                            break 'epochs;
                        }
                    }
                }
                if options
                    .checkpoint_every
                    .is_some_and(|e| crossed(before, report.steps, e))
                {
                    self.save_latest(options, &settings, &pos, &mut on_event);
                }
                if asked {
                    asked_stop = true;
                    break;
                }
            }
            // Stopped within the epoch: its end (a validation) comes when it is resumed.
            // Stopped at its last batch: the epoch ends first, so the latest state is at
            // the next epoch's start either way.
            if asked_stop && (pos.batches_done as usize) < order.len() {
                report.stopped = Stopped::Callback;
                break;
            }
            (pos.epoch, pos.batches_done) = (epoch + 1, 0);
            report.epochs = pos.epoch;
            if let Some(v) = validation.filter(|_| validated_at != Some(report.steps)) {
                let ctx = (epoch + 1, options, &mut best_state);
                if let Some(stop) = self.validate(v, &mut pos, &mut report, ctx, &mut on_event)? {
                    report.stopped = stop;
                    break;
                }
            }
            let event = Event::EpochEnd {
                epoch: epoch + 1,
                step: report.steps,
            };
            if on_event(&event) == Control::Stop || asked_stop {
                report.stopped = Stopped::Callback;
            }
        }
        // Without validation the best checkpoint gets the last state.
        if let (None, Some(path)) = (validation, options.best_checkpoint.as_deref()) {
            self.save(path)?;
        }
        self.save_latest(options, &settings, &pos, &mut on_event);
        if let Some(best) = best_state.filter(|_| options.restore_best) {
            self.session.trainer.restore_state(&best)?;
        }
        Ok(report)
    }

    /// Validates on `data`, records the validation in `pos` and `report`, tells the
    /// schedule (reduce-on-plateau), writes the best model and keeps its state when asked;
    /// returns why to stop, if the callback or early stopping says so.
    fn validate(
        &mut self,
        data: &Sequences,
        pos: &mut TrainPosition,
        report: &mut TrainReport,
        (epoch, options, best_state): (u64, &FitOptions, &mut Option<Checkpoint>),
        on_event: &mut impl FnMut(&Event) -> Control,
    ) -> Result<Option<Stopped>> {
        // The evaluation's batches: up to the plan's evaluation batch, of up to the
        // longest sequence's steps.
        let shape = Job::Eval {
            batch: self.eval_batch().min(data.len()),
            seq_len: data.steps(),
        };
        self.hold_shape(shape, (report.steps, on_event))?;
        let scores = self.evaluate_sequences(data)?;
        let train_loss = (pos.loss_sum / pos.loss_count.max(1) as f64) as f32;
        (pos.loss_sum, pos.loss_count) = (0.0, 0);
        let best = pos.best.is_none_or(|(l, _)| scores.loss < l);
        if best {
            pos.best = Some((scores.loss, report.steps));
            pos.since_best = 0;
            report.best = pos.best;
            if let Some(path) = options.best_checkpoint.as_deref() {
                if let Err(error) = self.save(path) {
                    on_event(&Event::CheckpointFailed {
                        path,
                        error: &error,
                    });
                }
            }
            if options.restore_best {
                *best_state = Some(self.session.state()?.clone());
            }
        } else {
            pos.since_best += 1;
        }
        self.observe_validation(scores.loss as f64);
        let validated = Validated {
            epoch,
            step: report.steps,
            train_loss,
            scores,
            best,
            since_best: pos.since_best,
        };
        report.history.push(validated);
        if on_event(&Event::Validated(&validated)) == Control::Stop {
            return Ok(Some(Stopped::Callback));
        }
        Ok(options
            .patience
            .is_some_and(|p| pos.since_best >= p)
            .then_some(Stopped::EarlyStopping))
    }

    /// Writes the latest state with the run's position to [`FitOptions::checkpoint`];
    /// a failure is told to the callback and costs that checkpoint only.
    fn save_latest(
        &mut self,
        options: &FitOptions,
        settings: &str,
        pos: &TrainPosition,
        on_event: &mut impl FnMut(&Event) -> Control,
    ) {
        let Some(path) = options.checkpoint.as_deref() else {
            return;
        };
        let written = (|| -> Result<()> {
            let metadata = self.metadata.clone();
            let state = self.state()?;
            state.extra.extend(metadata);
            pos.store(&mut state.extra);
            state.extra.insert(SETTINGS_KEY.into(), settings.into());
            Ok(state.save(path)?)
        })();
        if let Err(error) = written {
            on_event(&Event::CheckpointFailed {
                path,
                error: &error,
            });
        }
    }

    /// Restores the latest state written by a run of the same settings at `path`, and
    /// returns its position.
    fn resume_from(&mut self, path: &Path, settings: &str) -> Result<TrainPosition> {
        let ck = Checkpoint::load(path)?;
        let refuse = |message: String| Error::File {
            path: path.to_path_buf(),
            message,
        };
        let pos = TrainPosition::load(&ck.extra)?.ok_or_else(|| {
            refuse("holds no training position: it is not the latest state of a run (load it with Model::load to start a new run from its weights)".into())
        })?;
        match ck.extra.get(SETTINGS_KEY) {
            Some(s) if s == settings => {}
            other => {
                return Err(refuse(format!(
                    "was written by a run of other settings or data ({}), not {settings}: resuming would not continue it",
                    other.map_or("none", String::as_str)
                )))
            }
        }
        if ck.config != *self.session.trainer.model() {
            return Err(refuse(format!(
                "holds the model {}, and the run is of {}",
                ck.config,
                self.session.trainer.model()
            )));
        }
        self.session.trainer.restore_state(&ck)?;
        self.restore_training(&ck)?;
        Ok(pos)
    }

    /// Makes the run's bound hold `shape` (a training step's or the evaluation of a set of
    /// sequences), replanning once when it does not, which the callback is told (at step
    /// `step`).
    fn hold_shape(
        &mut self,
        shape: Job,
        (step, on_event): (u64, &mut impl FnMut(&Event) -> Control),
    ) -> Result<()> {
        for message in self.hold(shape)? {
            on_event(&Event::Replanned {
                step,
                message: &message,
            });
        }
        Ok(())
    }
}

/// A training step's shape: `batch`'s sequences and steps.
fn step_shape(batch: &Batch) -> Job {
    let d = batch.x.shape.dims();
    Job::Train {
        batch: d.get(1).copied().unwrap_or(0),
        seq_len: d.first().copied().unwrap_or(0),
        eval: None,
    }
}

/// Refuses options that cannot run.
fn check_options(options: &FitOptions, validating: bool) -> Result<()> {
    if options.batch == 0 {
        return Err(Error::BadInput(BadInput::of(
            "batch",
            "at least 1 sequence",
            "0",
            "a batch of 0 sequences: a batch needs at least 1",
        )));
    }
    if options.patience.is_some() && !validating {
        return Err(Error::BadInput(BadInput::of(
            "patience",
            "validation data to watch",
            "no validation data",
            "early stopping (patience) needs validation data: give Runner::train some (Sequences::split holds some out)",
        )));
    }
    if options.resume && options.checkpoint.is_none() {
        return Err(Error::BadInput(BadInput::of(
            "resume",
            "a checkpoint file to resume from",
            "no checkpoint",
            "resume continues from FitOptions::checkpoint: give the file",
        )));
    }
    Ok(())
}

/// What decides the data's order and so must match on resume: batch, order, seed, and
/// the training data's size and lengths.
fn loop_settings(data: &Sequences, options: &FitOptions) -> String {
    let steps: u64 = data.lengths().iter().map(|&l| l as u64).sum();
    format!(
        "batch {}, order {}, seed {}, {} sequences of {steps} steps",
        options.batch,
        options.order.name(),
        options.seed,
        data.len()
    )
}

/// Whether a multiple of `every` lies in `(before, after]` (never for 0): a batch of
/// several updates still validates and checkpoints at each multiple it passes.
fn crossed(before: u64, after: u64, every: u64) -> bool {
    every > 0 && after / every > before / every
}
