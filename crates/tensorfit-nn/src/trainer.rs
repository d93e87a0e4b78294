//! The truncated-BPTT trainer: runs the classifier's graphs on one backend.
//!
//! A minibatch is a `[T, B, F]` sequence with one label per sequence (the class is read
//! at the last step). With a truncated-BPTT length `L`, the first `T - L` steps only
//! advance the LSTM state (inference-form layers, no activations kept), in chunks of at
//! most `L`; the last `L` steps run forward, backward and Adam from that carried state.
//! Gradients therefore stop at the segment border, and training memory depends on `L`,
//! not `T`. This is what a PyTorch user does with `h.detach()` between segments.
//!
//! Parameters, optimizer moments, running statistics and the carried (h, c) live on the
//! device for the trainer's whole life; every graph binds them by name, so a training
//! graph and an evaluation graph share one copy. Each distinct (kind, batch, length)
//! graph is built once and cached.

use std::collections::HashMap;

use tensorfit_core::{
    backward, Backend, Error, Executable, Graph, HostTensor, MemoryInfo, Op, Result, Role, Shape,
    TensorId, TensorView,
};

use crate::adam::AdamConfig;
use crate::config::ModelConfig;
use crate::model::{carry_graph, classifier, Mode, BN_MOMENTUM};
use crate::params::ParamStore;

/// How to train.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Truncated-BPTT length: gradients flow through at most this many final steps.
    pub tbptt: usize,
    /// Longest chunk of time steps run at once when only the state is advanced (the
    /// carried part of training, and evaluation).
    pub chunk: usize,
    pub adam: AdamConfig,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            tbptt: 50,
            chunk: 50,
            adam: AdamConfig::default(),
        }
    }
}

/// What one training step produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    /// 1-based count of optimizer steps taken so far.
    pub step: u64,
    pub loss: f32,
    /// Softmax probabilities `[B, classes]` before the update.
    pub probs: HostTensor,
}

/// What an evaluation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    pub loss: f32,
    pub accuracy: f32,
    pub probs: HostTensor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Carry,
    Train,
    Eval,
}

#[derive(Debug)]
struct Program {
    exe: Executable,
    x: TensorId,
    labels: Option<TensorId>,
    loss: Option<TensorId>,
    probs: Option<TensorId>,
    scalars: Option<TensorId>,
    /// (parameter name, gradient) in training programs.
    grads: Vec<(String, TensorId)>,
}

/// Trains and evaluates one model on one backend. See the module documentation.
pub struct Trainer {
    backend: Box<dyn Backend>,
    cfg: ModelConfig,
    opts: TrainOptions,
    /// Device copies of everything that outlives a run, by name (`state.*` per batch size).
    persistent: HashMap<String, TensorView>,
    programs: HashMap<ProgramKey, Program>,
    last_train: Option<(usize, usize)>,
    step: u64,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("backend", &self.backend.name())
            .field("cfg", &self.cfg)
            .field("opts", &self.opts)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl Trainer {
    /// Uploads `params` (which must match `cfg`) to `backend`.
    pub fn new(
        mut backend: Box<dyn Backend>,
        cfg: ModelConfig,
        params: &ParamStore,
        opts: TrainOptions,
    ) -> Result<Self> {
        cfg.validate()?;
        opts.adam.validate()?;
        if opts.tbptt == 0 || opts.chunk == 0 {
            return Err(Error::input("tbptt and chunk lengths must be at least 1"));
        }
        params.check_against(&cfg)?;
        let mut persistent = HashMap::new();
        for (name, t) in params.iter() {
            let view = upload(backend.as_mut(), t)?;
            persistent.insert(name.clone(), view);
        }
        Ok(Trainer {
            backend,
            cfg,
            opts,
            persistent,
            programs: HashMap::new(),
            last_train: None,
            step: 0,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.cfg
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

    /// The backend's memory figures (allocated and peak bytes).
    pub fn memory(&self) -> MemoryInfo {
        self.backend.memory()
    }

    /// One optimizer step on a minibatch: `x` `[T, B, input]`, `labels` `[B]`.
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        let (steps, batch) = self.check_batch(x, labels)?;
        let last = self.opts.tbptt.min(steps);
        self.advance_state(x, batch, steps - last)?;
        let key = (Kind::Train, batch, last);
        self.ensure_program(key)?;
        let scalars = self.opts.adam.scalars(self.step + 1);
        let row = batch * self.cfg.input;
        let prog = program(&self.programs, key)?;
        let backend = self.backend.as_mut();
        prog.exe
            .write(backend, prog.x, &x.data[(steps - last) * row..])?;
        write_opt(&prog.exe, backend, prog.labels, labels)?;
        write_opt(&prog.exe, backend, prog.scalars, &scalars)?;
        prog.exe.run(backend)?;
        let loss = read_opt(&prog.exe, backend, prog.loss)?;
        let probs = read_opt(&prog.exe, backend, prog.probs)?;
        let loss = loss.first().copied().unwrap_or(f32::NAN);
        self.step += 1;
        self.last_train = Some((batch, last));
        if !loss.is_finite() {
            return Err(Error::input(format!(
                "the loss became {loss} at step {}: lower the learning rate or check the data for NaN/Inf",
                self.step
            )));
        }
        Ok(StepReport {
            step: self.step,
            loss,
            probs: HostTensor::new([batch, self.cfg.classes], probs)?,
        })
    }

    /// Runs the model in inference form (running statistics) over whole sequences.
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        let (steps, batch) = self.check_batch(x, labels)?;
        let last = self.opts.chunk.min(steps);
        self.advance_state(x, batch, steps - last)?;
        let key = (Kind::Eval, batch, last);
        self.ensure_program(key)?;
        let row = batch * self.cfg.input;
        let prog = program(&self.programs, key)?;
        let backend = self.backend.as_mut();
        prog.exe
            .write(backend, prog.x, &x.data[(steps - last) * row..])?;
        write_opt(&prog.exe, backend, prog.labels, labels)?;
        prog.exe.run(backend)?;
        let loss = read_opt(&prog.exe, backend, prog.loss)?;
        let probs = HostTensor::new(
            [batch, self.cfg.classes],
            read_opt(&prog.exe, backend, prog.probs)?,
        )?;
        let correct = labels
            .iter()
            .enumerate()
            .filter(|(b, &l)| {
                argmax(&probs.data[b * self.cfg.classes..(b + 1) * self.cfg.classes]) == l as usize
            })
            .count();
        Ok(EvalReport {
            loss: loss.first().copied().unwrap_or(f32::NAN),
            accuracy: correct as f32 / batch as f32,
            probs,
        })
    }

    /// Downloads parameters and running statistics.
    pub fn parameters(&mut self) -> Result<ParamStore> {
        let mut out = ParamStore::new();
        for spec in self.cfg.param_specs() {
            let view = self.persistent_view(&spec.name)?;
            out.insert(&spec.name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }

    /// Downloads the gradients of the most recent training step (before the update used
    /// them), by parameter name.
    pub fn gradients(&mut self) -> Result<ParamStore> {
        let (batch, len) = self
            .last_train
            .ok_or_else(|| Error::input("no training step has run yet"))?;
        let prog = program(&self.programs, (Kind::Train, batch, len))?;
        let mut out = ParamStore::new();
        for (name, g) in &prog.grads {
            let view = prog.exe.view(*g).clone();
            out.insert(name, download(self.backend.as_mut(), &view)?);
        }
        Ok(out)
    }

    /// Downloads the LSTM state carried into the last segment for batch size `batch`:
    /// (h, c), each `[layers, B, H]`.
    pub fn carried_state(&mut self, batch: usize) -> Result<(HostTensor, HostTensor)> {
        let mut hs = Vec::new();
        let mut cs = Vec::new();
        for k in 0..self.cfg.layers {
            let h = self.persistent_view(&state_key(&format!("state.h_l{k}"), batch))?;
            let c = self.persistent_view(&state_key(&format!("state.c_l{k}"), batch))?;
            hs.extend(download(self.backend.as_mut(), &h)?.data);
            cs.extend(download(self.backend.as_mut(), &c)?.data);
        }
        let shape = Shape::from([self.cfg.layers, batch, self.cfg.hidden]);
        Ok((
            HostTensor::new(shape.clone(), hs)?,
            HostTensor::new(shape, cs)?,
        ))
    }

    fn persistent_view(&self, name: &str) -> Result<TensorView> {
        self.persistent
            .get(name)
            .cloned()
            .ok_or_else(|| Error::input(format!("tensor `{name}` is not on the device")))
    }

    fn check_batch(&self, x: &HostTensor, labels: &[f32]) -> Result<(usize, usize)> {
        let d = x.shape.dims();
        if d.len() != 3 || d[2] != self.cfg.input {
            return Err(Error::input(format!(
                "input has shape {}, expected [time, batch, {}]",
                x.shape, self.cfg.input
            )));
        }
        let (steps, batch) = (d[0], d[1]);
        if steps == 0 || batch == 0 {
            return Err(Error::input(format!(
                "input has shape {}: time and batch must be at least 1",
                x.shape
            )));
        }
        if labels.len() != batch {
            return Err(Error::input(format!(
                "{} labels for a batch of {batch}",
                labels.len()
            )));
        }
        if let Some((i, l)) = labels
            .iter()
            .enumerate()
            .find(|(_, &l)| !(l >= 0.0 && l < self.cfg.classes as f32 && l.fract() == 0.0))
        {
            return Err(Error::input(format!(
                "label {i} is {l}, expected a class index in 0..{}",
                self.cfg.classes
            )));
        }
        Ok((steps, batch))
    }

    /// Zeroes the carried state for `batch` and advances it over the first `steps` steps.
    fn advance_state(&mut self, x: &HostTensor, batch: usize, steps: usize) -> Result<()> {
        for k in 0..self.cfg.layers {
            for s in ["h", "c"] {
                let key = state_key(&format!("state.{s}_l{k}"), batch);
                let view = self.persistent_or_zeros(&key, Shape::from([batch, self.cfg.hidden]))?;
                let zeros = vec![0.0; view.len()];
                self.backend.write(&view, &zeros)?;
            }
        }
        let row = batch * self.cfg.input;
        let mut t = 0;
        while t < steps {
            // A shorter first chunk keeps every later chunk at the full length.
            let len = if t == 0 && steps % self.opts.chunk != 0 {
                steps % self.opts.chunk
            } else {
                self.opts.chunk
            };
            let key = (Kind::Carry, batch, len);
            self.ensure_program(key)?;
            let prog = program(&self.programs, key)?;
            let backend = self.backend.as_mut();
            prog.exe
                .write(backend, prog.x, &x.data[t * row..(t + len) * row])?;
            prog.exe.run(backend)?;
            t += len;
        }
        Ok(())
    }

    fn persistent_or_zeros(&mut self, key: &str, shape: Shape) -> Result<TensorView> {
        if let Some(v) = self.persistent.get(key) {
            return Ok(v.clone());
        }
        let view = upload(self.backend.as_mut(), &HostTensor::zeros(shape))?;
        self.persistent.insert(key.to_string(), view.clone());
        Ok(view)
    }

    fn ensure_program(&mut self, key: ProgramKey) -> Result<()> {
        if self.programs.contains_key(&key) {
            return Ok(());
        }
        let (kind, batch, steps) = key;
        let cfg = self.cfg.clone();
        let mut g;
        let mut prog_ids = (TensorId(0), None, None, None, None, Vec::new());
        match kind {
            Kind::Carry => {
                let (graph, stack) = carry_graph(&cfg, batch, steps)?;
                g = graph;
                prog_ids.0 = stack.x;
            }
            Kind::Eval => {
                g = Graph::new();
                let c = classifier(&mut g, &cfg, batch, steps, Mode::Infer)?;
                prog_ids = (
                    c.stack.x,
                    Some(c.labels),
                    Some(c.loss),
                    Some(c.probs),
                    None,
                    Vec::new(),
                );
            }
            Kind::Train => {
                g = Graph::new();
                let c = classifier(&mut g, &cfg, batch, steps, Mode::Train)?;
                let one = g.op1(
                    "loss.grad_seed",
                    Op::Fill {
                        value: 1.0,
                        shape: Shape::from([1]),
                    },
                    &[],
                )?;
                let wrt: Vec<TensorId> = c.params.iter().map(|(_, t)| *t).collect();
                let grads = backward(&mut g, &[(c.loss, one)], &wrt)?;
                let mut named = Vec::with_capacity(grads.len());
                for ((name, _), grad) in c.params.iter().zip(grads) {
                    let grad = grad.ok_or_else(|| {
                        Error::Graph(format!("the loss does not depend on parameter `{name}`"))
                    })?;
                    named.push((name.clone(), grad));
                }
                let grad_ids: Vec<TensorId> = named.iter().map(|(_, g)| *g).collect();
                let (scalars, _) = self
                    .opts
                    .adam
                    .append_updates(&mut g, &c.params, &grad_ids)?;
                let unbias = batch as f32 / (batch as f32 - 1.0);
                for (bn, mean, var) in &c.batch_stats {
                    let rm = find_leaf(&g, &format!("{bn}.running_mean"))?;
                    let rv = find_leaf(&g, &format!("{bn}.running_var"))?;
                    g.update(
                        &format!("{bn}.stats_update"),
                        Op::BatchNormStatsUpdate {
                            momentum: BN_MOMENTUM,
                            unbias,
                        },
                        &[*mean, *var],
                        &[rm, rv],
                    )?;
                }
                prog_ids = (
                    c.stack.x,
                    Some(c.labels),
                    Some(c.loss),
                    Some(c.probs),
                    Some(scalars),
                    named,
                );
            }
        }
        let bound = self.bind_persistent(&g, batch)?;
        let exe = Executable::new(g, self.backend.as_mut(), bound)?;
        let (x, labels, loss, probs, scalars, grads) = prog_ids;
        self.programs.insert(
            key,
            Program {
                exe,
                x,
                labels,
                loss,
                probs,
                scalars,
                grads,
            },
        );
        Ok(())
    }

    /// Views for every parameter and state leaf of `g`, allocating (zeroed) state the
    /// trainer has not seen yet: optimizer moments start at zero, as in PyTorch.
    fn bind_persistent(
        &mut self,
        g: &Graph,
        batch: usize,
    ) -> Result<HashMap<TensorId, TensorView>> {
        let mut bound = HashMap::new();
        for (i, info) in g.tensors().iter().enumerate() {
            if !matches!(info.role, Role::Parameter | Role::State) {
                continue;
            }
            let key = state_key(&info.name, batch);
            let view = self.persistent_or_zeros(&key, info.shape.clone())?;
            bound.insert(TensorId(i), view);
        }
        Ok(bound)
    }
}

type ProgramKey = (Kind, usize, usize);

fn program(programs: &HashMap<ProgramKey, Program>, key: ProgramKey) -> Result<&Program> {
    programs
        .get(&key)
        .ok_or_else(|| Error::Graph(format!("program {key:?} was not built")))
}

/// Carried LSTM state depends on the batch size; everything else does not.
fn state_key(name: &str, batch: usize) -> String {
    if name.starts_with("state.") {
        format!("{name}@{batch}")
    } else {
        name.to_string()
    }
}

fn find_leaf(g: &Graph, name: &str) -> Result<TensorId> {
    g.find(name)
        .ok_or_else(|| Error::Graph(format!("tensor `{name}` missing from the training graph")))
}

fn upload(backend: &mut dyn Backend, t: &HostTensor) -> Result<TensorView> {
    let bytes = (t.numel() as u64).saturating_mul(4).max(4);
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

fn write_opt(
    exe: &Executable,
    backend: &mut dyn Backend,
    t: Option<TensorId>,
    data: &[f32],
) -> Result<()> {
    match t {
        Some(t) => exe.write(backend, t, data),
        None => Ok(()),
    }
}

fn read_opt(exe: &Executable, backend: &mut dyn Backend, t: Option<TensorId>) -> Result<Vec<f32>> {
    match t {
        Some(t) => exe.read(backend, t),
        None => Ok(Vec::new()),
    }
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
