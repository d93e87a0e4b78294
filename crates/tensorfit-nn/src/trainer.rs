//! The truncated-BPTT trainer: runs the classifier's programs on one backend.
//!
//! A minibatch is a `[T, B, F]` sequence (`[T, B]` token ids for token input) with one
//! label per sequence (the class is read
//! at the last step). With a truncated-BPTT length `L`, the first `T - L` steps only
//! advance the recurrent state (inference-form layers, no activations kept), in chunks of at
//! most `chunk` steps; the last `L` steps run forward, backward and the optimizer from that
//! carried state. Gradients therefore stop at the segment border, and training memory
//! depends on `L`, not `T`. This is what a PyTorch user does with `h.detach()` between
//! segments. Evaluation streams the same way, optionally in micro-batches.
//!
//! Parameters, optimizer moments, running statistics and the carried (h, c) live on the
//! device for the trainer's whole life; every program binds them by key, so a training
//! program and an evaluation program share one copy. With a [`Layout`] from the planner,
//! the trainer allocates exactly the layout's arenas once and places every tensor where
//! the plan says; without one, each tensor gets its own buffer.

use std::collections::HashMap;
use std::ops::Range;

use tensorfit_core::exec::allocate_all;
use tensorfit_core::{
    Backend, BufferId, DType, DeviceInfo, Error, Executable, HostTensor, Layout, MemoryInfo,
    Result, Shape, TensorView,
};

use crate::batch_input::{check_batch, write_steps};
use crate::checkpoint::Checkpoint;
use crate::description::ModelDescription;
use crate::layers::{ParamKind, Recurrent, StatePart};
use crate::optim::ScheduleState;
use crate::options::{micro_batches, ProgramKey, TrainOptions};
use crate::params::ParamStore;
use crate::programs::{PersistentKey, Program};

mod stream_steps;

/// What one training step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    /// 1-based count of optimizer steps taken so far.
    pub step: u64,
    pub loss: f32,
    /// The learning rate the step used (after the schedule).
    pub lr: f64,
    /// The global gradient norm before clipping (`clip_grad_norm_`'s return value), when
    /// clipping by norm.
    pub grad_norm: Option<f32>,
    /// Softmax probabilities `[B, classes]` before the update.
    pub probs: HostTensor,
}

/// What an evaluation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    /// The mean loss: cross-entropy, or the mean squared error for a regression.
    pub loss: f32,
    /// The fraction of rows whose most probable class is the label; `None` for a
    /// regression.
    pub accuracy: Option<f32>,
    /// Softmax probabilities `[B, classes]`, or a regression's predictions
    /// `[B, outputs]`.
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
    /// The recurrent stack, whose carried state the trainer zeroes and reads.
    recurrent: Recurrent,
    /// Device views of everything that outlives a run, by persistent key.
    persistent: HashMap<PersistentKey, TensorView>,
    /// The planner's layout and the arenas allocated for it.
    layout: Option<(Layout, Vec<BufferId>)>,
    programs: HashMap<ProgramKey, Loaded>,
    last_train: Option<ProgramKey>,
    step: u64,
    /// The learning-rate schedule's state (reduce-on-plateau's).
    schedule: ScheduleState,
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
        Ok(Trainer {
            schedule: ScheduleState::new(opts.optim.optimizer.lr()),
            backend,
            recurrent: model.network()?.recurrent,
            model,
            opts,
            persistent: HashMap::new(),
            layout: None,
            programs: HashMap::new(),
            last_train: None,
            step: 0,
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

    /// One optimizer step on a minibatch: `x` `[T, B, input]`, `labels` `[B]` class ids
    /// (cross-entropy) or `[B, outputs]` f32 targets (mean squared error).
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        let (steps, batch) = check_batch(&self.model, x, labels)?;
        let keys = self.opts.train_programs(batch, steps);
        let next = self
            .step
            .checked_add(1)
            .ok_or_else(|| Error::input(format!("the step counter cannot pass {}", self.step)))?;
        let o = &self.opts.optim;
        let lr = self.schedule.lr(&o.schedule, o.optimizer.lr(), next);
        let scalars = o.optimizer.scalars(next, lr);
        let (loss, probs) = self.run_sequence(&keys, x, 0..batch, labels, Some(&scalars))?;
        self.step = next;
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

    /// Runs the model in inference form (running statistics) over whole sequences.
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        let (steps, batch) = check_batch(&self.model, x, labels)?;
        let classes = self.model.loss.outputs();
        let per_row = self.model.loss.targets_per_row();
        let mut probs = Vec::with_capacity(batch * classes);
        let mut loss_sum = 0.0f64;
        let mut start = 0;
        for m in micro_batches(batch, self.opts.micro_batch) {
            // One micro-batch: its own chunks, then its evaluation program, reading its
            // sequences out of `x` in place (no host copy of them).
            let keys = self.opts.eval_programs(m, steps);
            let rows = start..start + m;
            let targets = &labels[start * per_row..(start + m) * per_row];
            let (loss, p) = self.run_sequence(&keys, x, rows, targets, None)?;
            loss_sum += loss as f64 * m as f64;
            probs.extend(p.data);
            start += m;
        }
        let accuracy = self.model.loss.is_classification().then(|| {
            let correct = labels
                .iter()
                .enumerate()
                .filter(|(b, &l)| argmax(&probs[b * classes..(b + 1) * classes]) == l as usize)
                .count();
            correct as f32 / batch as f32
        });
        Ok(EvalReport {
            loss: (loss_sum / batch as f64) as f32,
            accuracy,
            probs: HostTensor::new([batch, classes], probs)?,
        })
    }

    /// Class probabilities `[B, classes]`, or a regression's predictions `[B, outputs]`,
    /// for `x` `[T, B, input]` (inference form).
    pub fn predict(&mut self, x: &HostTensor) -> Result<HostTensor> {
        let batch = x.shape.dims().get(1).copied().unwrap_or(0);
        let targets = batch.saturating_mul(self.model.loss.targets_per_row());
        Ok(self.evaluate(x, &vec![0.0; targets])?.probs)
    }

    /// Zeroes the carried state, runs the carry programs of `keys` over their chunks of
    /// sequences `rows` of `x`, then the final program over the last steps; returns its
    /// loss and probabilities.
    fn run_sequence(
        &mut self,
        keys: &[ProgramKey],
        x: &HostTensor,
        rows: Range<usize>,
        labels: &[f32],
        scalars: Option<&[f32]>,
    ) -> Result<(f32, HostTensor)> {
        let Some(last) = keys.last() else {
            return Err(Error::Graph("a run needs at least one program".into()));
        };
        let batch = last.batch;
        for slot in self.recurrent.state_slots() {
            let key = PersistentKey::Carried { slot, batch };
            let view = self.persistent_view(&key, self.recurrent.state_shape(batch))?;
            self.backend.write(&view, &vec![0.0; view.len()])?;
        }
        let mut t = 0;
        for &key in keys {
            self.ensure_program(key)?;
            let p = &self.programs[&key];
            let backend = self.backend.as_mut();
            for &(input, len) in &p.ids.xs {
                write_steps(backend, p.exe.view(input), x, t..t + len, rows.clone())?;
                t += len;
            }
            if key != *last {
                p.exe.run(backend)?;
            }
        }
        let p = &self.programs[last];
        let backend = self.backend.as_mut();
        if let Some(l) = p.ids.labels {
            p.exe.write(backend, l, labels)?;
        }
        if let (Some(s), Some(values)) = (p.ids.scalars, scalars) {
            p.exe.write(backend, s, values)?;
        }
        p.exe.run(backend)?;
        let loss = match p.ids.loss {
            Some(l) => p.exe.read(backend, l)?.first().copied().unwrap_or(f32::NAN),
            None => f32::NAN,
        };
        let probs = match p.ids.probs {
            Some(pr) => p.exe.read(backend, pr)?,
            None => Vec::new(),
        };
        Ok((
            loss,
            HostTensor::new([batch, self.model.loss.outputs()], probs)?,
        ))
    }

    /// Downloads parameters and running statistics.
    pub fn parameters(&mut self) -> Result<ParamStore> {
        let mut out = ParamStore::new();
        for spec in self.model.param_specs()? {
            let key = PersistentKey::named(&spec.name);
            let view = self.persistent_view(&key, spec.shape.clone())?;
            out.insert(&spec.name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }

    /// Everything needed to continue later: model, optimizer state (Adam's moments
    /// `adam.m.<name>`, `adam.v.<name>`, SGD's `sgd.momentum.<name>`; zeros before the
    /// first step), step.
    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        let (mut params, mut optimizer) = (ParamStore::new(), ParamStore::new());
        for spec in self.model.param_specs()? {
            if spec.kind == ParamKind::Trainable {
                for name in self.opts.optim.optimizer.state_names(&spec.name) {
                    optimizer.insert(&name, HostTensor::zeros(spec.shape.clone()));
                }
            }
            params.insert(&spec.name, HostTensor::zeros(spec.shape));
        }
        let mut ck = Checkpoint {
            config: self.model.clone(),
            params,
            optimizer,
            step: self.step,
            extra: HashMap::new(),
        };
        self.checkpoint_into(&mut ck)?;
        Ok(ck)
    }

    /// Fills `ck`, a checkpoint of this trainer, with the current state, reusing its host
    /// memory: a session snapshots the state before every step, and fresh megabytes each
    /// time cost more than the copy.
    pub fn checkpoint_into(&mut self, ck: &mut Checkpoint) -> Result<()> {
        for (name, t) in ck.params.iter_mut().chain(ck.optimizer.iter_mut()) {
            match self.persistent.get(&PersistentKey::named(name)) {
                Some(view) if view.shape == t.shape => self.backend.read(view, &mut t.data)?,
                // The optimizer's state before the first step.
                None => t.data.fill(0.0),
                Some(view) => {
                    return Err(Error::input(format!(
                        "`{name}` has shape {}, the checkpoint has {}",
                        view.shape, t.shape
                    )))
                }
            }
        }
        ck.step = self.step;
        Ok(())
    }

    /// Restores the optimizer's state and the step counter from a checkpoint's values.
    pub fn restore_optimizer(&mut self, optimizer: &ParamStore, step: u64) -> Result<()> {
        for (name, t) in optimizer.iter() {
            let view = self.persistent_view(&PersistentKey::named(name), t.shape.clone())?;
            if view.shape != t.shape {
                return Err(Error::input(format!(
                    "`{name}` has shape {}, expected {}",
                    t.shape, view.shape
                )));
            }
            self.backend.write(&view, &t.data)?;
        }
        self.step = step;
        Ok(())
    }

    /// Downloads the gradients of the most recent training step (as the update used
    /// them), by parameter name.
    pub fn gradients(&mut self) -> Result<ParamStore> {
        let key = self
            .last_train
            .ok_or_else(|| Error::input("no training step has run yet"))?;
        let p = &self.programs[&key];
        let mut out = ParamStore::new();
        for (name, g) in &p.ids.grads {
            let view = p.exe.view(*g).clone();
            out.insert(name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }

    /// Downloads the recurrent state carried into the last segment for batch size
    /// `batch`: (h, c), h `[layers, B, H]`, c the same for an LSTM stack and `[0, B, H]`
    /// for a GRU stack (which carries h only).
    pub fn carried_state(&mut self, batch: usize) -> Result<(HostTensor, HostTensor)> {
        let (mut hs, mut cs) = (Vec::new(), Vec::new());
        for slot in self.recurrent.state_slots() {
            let key = PersistentKey::Carried { slot, batch };
            let view = self.persistent_view(&key, self.recurrent.state_shape(batch))?;
            let data = download(self.backend.as_mut(), &view)?.data;
            match slot.part {
                StatePart::H => hs.push(data),
                StatePart::C => cs.push(data),
            }
        }
        let hidden = self.recurrent.hidden();
        let stacked = |parts: Vec<Vec<f32>>| {
            let shape = Shape::from([parts.len(), batch, hidden]);
            HostTensor::new(shape, parts.concat())
        };
        Ok((stacked(hs)?, stacked(cs)?))
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
        let &(arena, offset) = layout
            .persistent
            .get(&key.to_string())
            .ok_or_else(|| Error::Graph(format!("`{key}` is not in the memory plan")))?;
        Ok(TensorView::at(buffers[arena], offset, shape.clone()))
    }

    fn ensure_program(&mut self, key: ProgramKey) -> Result<()> {
        if self.programs.contains_key(&key) {
            return Ok(());
        }
        let mut ids = Program::build(&self.model, &self.opts.optim, key)?;
        let mut bound = HashMap::new();
        for (t, k) in &ids.persistent {
            let shape = ids.graph.shape(*t).clone();
            bound.insert(*t, self.persistent_view(k, shape)?);
        }
        let graph = std::mem::take(&mut ids.graph);
        let exe = match &self.layout {
            Some((layout, buffers)) => {
                let placement = layout.programs.get(&key.to_string()).ok_or_else(|| {
                    let mut planned: Vec<&String> = layout.programs.keys().collect();
                    planned.sort();
                    Error::input(format!(
                        "program `{key}` is not in the memory plan (planned: {}); plan the job with this batch size and sequence length",
                        planned.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ))
                })?;
                Executable::in_buffers(graph, bound, placement, buffers)?
            }
            None => Executable::new(graph, self.backend.as_mut(), bound)?,
        };
        self.programs.insert(key, Loaded { ids, exe });
        Ok(())
    }
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
