//! The truncated-BPTT trainer: runs the classifier's programs on one backend.
//!
//! A minibatch is a `[T, B, F]` sequence (`[T, B]` token ids for token input) with one
//! label per sequence (the class is read
//! at the last step). With a truncated-BPTT length `L`, the first `T - L` steps only
//! advance the recurrent state (inference-form layers, no activations kept), in chunks of at
//! most `chunk` steps; the last `L` steps run forward, backward and the optimizer from that
//! carried state. Gradients therefore stop at the segment border, and training memory
//! depends on `L`, not `T`. This is what a PyTorch user does with `h.detach()` between
//! segments. Evaluation streams the same way, optionally in micro-batches. A batch of
//! sequences of different lengths, padded at the end, runs with its lengths
//! (`train_step_at`, `evaluate_at`) on a trainer whose options say `padded`
//! (`trainer/padded.rs`).
//!
//! Parameters, optimizer moments, running statistics and the carried (h, c) live on the
//! device for the trainer's whole life; every program binds them by key, so a training
//! program and an evaluation program share one copy. With a [`Layout`] from the planner,
//! the trainer allocates exactly the layout's arenas once and places every tensor where
//! the plan says; without one, each tensor gets its own buffer. A layout planned for a
//! bound ([`Trainer::with_bound`], `trainer/bounded.rs`) runs every shape within the bound
//! in those arenas.

use std::collections::HashMap;

use tensorfit_core::exec::allocate_all;
use tensorfit_core::{
    Backend, BufferId, DType, DeviceInfo, Error, Executable, HostTensor, Layout, MemoryInfo,
    Result, Shape, TensorView,
};

use crate::batch_input::check_batch;
use crate::description::{HeadOn, ModelDescription};
use crate::layers::dropout::step_key_input;
use crate::layers::Recurrent;
use crate::optim::ScheduleState;
use crate::options::{ProgramKey, TrainOptions};
use crate::params::ParamStore;
use crate::programs::{PersistentKey, Program};

mod bounded;
mod carry_across;
mod exchange;
mod padded;
mod run;
mod state;
mod stream_steps;
mod sync_step;

pub use carry_across::{CarriedState, CARRIED_KEY};
pub use exchange::{GradientExchange, LocalGradients};
pub use run::EvalReport;

/// What one training step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    /// 1-based count of optimizer steps taken so far (with windowed truncated BPTT,
    /// several per training step).
    pub step: u64,
    /// The mean loss (over the steps not ignored, with a head on every step).
    pub loss: f32,
    /// The fraction of rows (steps, with a head on every step) the model got right
    /// before the update; `None` for a regression.
    pub accuracy: Option<f32>,
    /// `exp(loss)` for cross-entropy; `None` for a regression.
    pub perplexity: Option<f32>,
    /// The learning rate the (last) update used (after the schedule).
    pub lr: f64,
    /// The global gradient norm before clipping (`clip_grad_norm_`'s return value) of the
    /// last update, when clipping by norm.
    pub grad_norm: Option<f32>,
    /// Softmax probabilities `[B, classes]` before the update (`[steps, B, classes]`
    /// over the trained steps, each before its window's update, with a head on every
    /// step).
    pub probs: HostTensor,
}

/// A program bound to memory.
#[derive(Debug)]
struct Loaded {
    /// The program's ids (its graph now lives in `exe`).
    ids: Program,
    exe: Executable,
}

/// Trains and evaluates one model on one backend. See the module documentation.
pub struct Trainer {
    backend: Box<dyn Backend>,
    model: ModelDescription,
    opts: TrainOptions,
    /// The body's recurrent stack, whose carried state the trainer zeroes and reads (a
    /// body without one carries nothing).
    recurrent: Option<Recurrent>,
    /// A layer reads each sequence whole (no stream steps): asked of the network once,
    /// not on every step.
    reads_whole: bool,
    /// Device views of everything that outlives a run, by persistent key.
    persistent: HashMap<PersistentKey, TensorView>,
    /// The planner's layout and the arenas allocated for it.
    layout: Option<(Layout, Vec<BufferId>)>,
    /// The bound the layout was planned for, if it was (`trainer/bounded.rs`).
    bound: Option<bounded::Bounded>,
    programs: HashMap<ProgramKey, Loaded>,
    last_train: Option<ProgramKey>,
    step: u64,
    /// The learning-rate schedule's state (reduce-on-plateau's).
    schedule: ScheduleState,
    /// During a carrying call (`trainer/carry_across.rs`): the host state its sequences
    /// start from, then the state they ended in.
    carrying: Option<CarriedState>,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("backend", &self.backend.name())
            .field("model", &self.model)
            .field("opts", &self.opts)
            .field("planned", &self.layout.is_some())
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl Trainer {
    /// Uploads `params` (which must match `model`) to `backend`; every tensor gets its own
    /// buffer as it is first needed.
    pub fn new(
        backend: Box<dyn Backend>,
        model: ModelDescription,
        params: &ParamStore,
        opts: TrainOptions,
    ) -> Result<Self> {
        let mut t = Trainer::empty(backend, model, params, opts)?;
        for (name, p) in params.iter() {
            let view = upload(t.backend.as_mut(), p)?;
            t.persistent.insert(PersistentKey::named(name), view);
        }
        Ok(t)
    }

    /// Allocates exactly `layout`'s arenas on `backend` and uploads `params` to the slots
    /// it gives them. Only the programs in the layout can run.
    pub fn with_layout(
        backend: Box<dyn Backend>,
        model: ModelDescription,
        params: &ParamStore,
        opts: TrainOptions,
        layout: Layout,
    ) -> Result<Self> {
        let mut t = Trainer::empty(backend, model, params, opts)?;
        let buffers = allocate_all(t.backend.as_mut(), &layout.arena_bytes)?;
        t.layout = Some((layout, buffers));
        for (name, p) in params.iter() {
            let key = PersistentKey::named(name);
            let view = t.planned_view(&key, &p.shape)?;
            t.backend.write(&view, &p.data)?;
            t.persistent.insert(key, view);
        }
        Ok(t)
    }

    fn empty(
        backend: Box<dyn Backend>,
        model: ModelDescription,
        params: &ParamStore,
        opts: TrainOptions,
    ) -> Result<Self> {
        opts.validate()?;
        params.check_against(&model)?;
        let net = model.network()?;
        Ok(Trainer {
            schedule: ScheduleState::new(opts.optim.optimizer.lr()),
            backend,
            recurrent: net.recurrent().map(|r| r.cells),
            reads_whole: net.reads_whole().is_some(),
            model,
            opts,
            persistent: HashMap::new(),
            layout: None,
            bound: None,
            programs: HashMap::new(),
            last_train: None,
            step: 0,
            carrying: None,
        })
    }

    pub fn model(&self) -> &ModelDescription {
        &self.model
    }

    pub fn options(&self) -> &TrainOptions {
        &self.opts
    }

    /// Optimizer steps taken so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    pub fn backend_name(&self) -> String {
        self.backend.name()
    }

    /// Frees every buffer this trainer holds on its device (programs, arenas, persistent
    /// tensors), so a replacement can be planned into the memory. The trainer cannot be
    /// used afterwards. Errors are collected, not stopped at: a lost device may refuse
    /// every call, and the memory is gone anyway.
    pub fn release_memory(&mut self) -> Result<()> {
        let mut first_error = None;
        let mut note = |r: Result<()>| {
            if let Err(e) = r {
                first_error.get_or_insert(e);
            }
        };
        for (_, p) in self.programs.drain() {
            note(p.exe.release(self.backend.as_mut()));
        }
        match self.layout.take() {
            Some((_, buffers)) => {
                for b in buffers {
                    note(self.backend.free(b));
                }
            }
            None => {
                for (_, v) in self.persistent.iter() {
                    note(self.backend.free(v.buffer));
                }
            }
        }
        self.persistent.clear();
        self.last_train = None;
        first_error.map_or(Ok(()), Err)
    }

    /// The backend's device figures now.
    pub fn device_info(&self) -> DeviceInfo {
        self.backend.info()
    }

    /// The backend's memory figures (allocated and peak bytes).
    pub fn memory(&self) -> MemoryInfo {
        self.backend.memory()
    }

    /// One training step on a minibatch: `x` `[T, B, input]`, `labels` `[B]` class ids
    /// (cross-entropy) or `[B, outputs]` f32 targets (mean squared error), per step
    /// (`[T, B]`, `[T, B, outputs]`) with a head on every step. One optimizer update, or
    /// one per window with [`TbpttMode::Windows`](crate::options::TbpttMode) and a head
    /// on every step; the report sums up all of them.
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        self.train_step_at(x, labels, None)
    }

    /// [`Trainer::train_step`] on a padded batch: sequence `b` has `lengths[b]` real
    /// steps (see `Trainer::check_lengths`; `None`: all `T`).
    pub fn train_step_at(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
    ) -> Result<StepReport> {
        self.train_step_exchanging(x, labels, lengths, &mut LocalGradients)
    }

    /// As [`Trainer::train_step_at`]; with [`TrainOptions::split_update`], `exchange`
    /// gets the gradients and the loss between backward and the update (data-parallel
    /// ranks average them there).
    pub fn train_step_exchanging(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
        exchange: &mut dyn GradientExchange,
    ) -> Result<StepReport> {
        let (steps, batch) = check_batch(&self.model, x, labels)?;
        let keys = self.opts.train_programs(&self.model, batch, steps);
        let lengths = self.check_lengths(lengths, batch, steps, &keys)?;
        let updates = keys.iter().filter(|k| k.kind.trains()).count() as u64;
        let last = self
            .step
            .checked_add(updates)
            .ok_or_else(|| Error::input(format!("the step counter cannot pass {}", self.step)))?;
        // The optimizer's scalars and the dropout key of each update in turn, at its own
        // step and rate.
        let (o, schedule, seed) = (self.opts.optim, self.schedule, self.opts.seed);
        let (mut t, mut lr) = (self.step, f64::NAN);
        let mut scalars = || {
            t += 1;
            lr = schedule.lr(&o.schedule, o.optimizer.lr(), t);
            Some((o.optimizer.scalars(t, lr), step_key_input(seed, t)))
        };
        let scored = match self.opts.split_update {
            false => self.run_sequence(&keys, (x, lengths), 0..batch, labels, &mut scalars)?,
            true => self.run_split(&keys, (x, lengths), labels, &mut scalars, exchange)?,
        };
        let (classes, classify) = (
            self.model.loss.outputs(),
            self.model.loss.is_classification(),
        );
        // The loss over every update's rows, each weighted by the rows it counted.
        let mut summed = run::Summed::default();
        scored.iter().for_each(|s| summed.add(&self.model, s));
        let (loss, tally) = (summed.loss(), summed.tally);
        let probs: Vec<f32> = scored
            .iter()
            .flat_map(|s| s.probs.iter().copied())
            .collect();
        let trained: usize = scored.iter().map(|s| s.steps.len()).sum();
        let shape = match self.model.head.on {
            HeadOn::Sequence(_) => vec![probs.len() / classes.max(1), classes],
            HeadOn::EveryStep => vec![trained, batch, classes],
        };
        let probs = HostTensor::new(Shape(shape), probs)?;
        self.step = last;
        self.last_train = keys.last().copied();
        let p = &self.programs[&keys[keys.len() - 1]];
        let norm_sq = match p.ids.grad_norm_sq {
            Some(t) => p.exe.read(self.backend.as_mut(), t)?,
            None => Vec::new(),
        };
        if !loss.is_finite() {
            return Err(Error::input(format!(
                "the loss became {loss} at step {}: lower the learning rate or check the data for NaN/Inf",
                self.step
            )));
        }
        Ok(StepReport {
            step: self.step,
            loss,
            accuracy: classify.then(|| tally.accuracy()),
            perplexity: classify.then(|| loss.exp()),
            lr,
            grad_norm: norm_sq.first().map(|s| s.sqrt()),
            probs,
        })
    }

    /// Reports a validation metric (lower is better) to the learning-rate schedule:
    /// reduce-on-plateau's step; nothing for the other schedules. Returns whether the
    /// learning rate was reduced.
    pub fn observe(&mut self, metric: f64) -> bool {
        self.schedule.observe(&self.opts.optim.schedule, metric)
    }

    /// The learning-rate schedule's state, for checkpoints.
    pub fn schedule_state(&self) -> ScheduleState {
        self.schedule
    }

    /// Restores the schedule's state from a checkpoint.
    pub fn restore_schedule(&mut self, state: ScheduleState) {
        self.schedule = state;
    }

    /// Downloads the recurrent state carried into the last segment for batch size
    /// `batch`: (h, c), h `[layers, B, H]`, c the same for an LSTM stack and `[0, B, H]`
    /// for a GRU stack (which carries h only).
    pub fn carried_state(&mut self, batch: usize) -> Result<(HostTensor, HostTensor)> {
        let mut slots = Vec::new();
        for view in self.carried_views(batch)? {
            slots.push(download(self.backend.as_mut(), &view)?.data);
        }
        self.stack_parts(batch, slots)
    }

    /// The view of persistent tensor `key`: from the layout if planned, else a new
    /// zero-filled buffer the first time (optimizer moments start at zero, as in PyTorch).
    fn persistent_view(&mut self, key: &PersistentKey, shape: Shape) -> Result<TensorView> {
        if let Some(v) = self.persistent.get(key) {
            return Ok(v.clone());
        }
        let view = if self.layout.is_some() {
            self.planned_view(key, &shape)?
        } else {
            upload(self.backend.as_mut(), &HostTensor::zeros(shape))?
        };
        self.persistent.insert(key.clone(), view.clone());
        Ok(view)
    }

    fn planned_view(&self, key: &PersistentKey, shape: &Shape) -> Result<TensorView> {
        let (layout, buffers) = self
            .layout
            .as_ref()
            .ok_or_else(|| Error::Graph("no layout".into()))?;
        let &(arena, offset) = match layout.persistent.get(&key.to_string()) {
            Some(slot) => slot,
            None => self
                .carried_slot_within(layout, key)
                .ok_or_else(|| Error::Graph(format!("`{key}` is not in the memory plan")))?,
        };
        Ok(TensorView::at(buffers[arena], offset, shape.clone()))
    }

    fn ensure_program(&mut self, key: ProgramKey) -> Result<()> {
        if self.programs.contains_key(&key) {
            return Ok(());
        }
        let mut ids = Program::build(&self.model, &self.opts.optim, key)?;
        // The planned program whose placement it takes: itself, or its cover in a bound.
        let planned = self.planned_key(&ids)?;
        let mut bound = HashMap::new();
        for (t, k) in &ids.persistent {
            let shape = ids.graph.shape(*t).clone();
            bound.insert(*t, self.persistent_view(k, shape)?);
        }
        let graph = std::mem::take(&mut ids.graph);
        let exe = match &self.layout {
            Some((layout, buffers)) => {
                let placement = (layout.programs.get(&planned.to_string()))
                    .ok_or_else(|| not_planned(layout, key))?;
                Executable::in_buffers(graph, bound, placement, buffers)?
            }
            None => Executable::new(graph, self.backend.as_mut(), bound)?,
        };
        self.programs.insert(key, Loaded { ids, exe });
        Ok(())
    }
}

/// The error for a program the plan `layout` does not hold, listing those it does.
fn not_planned(layout: &Layout, key: ProgramKey) -> Error {
    let mut planned: Vec<&String> = layout.programs.keys().collect();
    planned.sort();
    Error::input(format!(
        "program `{key}` is not in the memory plan (planned: {}); plan the job with this batch size and sequence length",
        planned.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
    ))
}

fn upload(backend: &mut dyn Backend, t: &HostTensor) -> Result<TensorView> {
    let element = DType::F32.size_bytes() as u64;
    let bytes = (t.numel() as u64).saturating_mul(element).max(element);
    let buf = backend.allocate(bytes)?;
    let view = TensorView::whole(buf, t.shape.clone());
    backend.write(&view, &t.data)?;
    Ok(view)
}

fn download(backend: &mut dyn Backend, view: &TensorView) -> Result<HostTensor> {
    let mut data = vec![0.0; view.len()];
    backend.read(view, &mut data)?;
    HostTensor::new(view.shape.clone(), data)
}

/// Index of the largest value (the first on ties).
pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}
