//! The programs a run is made of, and which of them each call runs.
//!
//! A *program* is one graph with fixed shapes: a training segment (forward, backward,
//! Adam, running statistics), a chunk that only advances the LSTM state, or an
//! evaluation chunk. The trainer runs them; the planner plans them. Both get them from
//! here, so what is planned is exactly what runs.

use std::fmt;

use tensorfit_core::args::{FillInputs, StatsUpdateInputs, StatsUpdateTargets};
use tensorfit_core::{backward, Error, Graph, Op, Result, Role, Shape, TensorId};

use crate::adam::AdamConfig;
use crate::config::ModelConfig;
use crate::model::{carry_graph, classifier, Head, Mode, Named, BN_MOMENTUM};
use crate::recompute;

/// What a program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProgramKind {
    /// Advances the carried LSTM state over a chunk (no gradients, no head).
    Carry,
    /// The last truncated-BPTT segment: forward, backward, Adam, running statistics.
    Train,
    /// The last evaluation chunk: forward in inference form, loss and probabilities.
    Eval,
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
        };
        write!(f, "{kind} b={} t={}", self.batch, self.steps)?;
        if let Some(r) = self.recompute {
            write!(f, " recompute={r}")?;
        }
        Ok(())
    }
}

/// A built program and the ids the runner needs.
#[derive(Debug, Clone)]
pub struct Program {
    pub key: ProgramKey,
    pub graph: Graph,
    /// The `[len, batch, input]` inputs, in time order, with their lengths (one, except
    /// with recomputation: one per sub-segment).
    pub xs: Vec<(TensorId, usize)>,
    pub labels: Option<TensorId>,
    pub loss: Option<TensorId>,
    pub probs: Option<TensorId>,
    /// `adam.scalars`, written each step.
    pub scalars: Option<TensorId>,
    /// (parameter name, gradient) in training programs.
    pub grads: Vec<(String, TensorId)>,
    /// Every parameter and state leaf with the key all programs share it under.
    pub persistent: Vec<(TensorId, String)>,
}

/// The key of a persistent tensor: its name, and for the carried LSTM state (whose shape
/// depends on the batch) the batch size too.
pub fn persistent_key(name: &str, batch: usize) -> String {
    if name.starts_with("state.") {
        format!("{name}@{batch}")
    } else {
        name.to_string()
    }
}

impl Program {
    /// Builds the program `key` for `cfg`.
    pub fn build(cfg: &ModelConfig, adam: &AdamConfig, key: ProgramKey) -> Result<Program> {
        let ProgramKey {
            kind,
            batch,
            steps,
            recompute,
        } = key;
        let mut p = match (kind, recompute) {
            (ProgramKind::Carry, _) => {
                let (graph, stack) = carry_graph(cfg, batch, steps)?;
                Program::bare(key, graph, vec![(stack.x, steps)])
            }
            (ProgramKind::Eval, _) => {
                let mut g = Graph::new();
                let c = classifier(&mut g, cfg, batch, steps, Mode::Infer)?;
                let mut p = Program::bare(key, g, vec![(c.stack.x, steps)]);
                p.labels = Some(c.labels);
                p.loss = Some(c.loss);
                p.probs = Some(c.probs);
                p
            }
            (ProgramKind::Train, _) => {
                let t = match recompute {
                    None => train_graph(cfg, batch, steps)?,
                    Some(segment) => recompute::train_graph(cfg, batch, steps, segment)?,
                };
                Program::training(key, adam, t)?
            }
        };
        p.persistent = p
            .graph
            .tensors()
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t.role, Role::Parameter | Role::State))
            .map(|(i, t)| (TensorId(i), persistent_key(&t.name, batch)))
            .collect();
        Ok(p)
    }

    /// A training program: `t` with Adam and the running-statistics updates appended.
    fn training(key: ProgramKey, adam: &AdamConfig, t: TrainGraph) -> Result<Program> {
        let TrainGraph {
            mut graph,
            xs,
            head,
            params,
            running,
            grads,
        } = t;
        let scalars = adam.append_updates(&mut graph, &params, &grads)?;
        let unbias = key.batch as f32 / (key.batch as f32 - 1.0);
        for (bn, mean, var) in &head.batch_stats {
            let stat = |s: &str| {
                running
                    .iter()
                    .find(|(n, _)| n == &format!("{bn}.{s}"))
                    .map(|(_, t)| *t)
                    .ok_or_else(|| Error::Graph(format!("{bn}.{s} missing")))
            };
            let targets = StatsUpdateTargets {
                running_mean: stat("running_mean")?,
                running_var: stat("running_var")?,
            };
            let op = Op::BatchNormStatsUpdate {
                momentum: BN_MOMENTUM,
                unbias,
            };
            let stats = StatsUpdateInputs {
                mean: *mean,
                var: *var,
            };
            graph.update(&format!("{bn}.stats_update"), op, stats, targets)?;
        }
        let mut p = Program::bare(key, graph, xs);
        p.labels = Some(head.labels);
        p.loss = Some(head.loss);
        p.probs = Some(head.probs);
        p.scalars = Some(scalars);
        p.grads = params.into_iter().map(|(n, _)| n).zip(grads).collect();
        Ok(p)
    }

    fn bare(key: ProgramKey, graph: Graph, xs: Vec<(TensorId, usize)>) -> Program {
        Program {
            key,
            graph,
            xs,
            labels: None,
            loss: None,
            probs: None,
            scalars: None,
            grads: Vec::new(),
            persistent: Vec::new(),
        }
    }

    /// Tensors the host reads after a run (they must outlive it).
    pub fn outputs(&self) -> Vec<TensorId> {
        let mut v: Vec<TensorId> = [self.loss, self.probs].into_iter().flatten().collect();
        v.extend(self.grads.iter().map(|(_, g)| *g));
        v
    }
}

/// A training segment's graph before the optimizer is appended: forward, loss, and the
/// gradient of every parameter. Built by autodiff ([`train_graph`]) or, with
/// recomputation, partly by hand ([`recompute::train_graph`]).
#[derive(Debug)]
pub(crate) struct TrainGraph {
    pub graph: Graph,
    /// One input per sub-segment, in time order, with its length.
    pub xs: Vec<(TensorId, usize)>,
    pub head: Head,
    pub params: Named,
    pub running: Named,
    /// Gradient of every parameter, in `params` order.
    pub grads: Vec<TensorId>,
}

/// The seed of the loss's gradient: a `[1]` tensor of ones.
pub(crate) fn loss_grad_seed(g: &mut Graph) -> Result<TensorId> {
    let seed = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    Ok(g.apply("loss.grad_seed", seed, FillInputs::default())?.out)
}

/// The error for a parameter the loss does not reach.
pub(crate) fn no_gradient(name: &str) -> Error {
    Error::Graph(format!("the loss does not depend on parameter `{name}`"))
}

/// The whole segment differentiated by autodiff, keeping its activations for backward.
fn train_graph(cfg: &ModelConfig, batch: usize, steps: usize) -> Result<TrainGraph> {
    let mut g = Graph::new();
    let c = classifier(&mut g, cfg, batch, steps, Mode::Train)?;
    let one = loss_grad_seed(&mut g)?;
    let wrt: Vec<TensorId> = c.params.iter().map(|(_, t)| *t).collect();
    let grads = backward(&mut g, &[(c.loss, one)], &wrt)?
        .into_iter()
        .zip(&c.params)
        .map(|(grad, (name, _))| grad.ok_or_else(|| no_gradient(name)))
        .collect::<Result<Vec<_>>>()?;
    Ok(TrainGraph {
        graph: g,
        xs: vec![(c.stack.x, steps)],
        head: Head {
            labels: c.labels,
            loss: c.loss,
            probs: c.probs,
            batch_stats: c.batch_stats,
        },
        params: c.params,
        running: c.running,
        grads,
    })
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
