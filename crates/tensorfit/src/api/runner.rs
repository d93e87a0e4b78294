//! [`Runner`]: a model open on its chosen device for a job: train, evaluate, predict,
//! save.

use std::collections::HashMap;
use std::path::Path;

use tensorfit_core::HostTensor;
use tensorfit_nn::{Batch, EvalReport, Job, StepReport};

use super::error::{BadInput, Error, Result};
use super::model::{Model, Training};
use super::sequences::{steps_of, time_major};
use crate::session::Session;

/// What a per-step callback tells [`Runner::fit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Take the next step.
    Continue,
    /// Stop after this step (early stopping).
    Stop,
}

/// How [`Runner::fit`] ended.
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
#[derive(Debug)]
pub struct Runner {
    session: Session,
    training: Training,
    metadata: HashMap<String, String>,
}

impl Runner {
    pub(crate) fn new(session: Session, model: &Model) -> Runner {
        Runner {
            session,
            training: model.training().clone(),
            metadata: model.metadata().clone(),
        }
    }

    /// The id of the device the run is on now (`cpu`, `wgpu:0`, `cuda:0`).
    pub fn device(&self) -> &str {
        &self.session.device
    }

    /// The strategy the run follows, in words.
    pub fn strategy(&self) -> &str {
        &self.session.strategy
    }

    /// The peak device memory the plan allocated, in bytes.
    pub fn planned_peak_bytes(&self) -> u64 {
        self.session.plan.peak_bytes()
    }

    /// The peak device memory measured so far, in bytes (comparable with the plan's).
    pub fn measured_peak_bytes(&self) -> u64 {
        self.session.measured_peak_bytes()
    }

    /// One training step on `x` (`[time, batch, features]`, or `[time, batch]` token
    /// ids) with one label per sequence (a regression: `outputs` values per sequence).
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        self.check_planned(x, true)?;
        Ok(self.session.with_recovery(|t| t.train_step(x, labels))?)
    }

    /// Trains on every batch of `batches`, calling `on_step` after each step with its
    /// report (step, loss, learning rate, probabilities for custom metrics); the callback
    /// returns [`Control::Stop`] to stop early. Batches come from
    /// [`super::Sequences::batches`], the built-in task, or any reader of the data crate.
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
            let batch = batch?;
            let step = self.train_step(&batch.x, &batch.labels)?;
            report.steps += 1;
            report.last_loss = step.loss;
            if on_step(&step) == Control::Stop {
                report.stopped_early = true;
                break;
            }
        }
        Ok(report)
    }

    /// The loss (and a classifier's accuracy) on `x` with `labels`, in inference form.
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        self.check_planned(x, false)?;
        Ok(self.session.with_recovery(|t| t.evaluate(x, labels))?)
    }

    /// Class probabilities `[batch, classes]` (a regression's values `[batch, outputs]`)
    /// for `x` `[time, batch, ..]`; with a head on every step `[time, batch, classes]`,
    /// time-major like `x` (the CLI writes them batch-first).
    pub fn predict(&mut self, x: &HostTensor) -> Result<HostTensor> {
        self.check_planned(x, false)?;
        Ok(self.session.trainer.predict(x)?)
    }

    /// [`Runner::predict`] on sequences as an app holds them, batch-first and without
    /// labels: `inputs[i]` is sequence `i`, its steps one after another (`features`
    /// values each; one token id each for a token model), all of one length. Returns each
    /// sequence's outputs: its class probabilities (a regression's values), or with a head
    /// on every step those of each of its steps in turn.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Job, Model};
    /// let mut run = Model::seed()
    ///     .open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())
    ///     .unwrap();
    /// let out = run.predict_sequences(&[vec![0.0; 3 * 152], vec![1.0; 3 * 152]]).unwrap();
    /// assert_eq!((out.len(), out[0].len()), (2, 6)); // 6 class probabilities each
    /// ```
    pub fn predict_sequences(&mut self, inputs: &[Vec<f32>]) -> Result<Vec<Vec<f32>>> {
        let width = self.session.trainer.model().input_features();
        let steps = steps_of(inputs, width)?;
        let seqs: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        let out = self.predict(&time_major(&seqs, steps, width)?)?;
        let batch = inputs.len();
        let dims = out.shape.dims();
        Ok(match dims[..] {
            // [time, batch, outputs]: each sequence's steps gathered in turn.
            [t, b, k] if (t, b) == (steps, batch) => (0..batch)
                .map(|i| {
                    (0..steps)
                        .flat_map(|s| out.data[(s * batch + i) * k..(s * batch + i + 1) * k].iter())
                        .copied()
                        .collect()
                })
                .collect(),
            _ => out
                .data
                .chunks(out.data.len() / batch.max(1))
                .map(<[f32]>::to_vec)
                .collect(),
        })
    }

    /// The model with the weights the run has now.
    pub fn model(&mut self) -> Result<Model> {
        Ok(Model::from_checkpoint(
            self.checkpoint()?,
            self.training.clone(),
        ))
    }

    /// Writes a checkpoint: the model, its weights, the optimizer's state and the step,
    /// atomically (safetensors, PyTorch's names).
    pub fn save(&mut self, path: &Path) -> Result<()> {
        // From the session's host copy of the state: no copy more while it is written.
        let state = self.session.state()?;
        state.extra = self.metadata.clone();
        Ok(state.save(path)?)
    }

    /// Refuses `x` (`[time, batch, …]`) when the plan has no training step (`training`) or
    /// evaluation that holds its shape. A plan is made for its job read as a bound: any
    /// batch and length up to the job's run on it as planned, on their own extent.
    fn check_planned(&self, x: &HostTensor, training: bool) -> Result<()> {
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
            // The planned shape itself needs no look at the programs (every step asks).
            Some(b) if b == (batch, steps) || self.session.trainer.serves(job) => Ok(()),
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

    /// The internal session (for the `tensorfit` binary: its fields may change between
    /// versions).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The internal session, mutably (see [`Runner::session`]).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}
