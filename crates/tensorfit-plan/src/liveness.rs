//! Lifetimes and categories of a program's tensors, read off its schedule.
//!
//! A tensor occupies memory from the node that writes it to the last node that reads it
//! (inputs from the start of the run, host-read outputs to its end). Two tensors whose
//! lifetimes do not overlap can share bytes: that is all the planner exploits, and it is
//! exact because the executor runs nodes in exactly this order.

use std::collections::HashSet;

use tensorfit_core::{schedule, Graph, Op, Phase, Result, Role, TensorId};

/// What a tensor's bytes are for, as the plan's table reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    Parameters,
    Gradients,
    OptimizerState,
    /// Running statistics and the LSTM state carried between chunks.
    State,
    Inputs,
    SavedActivations,
    TransientActivations,
    Workspace,
}

impl Category {
    pub const ALL: [Category; 8] = [
        Category::Parameters,
        Category::Gradients,
        Category::OptimizerState,
        Category::State,
        Category::Inputs,
        Category::SavedActivations,
        Category::TransientActivations,
        Category::Workspace,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer state",
            Category::State => "running stats & carried state",
            Category::Inputs => "inputs",
            Category::SavedActivations => "activations saved for backward",
            Category::TransientActivations => "transient activations",
            Category::Workspace => "workspace",
        }
    }

    /// Stable key for JSON.
    pub fn key(self) -> &'static str {
        match self {
            Category::Parameters => "parameters",
            Category::Gradients => "gradients",
            Category::OptimizerState => "optimizer_state",
            Category::State => "state",
            Category::Inputs => "inputs",
            Category::SavedActivations => "saved_activations",
            Category::TransientActivations => "transient_activations",
            Category::Workspace => "workspace",
        }
    }
}

/// The lifetime of one non-persistent tensor: schedule positions `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub tensor: TensorId,
    pub start: usize,
    pub end: usize,
    pub category: Category,
}

/// Lifetimes of every tensor that is not persistent (parameters and state), and the
/// category of every tensor. `outputs` are read by the host after the run.
#[derive(Debug, Clone)]
pub struct Liveness {
    pub lifetimes: Vec<Lifetime>,
    pub categories: Vec<Category>,
    /// Number of nodes in the schedule.
    pub steps: usize,
}

pub fn liveness(graph: &Graph, outputs: &[TensorId]) -> Result<Liveness> {
    let order = schedule(graph)?;
    let n_tensors = graph.tensors().len();
    let mut pos = vec![0usize; graph.nodes().len()];
    for (i, node) in order.iter().enumerate() {
        pos[node.0] = i;
    }
    let mut last_read: Vec<Option<usize>> = vec![None; n_tensors];
    let mut read_in_backward = vec![false; n_tensors];
    let mut adam_grad = vec![false; n_tensors];
    let mut adam_state = vec![false; n_tensors];
    for (i, node) in graph.nodes().iter().enumerate() {
        for &t in &node.inputs {
            let p = pos[i];
            last_read[t.0] = Some(last_read[t.0].map_or(p, |q: usize| q.max(p)));
            if node.phase == Phase::Backward {
                read_in_backward[t.0] = true;
            }
        }
        // The gradients an update reads (clipped or not), and the state it keeps.
        if let Op::ClipGrad { .. } = node.op {
            adam_grad[node.inputs[0].0] = true;
        }
        if let Op::Adam(_) | Op::Sgd(_) = node.op {
            adam_grad[node.inputs[0].0] = true;
            for &t in &node.outputs[1..] {
                adam_state[t.0] = true;
            }
        }
    }
    let outputs: HashSet<TensorId> = outputs.iter().copied().collect();
    let end_of_run = order.len();
    let mut lifetimes = Vec::new();
    let mut categories = Vec::with_capacity(n_tensors);
    for (i, info) in graph.tensors().iter().enumerate() {
        let id = TensorId(i);
        let category = match info.role {
            Role::Parameter => Category::Parameters,
            Role::State if adam_state[i] => Category::OptimizerState,
            Role::State => Category::State,
            Role::Input => Category::Inputs,
            Role::Computed => {
                let producer_phase = info.producer.map(|p| graph.node(p).phase);
                if adam_grad[i] {
                    Category::Gradients
                } else if producer_phase == Some(Phase::Forward) && read_in_backward[i] {
                    Category::SavedActivations
                } else if last_read[i].is_none() && !outputs.contains(&id) {
                    Category::Workspace
                } else {
                    Category::TransientActivations
                }
            }
        };
        categories.push(category);
        let (start, end) = match info.role {
            Role::Parameter | Role::State => continue,
            Role::Input => (0, last_read[i].unwrap_or(0)),
            Role::Computed => {
                let start = info.producer.map_or(0, |p| pos[p.0]);
                (start, last_read[i].unwrap_or(start).max(start))
            }
        };
        let end = if outputs.contains(&id) {
            end_of_run
        } else {
            end
        };
        lifetimes.push(Lifetime {
            tensor: id,
            start,
            end,
            category,
        });
    }
    Ok(Liveness {
        lifetimes,
        categories,
        steps: order.len(),
    })
}
