//! The programs a run is made of.
//!
//! A *program* is one graph with fixed shapes: a training segment (forward, backward,
//! the optimizer, running statistics), a chunk that only advances the LSTM state, or an
//! evaluation chunk; [`ProgramKey`] names one and [`crate::options`] says which a call
//! runs. The trainer runs them; the planner plans them. Both get them from here, so what
//! is planned is exactly what runs.

use std::collections::HashMap;
use std::fmt;

use tensorfit_core::{Graph, Result, Role, TensorId};

use crate::description::ModelDescription;
use crate::layers::{BatchNorm, StateSlot};
use crate::model::{carry_finals, carry_graph, classifier, Mode};
use crate::optim::OptimConfig;
use crate::options::{ProgramKey, ProgramKind};
use crate::recompute;
use crate::train_graph::{train_graph, TrainGraph};

/// The key under which every program shares a persistent tensor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PersistentKey {
    /// A parameter, running statistic or optimizer moment, by name: one copy.
    Named(String),
    /// Carried recurrent state, whose shape depends on the batch: one copy per batch
    /// size.
    Carried { slot: StateSlot, batch: usize },
}

impl PersistentKey {
    pub fn named(name: &str) -> Self {
        PersistentKey::Named(name.to_string())
    }
}

/// As the planner names it: the tensor's name, `@batch` for carried state.
impl fmt::Display for PersistentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PersistentKey::Named(name) => f.write_str(name),
            PersistentKey::Carried { slot, batch } => write!(f, "{}@{batch}", slot.name()),
        }
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
    /// The optimizer's scalars (`adam.scalars`, `sgd.scalars`), written each step.
    pub scalars: Option<TensorId>,
    /// The squared global gradient norm, read after each step when clipping by norm.
    pub grad_norm_sq: Option<TensorId>,
    /// (parameter name, gradient) in training programs.
    pub grads: Vec<(String, TensorId)>,
    /// Every parameter and state leaf with the key all programs share it under.
    pub persistent: Vec<(TensorId, PersistentKey)>,
}

impl Program {
    /// Builds the program `key` for `model`.
    pub fn build(
        model: &ModelDescription,
        optim: &OptimConfig,
        key: ProgramKey,
    ) -> Result<Program> {
        let ProgramKey {
            kind,
            batch,
            steps,
            recompute,
        } = key;
        let (mut p, carried) = match (kind, recompute) {
            (ProgramKind::Carry, _) => {
                let (graph, stack) = carry_graph(model, batch, steps)?;
                let p = Program::bare(key, graph, vec![(stack.x, steps)]);
                (p, stack.carried)
            }
            (ProgramKind::Eval, _) => {
                let mut g = Graph::new();
                let c = classifier(&mut g, model, batch, steps, Mode::Infer)?;
                // The state at the end stays on the device: a stream's next step starts
                // from it (an evaluation zeroes it first).
                carry_finals(&mut g, &c.stack)?;
                let mut p = Program::bare(key, g, vec![(c.stack.x, steps)]);
                p.labels = Some(c.labels);
                p.loss = Some(c.loss);
                p.probs = Some(c.probs);
                (p, c.stack.carried)
            }
            (ProgramKind::Train, _) => {
                let mut t = match recompute {
                    None => train_graph(model, batch, steps)?,
                    Some(segment) => recompute::train_graph(model, batch, steps, segment)?,
                };
                let carried = std::mem::take(&mut t.carried);
                (Program::training(key, optim, t)?, carried)
            }
        };
        let carried: HashMap<TensorId, StateSlot> = carried.into_iter().collect();
        p.persistent = p
            .graph
            .tensors()
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t.role, Role::Parameter | Role::State))
            .map(|(i, t)| {
                let id = TensorId(i);
                let key = match carried.get(&id) {
                    Some(&slot) => PersistentKey::Carried { slot, batch },
                    None => PersistentKey::named(&t.name),
                };
                (id, key)
            })
            .collect();
        Ok(p)
    }

    /// A training program: `t` with clipping, the optimizer and the running-statistics
    /// updates appended.
    fn training(key: ProgramKey, optim: &OptimConfig, t: TrainGraph) -> Result<Program> {
        let TrainGraph {
            mut graph,
            xs,
            head,
            params,
            grads,
            ..
        } = t;
        let update = optim.append(&mut graph, &params, &grads)?;
        let unbias = key.batch as f32 / (key.batch as f32 - 1.0);
        for stats in &head.batch_stats {
            BatchNorm::stats_update(&mut graph, stats, unbias)?;
        }
        let mut p = Program::bare(key, graph, xs);
        p.labels = Some(head.labels);
        p.loss = Some(head.loss);
        p.probs = Some(head.probs);
        p.scalars = Some(update.scalars);
        p.grad_norm_sq = update.grad_norm_sq;
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
            grad_norm_sq: None,
            grads: Vec::new(),
            persistent: Vec::new(),
        }
    }

    /// Tensors the host reads after a run (they must outlive it).
    pub fn outputs(&self) -> Vec<TensorId> {
        let read = [self.loss, self.probs, self.grad_norm_sq];
        let mut v: Vec<TensorId> = read.into_iter().flatten().collect();
        v.extend(self.grads.iter().map(|(_, g)| *g));
        v
    }
}
