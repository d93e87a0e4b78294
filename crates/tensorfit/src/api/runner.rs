//! [`Runner`]: a model open on its chosen device for a job: train, evaluate, predict,
//! save.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use tensorfit_core::HostTensor;
use tensorfit_nn::{Batch, InputSpec, Job, StepReport};

use super::error::{BadInput, Error, Result};
use super::model::{Model, Training};
use crate::job_switch::widen;
use crate::session::Session;

/// What a per-step callback tells [`Runner::fit`].
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{Control, DevicePolicy, Model, ModelDescription, Sequences};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu())?;
/// let fit = run.fit(data.batches(2, 5, 1), |step| match step.step {
///     3 => Control::Stop,
///     _ => Control::Continue,
/// })?;
/// assert_eq!((fit.steps, fit.stopped_early), (3, true));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Take the next step.
    Continue,
    /// Stop after this step (early stopping).
    Stop,
}

/// How [`Runner::fit`] ended.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{Control, DevicePolicy, Model, ModelDescription, Sequences};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu())?;
/// let fit = run.fit(data.batches(2, 1, 1), |_| Control::Continue)?;
/// assert_eq!(fit.steps, 4); // one epoch of 8 sequences in batches of 2
/// assert!(!fit.stopped_early && fit.last_loss.is_finite());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FitReport {
    /// Optimizer steps taken by this call.
    pub steps: u64,
    /// The last step's loss (`NaN` when no step ran).
    pub last_loss: f32,
    /// Whether the callback stopped the run before the batches ran out.
    pub stopped_early: bool,
}

/// A model open on the device its plan chose, holding its weights (and, for training, its
/// optimizer state) there. Training steps and evaluations survive the device failing: the
/// run moves to another plan or device and repeats the step.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription, Runner};
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let job = Job::Train { batch: 2, seq_len: 3, eval: Some((2, 3)) };
/// let mut run: Runner = model.open(job, &DevicePolicy::only_cpu())?;
/// let (x, labels) = (HostTensor::new([3, 2, 2], vec![0.5; 12])?, [0.0, 1.0]);
/// let step = run.train_step(&x, &labels)?;
/// let eval = run.evaluate(&x, &labels)?;
/// assert!(step.loss.is_finite() && eval.loss.is_finite());
/// let trained: Model = run.model()?;
/// assert_ne!(trained.parameters(), model.parameters());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Runner {
    pub(super) session: Session,
    training: Training,
    pub(super) metadata: HashMap<String, String>,
    /// Steps keep a host copy of the state to move to another plan or device when theirs
    /// fails ([`Runner::set_recovery`]).
    recovery: bool,
}

impl Runner {
    pub(crate) fn new(session: Session, model: &Model) -> Runner {
        Runner::with_training(session, model.training().clone(), model.metadata().clone())
    }

    pub(crate) fn with_training(
        session: Session,
        training: Training,
        metadata: HashMap<String, String>,
    ) -> Runner {
        Runner {
            session,
            training,
            metadata,
            recovery: true,
        }
    }

    /// The id of the device the run is on now (`cpu`, `wgpu:0`, `cuda:0`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(run.device(), "cpu");
    /// # Ok(())
    /// # }
    /// ```
    pub fn device(&self) -> &str {
        &self.session.device
    }

    /// The strategy the run follows, in words.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let run = plan.start(&model)?;
    /// assert_eq!(Some(run.strategy()), plan.strategy());
    /// # Ok(())
    /// # }
    /// ```
    pub fn strategy(&self) -> &str {
        &self.session.strategy
    }

    /// The peak device memory the plan allocated, in bytes.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let run = plan.start(&model)?;
    /// assert_eq!(Some(run.planned_peak_bytes()), plan.peak_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub fn planned_peak_bytes(&self) -> u64 {
        self.session.plan.peak_bytes()
    }

    /// The peak device memory measured so far, in bytes (comparable with the plan's).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// assert!(run.measured_peak_bytes() > 0);
    /// assert!(run.measured_peak_bytes() <= run.planned_peak_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub fn measured_peak_bytes(&self) -> u64 {
        self.session.measured_peak_bytes()
    }

    /// Whether steps survive their device failing (on by default): before each training
    /// step or evaluation the run brings its host copy of the training state up to date,
    /// and on out-of-memory or a lost device it replans and repeats the step elsewhere.
    /// Off, a step runs straight on the device (no copy: what a benchmark times) and a
    /// failure is the step's error.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let (job, cpu) =
    ///     (Job::Train { batch: 2, seq_len: 3, eval: None }, DevicePolicy::only_cpu());
    /// let (x, labels) = (HostTensor::new([3, 2, 2], vec![0.5; 12])?, [0.0, 1.0]);
    /// let mut bare = model.open(job, &cpu)?;
    /// bare.set_recovery(false); // no host copy before each step: what a benchmark times
    /// let mut safe = model.open(job, &cpu)?;
    /// assert_eq!(bare.train_step(&x, &labels)?, safe.train_step(&x, &labels)?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_recovery(&mut self, on: bool) {
        self.recovery = on;
    }

    /// Runs `step` on the trainer, through recovery when it is on.
    pub(super) fn step_on<T>(
        &mut self,
        mut step: impl FnMut(&mut tensorfit_nn::Trainer) -> tensorfit_core::Result<T>,
    ) -> Result<T> {
        Ok(match self.recovery {
            true => self.session.with_recovery(step)?,
            false => step(&mut self.session.trainer)?,
        })
    }

    /// Whether the run is planned for padded batches (sequences of different lengths,
    /// each with its length: [`crate::Shapes::padded`], [`crate::Sequences::shapes`]). Such a
    /// run takes batches with their lengths only ([`Runner::train_batch`],
    /// [`Runner::evaluate_batch`], [`Runner::predict_sequences`]): a bare tensor could
    /// hold padding it cannot see.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Error, HostTensor, Model, ModelDescription, Sequences};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// // Sequences of 3 steps and 1 step, of 2 features.
    /// let data = Sequences::new(vec![vec![0.0; 6], vec![0.0; 2]], vec![0.0, 1.0], 2)?;
    /// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu())?;
    /// assert!(run.padded());
    /// // A bare tensor may hold padding the run cannot see: refused.
    /// match run.train_step(&HostTensor::zeros([3, 2, 2]), &[0.0, 1.0]) {
    ///     Err(Error::BadInput(b)) => assert_eq!(b.argument.as_deref(), Some("x")),
    ///     other => panic!("{other:?}"),
    /// }
    /// run.train_batch(&data.all()?)?; // the batch with its lengths
    /// # Ok(())
    /// # }
    /// ```
    pub fn padded(&self) -> bool {
        self.session.trainer.options().padded
    }

    /// One training step on `x` (`[time, batch, features]`, or `[time, batch]` token
    /// ids) with one label per sequence (a regression: `outputs` values per sequence),
    /// every sequence all of `x`'s steps.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::new([3, 2, 2], (0..12).map(|i| i as f32 / 12.0).collect())?;
    /// let first = run.train_step(&x, &[0.0, 2.0])?; // one class index per sequence
    /// let second = run.train_step(&x, &[0.0, 2.0])?;
    /// assert_eq!((first.step, second.step), (1, 2));
    /// assert!(second.loss < first.loss);
    /// # Ok(())
    /// # }
    /// ```
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        self.refuse_bare_on_padded("train_step", "train_batch")?;
        self.train_at(x, labels, None)
    }

    /// One training step on `batch`, each sequence's padded steps masked when it has
    /// lengths ([`Batch::lengths`]: [`crate::Sequences::batch`] gives them).
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Model, ModelDescription, Sequences};
    /// let model = Model::new(ModelDescription::builder().features(2).lstm(8, 1).classify(3).build().unwrap(), 1).unwrap();
    /// // Sequences of 4 and 2 steps of 2 features.
    /// let data = Sequences::new(vec![vec![0.5; 8], vec![1.0; 4]], vec![0.0, 2.0], 2).unwrap();
    /// let mut run = model.open(data.shapes(2), &DevicePolicy::only_cpu()).unwrap();
    /// let step = run.train_batch(&data.all().unwrap()).unwrap();
    /// assert!(step.loss.is_finite());
    /// ```
    pub fn train_batch(&mut self, batch: &Batch) -> Result<StepReport> {
        let lengths = lengths_of(batch)?;
        self.train_at(&batch.x, &batch.labels, lengths.as_deref())
    }

    fn train_at(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
    ) -> Result<StepReport> {
        let x = &*self.conform(x)?;
        self.check_planned(x, true)?;
        self.step_on(|t| t.train_step_at(x, labels, lengths))
    }

    /// Trains on every batch of `batches`, calling `on_step` after each step with its
    /// report (step, loss, learning rate, probabilities for custom metrics); the callback
    /// returns [`Control::Stop`] to stop early. Batches come from
    /// [`super::Sequences::batches`], the built-in task, or any reader of the data crate;
    /// [`Runner::train`] runs epochs with validation and early stopping.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Control, DevicePolicy, Model, ModelDescription, Sequences};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
    /// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
    /// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
    /// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
    /// let mut losses = Vec::new();
    /// let fit = run.fit(data.batches(4, 3, 7), |step| {
    ///     losses.push(step.loss);
    ///     Control::Continue
    /// })?;
    /// assert_eq!(fit.steps, 6); // 3 epochs of 2 batches
    /// assert_eq!(fit.last_loss, losses[5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fit(
        &mut self,
        batches: impl IntoIterator<Item = Result<Batch>>,
        mut on_step: impl FnMut(&StepReport) -> Control,
    ) -> Result<FitReport> {
        let mut report = FitReport {
            steps: 0,
            last_loss: f32::NAN,
            stopped_early: false,
        };
        for batch in batches {
            let step = self.train_batch(&batch?)?;
            report.steps += 1;
            report.last_loss = step.loss;
            if on_step(&step) == Control::Stop {
                report.stopped_early = true;
                break;
            }
        }
        Ok(report)
    }

    /// The model with the weights the run has now.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// let trained = run.model()?;
    /// assert_eq!(trained.description(), model.description());
    /// assert_ne!(trained.parameters(), model.parameters());
    /// # Ok(())
    /// # }
    /// ```
    pub fn model(&mut self) -> Result<Model> {
        Ok(Model::from_checkpoint(
            self.checkpoint()?,
            self.training.clone(),
        ))
    }

    /// Writes a checkpoint: the model, its weights, the optimizer's state and the step,
    /// atomically (safetensors, PyTorch's names).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Checkpoint, DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// let path =
    ///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
    /// run.save(&path)?;
    /// let ck = Checkpoint::load(&path)?;
    /// assert_eq!(ck.step, 1);
    /// assert!(!ck.optimizer.is_empty()); // to continue training from
    /// assert_eq!(ck.params, run.parameters()?);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn save(&mut self, path: &Path) -> Result<()> {
        // From the session's host copy of the state: no copy more while it is written.
        let state = self.session.state()?;
        state.extra = self.metadata.clone();
        Ok(state.save(path)?)
    }

    /// `x` as the model takes it: one value per step is `[time, batch]` (as
    /// [`crate::Sequences::batch`] lays it out) and a dense model of one feature takes it as
    /// `[time, batch, 1]` (a copy; token models take `[time, batch]` as it is).
    pub(super) fn conform<'x>(&self, x: &'x HostTensor) -> Result<Cow<'x, HostTensor>> {
        match (&self.session.trainer.model().input, x.shape.dims()) {
            (InputSpec::Dense { features: 1 }, &[t, b]) => {
                Ok(Cow::Owned(HostTensor::new([t, b, 1], x.data.clone())?))
            }
            _ => Ok(Cow::Borrowed(x)),
        }
    }

    /// Refuses a bare tensor (`method`) on a run planned for padded batches, naming the
    /// method that takes the lengths (`instead`).
    pub(super) fn refuse_bare_on_padded(&self, method: &str, instead: &str) -> Result<()> {
        if !self.padded() {
            return Ok(());
        }
        Err(Error::BadInput(BadInput::of(
            "x",
            "a batch with its sequences' lengths",
            "a tensor without lengths",
            format!(
                "the run is planned for padded batches, and `{method}` takes a tensor without the sequences' lengths, which may hold padding: use `Runner::{instead}`"
            ),
        )))
    }

    /// Refuses `x` (`[time, batch, …]`) when the plan has no training step (`training`) or
    /// evaluation that holds its shape. A plan is made for its job read as a bound: any
    /// batch and length up to the job's run on it as planned, on their own extent.
    pub(super) fn check_planned(&self, x: &HostTensor, training: bool) -> Result<()> {
        let d = x.shape.dims();
        let [steps, batch, ..] = d[..] else {
            return Err(Error::BadInput(BadInput::of(
                "x",
                "[time, batch, features], or [time, batch] token ids",
                x.shape.to_string(),
                format!(
                    "the input has shape {}: a batch is [time, batch, features], or [time, batch] token ids",
                    x.shape
                ),
            )));
        };
        let (train, eval) = self.session.job().parts();
        let (bound, job, what) = match training {
            true => (
                train,
                Job::Train {
                    batch,
                    seq_len: steps,
                    eval: None,
                },
                "training steps",
            ),
            false => (
                eval,
                Job::Eval {
                    batch,
                    seq_len: steps,
                },
                "evaluations",
            ),
        };
        match bound {
            // A plan for a bound serves every shape within it (every step asks: no
            // program look-up).
            Some(_) if widen(self.session.job(), job) == self.session.job() => Ok(()),
            Some((b, t)) => Err(Error::BadInput(BadInput::of(
                "x",
                format!("at most {b} sequences of at most {t} steps"),
                format!("{batch} sequences of {steps} steps"),
                format!(
                    "the run is planned for {what} of up to {b} sequences of up to {t} steps; the input has {batch} of {steps}: plan a job that holds this shape"
                ),
            ))),
            None => Err(Error::bad_input(format!(
                "the run's plan has no {what} (job {:?})",
                self.session.job()
            ))),
        }
    }

    /// The state on the device, with the model's metadata.
    fn checkpoint(&mut self) -> Result<tensorfit_nn::Checkpoint> {
        let mut ck = self.session.trainer.checkpoint()?;
        ck.extra = self.metadata.clone();
        Ok(ck)
    }
}

/// `batch`'s lengths as the trainer takes them, after checking there is one per
/// sequence, each from 1 to the batch's steps.
pub(super) fn lengths_of(batch: &Batch) -> Result<Option<Vec<f32>>> {
    let Some(lengths) = &batch.lengths else {
        return Ok(None);
    };
    let d = batch.x.shape.dims();
    let (steps, rows) = (
        d.first().copied().unwrap_or(0),
        d.get(1).copied().unwrap_or(0),
    );
    if lengths.len() != rows {
        return Err(Error::BadInput(BadInput::of(
            "lengths",
            format!("one per sequence of the batch, {rows}"),
            format!("{} lengths", lengths.len()),
            format!("{} lengths for a batch of {rows} sequences", lengths.len()),
        )));
    }
    if let Some(i) = lengths.iter().position(|&l| l == 0 || l > steps) {
        return Err(Error::BadInput(BadInput::of(
            "lengths",
            format!("from 1 to the batch's {steps} steps"),
            format!("{} for sequence {i}", lengths[i]),
            format!(
                "sequence {i} of the batch has length {}: lengths are from 1 to the batch's {steps} steps",
                lengths[i]
            ),
        )));
    }
    Ok(Some(lengths.iter().map(|&l| l as f32).collect()))
}
