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

use crate::description::{HeadOn, ModelDescription};
use crate::layers::{dropout, BatchNorm, StateSlot};
use crate::model::{carry_graph, classifier_at_lengths, copy_finals, Mode};
use crate::optim::OptimConfig;
use crate::options::{ProgramKey, ProgramKind};
use crate::recompute;
use crate::sync_head::{self, HeadPart};
use crate::train_graph::{train_graph, TrainGraph};
use crate::update_graph::{update_graph, UpdateGraph};

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
    /// The labels of the steps the program scores, in time order: one input, or one per
    /// entry of `xs` (recomputation with a head on every step), each over its steps.
    pub labels: Vec<TensorId>,
    /// A head on every step with cross-entropy: the `[1]` input
    /// [`crate::every_step::loss_scale`] of the labels written.
    pub loss_scale: Option<TensorId>,
    /// The sequences' lengths `[B]` within each entry of `xs` (padded programs).
    pub lengths: Vec<TensorId>,
    pub loss: Option<TensorId>,
    /// The predictions, one per entry of `labels`.
    pub probs: Vec<TensorId>,
    /// The optimizer's scalars (`adam.scalars`, `sgd.scalars`), written each step.
    pub scalars: Option<TensorId>,
    /// The step's dropout key ([`dropout::KEY_INPUT`]), written each step, in training
    /// programs of a model that drops.
    pub dropout_key: Option<TensorId>,
    /// The squared global gradient norm, read after each step when clipping by norm.
    pub grad_norm_sq: Option<TensorId>,
    /// (parameter name, gradient): computed by training and gradient programs; in the
    /// update program, the inputs the host writes (the gradients averaged over ranks).
    pub grads: Vec<(String, TensorId)>,
    /// The head's input `[B, H]`, with BatchNorm synchronised over ranks: computed by
    /// the head-input program, written by the host into the head program.
    pub features: Option<TensorId>,
    /// Its gradient: computed by the head program, written into the stack-gradient
    /// program (this rank's rows).
    pub features_grad: Option<TensorId>,
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
            padded,
        } = key;
        let cut = match (kind, recompute) {
            (_, Some(_)) => Some("recomputation in sub-segments (--recompute)"),
            (ProgramKind::Carry | ProgramKind::EvalCarry | ProgramKind::TrainCarry, _) => {
                Some("in chunks of time that continue from a carried state (truncated BPTT shorter than the sequence or in windows, a state carried into the next batch, inference in time chunks)")
            }
            _ => None,
        };
        if let Some(what) = cut {
            model.network()?.check_splits_in_time(what)?;
        }
        let (mut p, carried) = match (kind, recompute) {
            (ProgramKind::Carry, _) => {
                let (graph, stack) = carry_graph(model, batch, steps, padded)?;
                let mut p = Program::bare(key, graph, vec![(stack.x, steps)]);
                p.lengths = stack.lengths.into_iter().collect();
                (p, stack.carried)
            }
            (ProgramKind::Eval | ProgramKind::EvalCarry, _) => {
                let mut g = Graph::new();
                let dims = (batch, steps);
                let c = classifier_at_lengths(&mut g, model, dims, Mode::Infer, padded)?;
                // The state at the end stays on the device: the next chunk of a head on
                // every step, or a stream's next step, starts from it (an evaluation
                // zeroes it first).
                copy_finals(&mut g, &c.stack.carried, &c.stack.finals)?;
                let mut p = Program::bare(key, g, vec![(c.stack.x, steps)]);
                p.lengths = c.stack.lengths.into_iter().collect();
                p.labels = vec![c.labels];
                p.loss_scale = c.loss_scale;
                p.loss = Some(c.loss);
                p.probs = vec![c.probs];
                (p, c.stack.carried)
            }
            (ProgramKind::Update, _) => {
                let UpdateGraph {
                    graph,
                    update,
                    grad_inputs,
                } = update_graph(model, optim)?;
                let mut p = Program::bare(key, graph, Vec::new());
                p.scalars = Some(update.scalars);
                p.grad_norm_sq = update.grad_norm_sq;
                p.grads = grad_inputs;
                (p, Vec::new())
            }
            (ProgramKind::HeadInput | ProgramKind::Head | ProgramKind::StackGrads, _) => {
                let part = match kind {
                    ProgramKind::HeadInput => sync_head::head_input(model, batch, steps)?,
                    ProgramKind::Head => sync_head::head(model, batch)?,
                    _ => sync_head::stack_grads(model, batch, steps)?,
                };
                Program::sync_part(key, part)?
            }
            (ProgramKind::Train | ProgramKind::TrainCarry | ProgramKind::Grads, _) => {
                let mut t = match recompute {
                    None => train_graph(model, batch, steps, padded)?,
                    Some(segment) => {
                        recompute::train_graph(model, (batch, steps), segment, padded)?
                    }
                };
                if kind == ProgramKind::TrainCarry {
                    copy_finals(&mut t.graph, &t.carried, &t.finals)?;
                }
                let carried = std::mem::take(&mut t.carried);
                (Program::training(key, model, optim, t)?, carried)
            }
        };
        p.dropout_key = p
            .graph
            .tensors()
            .iter()
            .position(|t| t.role == Role::Input && t.name == dropout::KEY_INPUT)
            .map(TensorId);
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
    /// updates appended; a gradient program ([`ProgramKind::Grads`]): `t` with the
    /// running-statistics updates only.
    fn training(
        key: ProgramKey,
        model: &ModelDescription,
        optim: &OptimConfig,
        t: TrainGraph,
    ) -> Result<Program> {
        let TrainGraph {
            mut graph,
            xs,
            lengths,
            labels,
            probs,
            loss,
            loss_scale,
            batch_stats,
            params,
            grads,
            ..
        } = t;
        let update = match key.kind {
            ProgramKind::Grads => None,
            _ => Some(optim.append(&mut graph, &params, &grads)?),
        };
        // The rows BatchNorm saw: one per sequence, or one per step and sequence.
        let rows = match model.head.on {
            HeadOn::Sequence(_) => key.batch,
            HeadOn::EveryStep => key.batch * key.steps,
        } as f32;
        let unbias = rows / (rows - 1.0);
        for stats in &batch_stats {
            BatchNorm::stats_update(&mut graph, stats, unbias)?;
        }
        let mut p = Program::bare(key, graph, xs);
        p.labels = labels;
        p.loss_scale = loss_scale;
        p.lengths = lengths;
        p.loss = Some(loss);
        p.probs = probs;
        p.scalars = update.as_ref().map(|u| u.scalars);
        p.grad_norm_sq = update.and_then(|u| u.grad_norm_sq);
        p.grads = params.into_iter().map(|(n, _)| n).zip(grads).collect();
        Ok(p)
    }

    /// A part of a training segment split at the head (see [`crate::sync_head`]).
    fn sync_part(key: ProgramKey, part: HeadPart) -> Result<(Program, Vec<(TensorId, StateSlot)>)> {
        let HeadPart {
            mut graph,
            x,
            features,
            features_grad,
            head,
            grads,
            carried,
        } = part;
        if let Some(h) = &head {
            // The global batch's statistics: the head program's batch is every rank's.
            let unbias = key.batch as f32 / (key.batch as f32 - 1.0);
            for stats in &h.batch_stats {
                BatchNorm::stats_update(&mut graph, stats, unbias)?;
            }
        }
        let xs = x.map(|x| vec![(x, key.steps)]).unwrap_or_default();
        let mut p = Program::bare(key, graph, xs);
        if let Some(h) = head {
            p.labels = vec![h.labels];
            p.loss = Some(h.loss);
            p.probs = vec![h.probs];
        }
        p.features = features;
        p.features_grad = features_grad;
        p.grads = grads;
        Ok((p, carried))
    }

    fn bare(key: ProgramKey, graph: Graph, xs: Vec<(TensorId, usize)>) -> Program {
        Program {
            key,
            graph,
            xs,
            labels: Vec::new(),
            loss_scale: None,
            lengths: Vec::new(),
            loss: None,
            probs: Vec::new(),
            scalars: None,
            dropout_key: None,
            grad_norm_sq: None,
            grads: Vec::new(),
            features: None,
            features_grad: None,
            persistent: Vec::new(),
        }
    }

    /// The program as the memory planner takes it: its graph, the tensors the host
    /// reads after a run and its persistent tensors by name.
    pub fn spec(&self) -> tensorfit_plan::ProgramSpec<'_> {
        tensorfit_plan::ProgramSpec {
            name: self.key.to_string(),
            graph: &self.graph,
            outputs: self.outputs(),
            persistent: self
                .persistent
                .iter()
                .map(|(t, k)| (*t, k.to_string()))
                .collect(),
        }
    }

    /// Tensors the host reads after a run (they must outlive it).
    pub fn outputs(&self) -> Vec<TensorId> {
        let read = [
            self.loss,
            self.grad_norm_sq,
            self.features,
            self.features_grad,
        ];
        let mut v: Vec<TensorId> = read.into_iter().flatten().collect();
        v.extend(&self.probs);
        v.extend(self.grads.iter().map(|(_, g)| *g));
        v
    }
}
