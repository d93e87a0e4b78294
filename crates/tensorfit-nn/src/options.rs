//! How to train and evaluate ([`TrainOptions`]), what a run will do ([`Job`]), and the
//! programs each runs ([`ProgramKey`]s), in order: the carried chunks, then the training
//! segment or the evaluation chunk, per micro-batch.

use std::fmt;

use tensorfit_core::{Error, Result};

use crate::description::ModelDescription;
use crate::model_size::TRAIN_FLOPS_PER_FORWARD;
use crate::optim::OptimConfig;

/// What a program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProgramKind {
    /// Advances the carried LSTM state over a chunk (no gradients, no head).
    Carry,
    /// The last truncated-BPTT segment: forward, backward, clipping, the optimizer,
    /// running statistics.
    Train,
    /// The last evaluation chunk: forward in inference form, loss and probabilities.
    Eval,
    /// Data-parallel training's last segment up to its gradients: forward, backward,
    /// running statistics; the gradients go to the host to be averaged over ranks.
    Grads,
    /// Data-parallel training's update from the averaged gradients the host writes:
    /// clipping and the optimizer (one program whatever the batch: `b=0 t=0`).
    Update,
    /// BatchNorm synchronised over ranks (`TrainOptions::sync_batch_norm`): the last
    /// segment's forward up to the head's input (the top layer's last step), which the
    /// host gathers from every rank.
    HeadInput,
    /// The head over the global batch gathered from every rank (its `batch`): forward
    /// with the global batch statistics, loss, backward to the head's parameters and
    /// input, running statistics.
    Head,
    /// The last segment's forward again and its backward from this rank's rows of the
    /// head input's gradient, to the input side's parameters.
    StackGrads,
}

/// A program's identity: kind, batch and number of time steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgramKey {
    pub kind: ProgramKind,
    pub batch: usize,
    pub steps: usize,
    /// Training only: recompute activations in sub-segments of this many steps.
    pub recompute: Option<usize>,
}

impl fmt::Display for ProgramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ProgramKind::Carry => "carry",
            ProgramKind::Train => "train",
            ProgramKind::Eval => "eval",
            ProgramKind::Grads => "grads",
            ProgramKind::Update => "update",
            ProgramKind::HeadInput => "head_input",
            ProgramKind::Head => "head",
            ProgramKind::StackGrads => "stack_grads",
        };
        write!(f, "{kind} b={} t={}", self.batch, self.steps)?;
        if let Some(r) = self.recompute {
            write!(f, " recompute={r}")?;
        }
        Ok(())
    }
}

impl ProgramKey {
    /// The FLOPs one run of this program executes: the LSTM stack's forward
    /// ([`ModelDescription::recurrent_forward_flops`]), [`TRAIN_FLOPS_PER_FORWARD`] times that to
    /// train, and one forward more when the training segment is recomputed.
    pub fn flops(&self, model: &ModelDescription) -> f64 {
        let forward = model.recurrent_forward_flops(self.batch, self.steps);
        match (self.kind, self.recompute) {
            (ProgramKind::Train | ProgramKind::Grads | ProgramKind::StackGrads, None) => {
                TRAIN_FLOPS_PER_FORWARD * forward
            }
            (ProgramKind::Train | ProgramKind::Grads | ProgramKind::StackGrads, Some(_)) => {
                (TRAIN_FLOPS_PER_FORWARD + 1.0) * forward
            }
            // The update's few FLOPs per parameter are not counted, as in Train.
            (ProgramKind::Update | ProgramKind::Head, _) => 0.0,
            (ProgramKind::Carry | ProgramKind::Eval | ProgramKind::HeadInput, _) => forward,
        }
    }
}

/// How to train and evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Truncated-BPTT length: gradients flow through at most this many final steps.
    pub tbptt: usize,
    /// Longest chunk of time steps run at once where only inference runs (the carried
    /// part of training, and evaluation): the streaming length.
    pub chunk: usize,
    /// Evaluate in micro-batches of this many sequences (`None`: the whole batch).
    pub micro_batch: Option<usize>,
    /// Recompute the training segment's activations in sub-segments of this many steps
    /// during backward, instead of keeping them (`None`: keep them).
    pub recompute: Option<usize>,
    /// Optimizer, gradient clipping and learning-rate schedule.
    pub optim: OptimConfig,
    /// Split the training segment at its gradients (a [`ProgramKind::Grads`] program,
    /// then [`ProgramKind::Update`]) so that the host can average them over data-parallel
    /// ranks in between.
    pub split_update: bool,
    /// With `split_update`, for a model with BatchNorm: the global batch over all ranks,
    /// whose BatchNorm statistics every rank uses (PyTorch's `SyncBatchNorm`). The step's
    /// gradient program is then split at the head ([`ProgramKind::HeadInput`],
    /// [`ProgramKind::Head`], [`ProgramKind::StackGrads`]).
    pub sync_batch_norm: Option<usize>,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            tbptt: 50,
            chunk: 50,
            micro_batch: None,
            recompute: None,
            optim: OptimConfig::default(),
            split_update: false,
            sync_batch_norm: None,
        }
    }
}

impl TrainOptions {
    pub fn validate(&self) -> Result<()> {
        self.optim.validate()?;
        if self.tbptt == 0
            || self.chunk == 0
            || self.micro_batch == Some(0)
            || self.recompute == Some(0)
        {
            return Err(Error::input(
                "tbptt, chunk, micro-batch and recompute lengths must be at least 1",
            ));
        }
        Ok(())
    }

    /// The programs one training step on `[steps, batch]` runs, in order.
    pub fn train_programs(&self, batch: usize, steps: usize) -> Vec<ProgramKey> {
        let last = self.tbptt.min(steps);
        let mut keys: Vec<ProgramKey> = carry_chunks(steps - last, self.chunk)
            .into_iter()
            .map(|s| key(ProgramKind::Carry, batch, s))
            .collect();
        if let (true, Some(global)) = (self.split_update, self.sync_batch_norm) {
            keys.extend([
                key(ProgramKind::HeadInput, batch, last),
                key(ProgramKind::Head, global, 0),
                key(ProgramKind::StackGrads, batch, last),
            ]);
        } else {
            let kind = match self.split_update {
                true => ProgramKind::Grads,
                false => ProgramKind::Train,
            };
            keys.push(ProgramKey {
                recompute: self.recompute.filter(|&r| r < last),
                ..key(kind, batch, last)
            });
        }
        if self.split_update {
            keys.push(key(ProgramKind::Update, 0, 0));
        }
        keys
    }

    /// The programs one evaluation of `[steps, batch]` runs, in order.
    pub fn eval_programs(&self, batch: usize, steps: usize) -> Vec<ProgramKey> {
        let last = self.chunk.min(steps);
        let mut keys = Vec::new();
        for m in micro_batches(batch, self.micro_batch) {
            keys.extend(
                carry_chunks(steps - last, self.chunk)
                    .into_iter()
                    .map(|s| key(ProgramKind::Carry, m, s)),
            );
            keys.push(key(ProgramKind::Eval, m, last));
        }
        keys
    }
}

/// What a run will do, so that every program it needs can be planned before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Training steps on `[seq_len, batch]` minibatches, with evaluations on
    /// `[eval_seq_len, eval_batch]` if `eval` is given.
    Train {
        batch: usize,
        seq_len: usize,
        eval: Option<(usize, usize)>,
    },
    /// Evaluation (or prediction) of `[seq_len, batch]` inputs.
    Eval { batch: usize, seq_len: usize },
}

impl Job {
    /// The model FLOPs of one training step (truncated BPTT `tbptt`) or one evaluation:
    /// [`TrainOptions::step_flops`] of the whole-sequence run, whatever strategy runs it.
    /// The figure GFLOP/s are reported against.
    pub fn model_flops(&self, model: &ModelDescription, tbptt: usize) -> f64 {
        let opts = TrainOptions {
            tbptt,
            ..TrainOptions::default()
        };
        opts.step_flops(model, *self)
    }
}

impl TrainOptions {
    /// The programs one training step (or one evaluation) of `job` runs, in order.
    pub fn step_programs(&self, job: Job) -> Vec<ProgramKey> {
        match job {
            Job::Train { batch, seq_len, .. } => self.train_programs(batch, seq_len),
            Job::Eval { batch, seq_len } => self.eval_programs(batch, seq_len),
        }
    }

    /// The FLOPs one training step (or one evaluation) of `job` executes. With no
    /// recomputation this is the job's model FLOPs, the figure benchmarks report.
    pub fn step_flops(&self, model: &ModelDescription, job: Job) -> f64 {
        self.step_programs(job).iter().map(|k| k.flops(model)).sum()
    }

    /// Every distinct program `job` runs, each once, in a stable order.
    pub fn job_programs(&self, job: Job) -> Vec<ProgramKey> {
        let mut keys = match job {
            Job::Train {
                batch,
                seq_len,
                eval,
            } => {
                let mut k = self.train_programs(batch, seq_len);
                if let Some((b, t)) = eval {
                    k.extend(self.eval_programs(b, t));
                }
                k
            }
            Job::Eval { batch, seq_len } => self.eval_programs(batch, seq_len),
        };
        keys.sort();
        keys.dedup();
        keys
    }
}

fn key(kind: ProgramKind, batch: usize, steps: usize) -> ProgramKey {
    ProgramKey {
        kind,
        batch,
        steps,
        recompute: None,
    }
}

/// Lengths of the state-advancing chunks over `steps` steps, at most `chunk` each: a
/// shorter first chunk, then full ones (so at most two distinct lengths are built).
pub fn carry_chunks(steps: usize, chunk: usize) -> Vec<usize> {
    let chunk = chunk.max(1);
    let mut v = Vec::new();
    if steps % chunk != 0 {
        v.push(steps % chunk);
    }
    v.extend(std::iter::repeat_n(chunk, steps / chunk));
    v
}

/// Sizes of the micro-batches a batch of `batch` is split into (`micro` each, the last
/// smaller).
pub fn micro_batches(batch: usize, micro: Option<usize>) -> Vec<usize> {
    let m = micro.unwrap_or(batch).clamp(1, batch.max(1));
    let mut v = vec![m; batch / m];
    if batch % m != 0 {
        v.push(batch % m);
    }
    v
}
