//! How to train and evaluate ([`TrainOptions`]), what a run will do ([`Job`]), and the
//! programs each runs ([`ProgramKey`]s), in order: the carried chunks, then the training
//! segment or the evaluation chunk, per micro-batch.

use std::fmt;

use tensorfit_core::{Error, Result};

use crate::description::{HeadOn, ModelDescription};
use crate::model_size::TRAIN_FLOPS_PER_FORWARD;
use crate::optim::OptimConfig;
pub use crate::program_runs::{carry_chunks, micro_batches, windows, Runs};
use crate::program_runs::{chunk_runs, expand, micro_batch_runs, window_runs, without_last};

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
    /// A window before the last of windowed truncated BPTT ([`TbpttMode::Windows`]):
    /// [`Self::Train`], then its final state copied into the carried state.
    TrainCarry,
    /// An evaluation chunk before the last of a head on every step: [`Self::Eval`],
    /// then its final state copied into the carried state, as [`Self::Carry`] does.
    EvalCarry,
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

impl ProgramKind {
    /// Whether the program takes an optimizer update.
    pub fn trains(self) -> bool {
        matches!(
            self,
            ProgramKind::Train | ProgramKind::TrainCarry | ProgramKind::Update
        )
    }
}

/// A program's identity: kind, batch and number of time steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgramKey {
    pub kind: ProgramKind,
    pub batch: usize,
    pub steps: usize,
    /// Training only: recompute activations in sub-segments of this many steps.
    pub recompute: Option<usize>,
    /// Over padded batches: the program has the input `lengths` `[B]`, and each
    /// sequence stops at its own end (`model::classifier_at_lengths`).
    pub padded: bool,
}

impl fmt::Display for ProgramKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            ProgramKind::Carry => "carry",
            ProgramKind::Train => "train",
            ProgramKind::Eval => "eval",
            ProgramKind::EvalCarry => "eval-carry",
            ProgramKind::TrainCarry => "train-carry",
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
        if self.padded {
            f.write_str(" padded")?;
        }
        Ok(())
    }
}

impl ProgramKey {
    /// The FLOPs one run of this program executes: the LSTM stack's forward
    /// ([`ModelDescription::body_forward_flops`]), [`TRAIN_FLOPS_PER_FORWARD`] times that to
    /// train, and one forward more when the training segment is recomputed.
    pub fn flops(&self, model: &ModelDescription) -> f64 {
        let forward = model.body_forward_flops(self.batch, self.steps);
        match (self.kind, self.recompute) {
            (
                ProgramKind::Train
                | ProgramKind::TrainCarry
                | ProgramKind::Grads
                | ProgramKind::StackGrads,
                None,
            ) => TRAIN_FLOPS_PER_FORWARD * forward,
            (
                ProgramKind::Train
                | ProgramKind::TrainCarry
                | ProgramKind::Grads
                | ProgramKind::StackGrads,
                Some(_),
            ) => (TRAIN_FLOPS_PER_FORWARD + 1.0) * forward,
            // The update's few FLOPs per parameter are not counted, as in Train.
            (ProgramKind::Update | ProgramKind::Head, _) => 0.0,
            (
                ProgramKind::Carry
                | ProgramKind::Eval
                | ProgramKind::EvalCarry
                | ProgramKind::HeadInput,
                _,
            ) => forward,
        }
    }
}

/// How truncated BPTT of length `L` trains on a sequence of `T` steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TbpttMode {
    /// One update per minibatch: the first `T − L` steps only advance the state, then
    /// forward, backward and the update over the last `L` steps (PyTorch's loop with
    /// `h.detach()` before the last segment).
    #[default]
    Last,
    /// DL4J's truncated BPTT: windows of `L` steps from the start (the last one shorter
    /// when `L` does not divide `T`), each a forward, a backward and an update, the state
    /// (h, c) carried from one window into the next without gradient: `⌈T / L⌉` updates
    /// per minibatch. With a head on the last step only the final window has a loss, so
    /// the windows before it only advance the state and there is one update.
    Windows,
}

impl TbpttMode {
    /// The name flags and files use.
    pub fn name(self) -> &'static str {
        match self {
            TbpttMode::Last => "last",
            TbpttMode::Windows => "windows",
        }
    }

    /// The mode named `name`, or an error listing the names.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "last" => Ok(TbpttMode::Last),
            "windows" => Ok(TbpttMode::Windows),
            other => Err(Error::input(format!(
                "truncated-BPTT mode `{other}` is not one of \"last\" or \"windows\""
            ))),
        }
    }
}

/// How to train and evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Truncated-BPTT length: gradients flow through at most this many steps.
    pub tbptt: usize,
    /// How a sequence longer than `tbptt` is trained on.
    pub tbptt_mode: TbpttMode,
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
    /// The run's seed: each training step's dropout masks are drawn from it and the
    /// step's number (`layers::dropout`).
    pub seed: u64,
    /// Run padded batches: every program takes the sequences' lengths
    /// ([`ProgramKey::padded`]).
    pub padded: bool,
    /// Split the training segment at its gradients (a [`ProgramKind::Grads`] program,
    /// then [`ProgramKind::Update`]) so that the host can average them over data-parallel
    /// ranks in between.
    pub split_update: bool,
    /// With `split_update`, for a model with BatchNorm: the global batch over all ranks,
    /// whose BatchNorm statistics every rank uses (PyTorch's `SyncBatchNorm`). The step's
    /// gradient program is then split at the head ([`ProgramKind::HeadInput`],
    /// [`ProgramKind::Head`], [`ProgramKind::StackGrads`]).
    pub sync_batch_norm: Option<usize>,
    /// A batch may continue the previous batch's sequences (the windows of a long text,
    /// `Trainer::train_step_carrying`): the last training program copies its final state
    /// into the carried state, where the next batch starts from.
    pub carry_across: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            tbptt: 50,
            tbptt_mode: TbpttMode::Last,
            chunk: 50,
            micro_batch: None,
            recompute: None,
            optim: OptimConfig::default(),
            seed: 0,
            padded: false,
            split_update: false,
            sync_batch_norm: None,
            carry_across: false,
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
        if self.split_update && self.tbptt_mode == TbpttMode::Windows {
            return Err(Error::input(
                "data-parallel training runs truncated BPTT in mode `last`; windowed truncated BPTT (--tbptt-mode windows) runs in one process",
            ));
        }
        if self.split_update && self.carry_across {
            return Err(Error::input(
                "data-parallel training starts every batch from a zero state; the state carried from one batch into the next (a text's windows) runs in one process",
            ));
        }
        Ok(())
    }

    /// The programs one training step on `[steps, batch]` runs, in order.
    pub fn train_programs(
        &self,
        model: &ModelDescription,
        batch: usize,
        steps: usize,
    ) -> Vec<ProgramKey> {
        expand(&self.train_runs(model, batch, steps))
    }

    /// [`Self::train_programs`] as runs ([`Runs`]), in order.
    pub fn train_runs(&self, model: &ModelDescription, batch: usize, steps: usize) -> Runs {
        if self.split_update {
            return self.split_runs(batch, steps);
        }
        let train = |kind, len: usize| ProgramKey {
            recompute: self.recompute.filter(|&r| r < len),
            ..self.key(kind, batch, len)
        };
        let windows = window_runs(steps, self.tbptt);
        let last = match self.tbptt_mode {
            TbpttMode::Last => self.tbptt.min(steps),
            TbpttMode::Windows => windows.last().map_or(steps, |&(len, _)| len),
        };
        let mut runs: Runs = match (self.tbptt_mode, model.head.on) {
            (TbpttMode::Windows, HeadOn::EveryStep) => without_last(windows)
                .into_iter()
                .map(|(len, n)| (train(ProgramKind::TrainCarry, len), n))
                .collect(),
            _ => chunk_runs(steps - last, self.chunk)
                .into_iter()
                .map(|(s, n)| (self.key(ProgramKind::Carry, batch, s), n))
                .collect(),
        };
        let kind = match self.carry_across {
            true => ProgramKind::TrainCarry,
            false => ProgramKind::Train,
        };
        runs.push((train(kind, last), 1));
        runs
    }

    /// The optimizer updates one training step over `[steps, batch]` takes: one per
    /// window with windowed truncated BPTT and a head on every step, else one.
    pub fn updates_per_step(&self, model: &ModelDescription, steps: usize) -> usize {
        let updates: u64 = self
            .train_runs(model, 1, steps)
            .iter()
            .filter(|(k, _)| k.kind.trains())
            .map(|&(_, n)| n)
            .sum();
        usize::try_from(updates).unwrap_or(usize::MAX)
    }

    /// The programs of a data-parallel training step (`split_update`; truncated BPTT in
    /// mode [`TbpttMode::Last`], which `validate` requires): the carried chunks, the last
    /// segment up to its gradients (split at the head with `sync_batch_norm`), then the
    /// update from the gradients averaged over ranks.
    fn split_runs(&self, batch: usize, steps: usize) -> Runs {
        let last = self.tbptt.min(steps);
        let mut runs: Runs = chunk_runs(steps - last, self.chunk)
            .into_iter()
            .map(|(s, n)| (self.key(ProgramKind::Carry, batch, s), n))
            .collect();
        if let Some(global) = self.sync_batch_norm {
            runs.extend([
                (self.key(ProgramKind::HeadInput, batch, last), 1),
                (self.key(ProgramKind::Head, global, 0), 1),
                (self.key(ProgramKind::StackGrads, batch, last), 1),
            ]);
        } else {
            let grads = ProgramKey {
                recompute: self.recompute.filter(|&r| r < last),
                ..self.key(ProgramKind::Grads, batch, last)
            };
            runs.push((grads, 1));
        }
        runs.push((self.key(ProgramKind::Update, 0, 0), 1));
        runs
    }

    /// The programs one evaluation of `[steps, batch]` runs, in order: per micro-batch,
    /// the chunks before the last only carry the state, or with a head on every step
    /// score their steps too.
    pub fn eval_programs(
        &self,
        model: &ModelDescription,
        batch: usize,
        steps: usize,
    ) -> Vec<ProgramKey> {
        micro_batches(batch, self.micro_batch)
            .into_iter()
            .flat_map(|m| expand(&self.micro_batch_eval(model, m, steps)))
            .collect()
    }

    /// [`Self::eval_programs`] as runs, each program with how many times it runs in the
    /// whole evaluation: equal micro-batches are counted, not listed (the order is
    /// [`Self::eval_programs`]'s).
    pub fn eval_runs(&self, model: &ModelDescription, batch: usize, steps: usize) -> Runs {
        micro_batch_runs(batch, self.micro_batch)
            .into_iter()
            .flat_map(|(m, times)| {
                self.micro_batch_eval(model, m, steps)
                    .into_iter()
                    .map(move |(k, n)| (k, n.saturating_mul(times)))
            })
            .collect()
    }

    /// The runs of one micro-batch of `m` sequences of an evaluation, in order.
    fn micro_batch_eval(&self, model: &ModelDescription, m: usize, steps: usize) -> Runs {
        let last = self.chunk.min(steps);
        let before = match model.head.on {
            HeadOn::Sequence(_) => ProgramKind::Carry,
            HeadOn::EveryStep => ProgramKind::EvalCarry,
        };
        let mut runs: Runs = chunk_runs(steps - last, self.chunk)
            .into_iter()
            .map(|(s, n)| (self.key(before, m, s), n))
            .collect();
        runs.push((self.key(ProgramKind::Eval, m, last), 1));
        runs
    }
}

/// A `(batch, seq_len)`: sequences, and steps each.
pub type BatchShape = (usize, usize);

/// What a run will do, so that every program it needs can be planned before it starts.
/// A plan is made for the job read as a bound: every batch and length up to its own runs
/// on that plan (`Trainer::with_bound`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Training steps on minibatches of `batch` sequences of `seq_len` steps, with
    /// evaluations between them if `eval` is given.
    Train {
        /// Sequences per training step.
        batch: usize,
        /// Steps per training sequence (for padded data: the longest).
        seq_len: usize,
        /// The evaluations run between training steps, as `(batch, seq_len)` (sequences,
        /// steps each); `None`: training only.
        eval: Option<(usize, usize)>,
    },
    /// Evaluation (or prediction) of `batch` sequences of `seq_len` steps.
    Eval {
        /// Sequences per evaluation.
        batch: usize,
        /// Steps per sequence (for padded data: the longest).
        seq_len: usize,
    },
}

impl Job {
    /// The job's training shape and evaluation shape, each where the job has it.
    pub fn parts(self) -> (Option<BatchShape>, Option<BatchShape>) {
        match self {
            Job::Train {
                batch,
                seq_len,
                eval,
            } => (Some((batch, seq_len)), eval),
            Job::Eval { batch, seq_len } => (None, Some((batch, seq_len))),
        }
    }

    /// The model FLOPs of one training step (truncated BPTT `tbptt`) or one evaluation:
    /// [`TrainOptions::step_flops`] of the whole-sequence run, whatever strategy runs it.
    /// The figure GFLOP/s are reported against.
    pub fn model_flops(&self, model: &ModelDescription, tbptt: usize) -> f64 {
        self.model_flops_in(model, tbptt, TbpttMode::Last)
    }

    /// [`Job::model_flops`] with truncated BPTT in `mode` (windows train every step).
    pub fn model_flops_in(&self, model: &ModelDescription, tbptt: usize, mode: TbpttMode) -> f64 {
        let opts = TrainOptions {
            tbptt,
            tbptt_mode: mode,
            ..TrainOptions::default()
        };
        opts.step_flops(model, *self)
    }
}

impl TrainOptions {
    /// The programs one training step (or one evaluation) of `job` runs, as runs
    /// ([`Runs`]): a few, whatever the batch and length.
    pub fn step_runs(&self, model: &ModelDescription, job: Job) -> Runs {
        match job {
            Job::Train { batch, seq_len, .. } => self.train_runs(model, batch, seq_len),
            Job::Eval { batch, seq_len } => self.eval_runs(model, batch, seq_len),
        }
    }

    /// The FLOPs one training step (or one evaluation) of `job` executes. With no
    /// recomputation this is the job's model FLOPs, the figure benchmarks report.
    pub fn step_flops(&self, model: &ModelDescription, job: Job) -> f64 {
        self.step_runs(model, job)
            .iter()
            .map(|(k, n)| k.flops(model) * *n as f64)
            .sum()
    }

    /// Every distinct program `job` runs, each once, in a stable order.
    pub fn job_programs(&self, model: &ModelDescription, job: Job) -> Vec<ProgramKey> {
        let runs = match job {
            Job::Train {
                batch,
                seq_len,
                eval,
            } => {
                let mut runs = self.train_runs(model, batch, seq_len);
                if let Some((b, t)) = eval {
                    runs.extend(self.eval_runs(model, b, t));
                }
                runs
            }
            Job::Eval { batch, seq_len } => self.eval_runs(model, batch, seq_len),
        };
        let mut keys: Vec<ProgramKey> = runs.into_iter().map(|(k, _)| k).collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

impl TrainOptions {
    fn key(&self, kind: ProgramKind, batch: usize, steps: usize) -> ProgramKey {
        ProgramKey {
            kind,
            batch,
            steps,
            recompute: None,
            padded: self.padded,
        }
    }
}
