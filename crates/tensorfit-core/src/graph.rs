//! The graph builder: tensors with static shapes and the nodes (ops) that produce them.
//!
//! A graph is built once per shape configuration and run many times. Shapes are checked
//! when each node is added, so a mistake is reported with the node's name before any
//! memory is allocated. Tensors that no node produces are *leaves* with a role saying
//! who provides their value (see [`Role`]); the planner uses roles and [`Phase`]s to
//! label every byte of a plan.

use crate::args::{Args, OpInputs};
use crate::error::{Error, Result};
use crate::op::Op;
use crate::shape::{DType, Shape};

/// Index of a tensor in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(pub usize);

/// Index of a node in its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// Who gives a tensor its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Written by the host before each run (data, labels, per-step scalars).
    Input,
    /// A trainable parameter; persists across runs.
    Parameter,
    /// Persistent non-trainable state: optimizer moments, running statistics, the LSTM
    /// state carried between segments.
    State,
    /// Produced by a node during a run.
    Computed,
}

/// Which part of a training step a node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    Forward,
    Backward,
    /// Update ops (optimizer steps, running statistics, state carries).
    Update,
}

#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Shape,
    pub dtype: DType,
    pub role: Role,
    /// The node that computes this tensor (`None` for leaves).
    pub producer: Option<NodeId>,
}

impl TensorInfo {
    pub fn bytes(&self) -> u64 {
        (self.shape.numel() as u64).saturating_mul(self.dtype.size_bytes() as u64)
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<TensorId>,
    /// Tensors written: new tensors, or for update ops the existing targets.
    pub outputs: Vec<TensorId>,
    pub phase: Phase,
}

/// A computation graph of ops over statically shaped tensors.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    tensors: Vec<TensorInfo>,
    nodes: Vec<Node>,
    /// Phase given to nodes added with [`Graph::apply`]; autodiff switches it to `Backward`.
    pub(crate) phase: Option<Phase>,
}

impl Graph {
    pub fn new() -> Self {
        Graph::default()
    }

    fn leaf(&mut self, name: &str, shape: Shape, role: Role) -> TensorId {
        self.tensors.push(TensorInfo {
            name: name.to_string(),
            shape,
            dtype: DType::F32,
            role,
            producer: None,
        });
        TensorId(self.tensors.len() - 1)
    }

    /// Sets the phase recorded on nodes added from now on with [`Graph::apply`] (`None`:
    /// forward). Autodiff sets it itself; builders that write backward nodes by hand
    /// (recomputation) set it so the planner labels memory correctly.
    pub fn set_phase(&mut self, phase: Option<Phase>) {
        self.phase = phase;
    }

    /// A tensor the host writes before each run.
    pub fn input(&mut self, name: &str, shape: impl Into<Shape>) -> TensorId {
        self.leaf(name, shape.into(), Role::Input)
    }

    /// A trainable parameter.
    pub fn parameter(&mut self, name: &str, shape: impl Into<Shape>) -> TensorId {
        self.leaf(name, shape.into(), Role::Parameter)
    }

    /// Persistent non-trainable state.
    pub fn state(&mut self, name: &str, shape: impl Into<Shape>) -> TensorId {
        self.leaf(name, shape.into(), Role::State)
    }

    fn check(&self, name: &str, op: &Op, inputs: &[TensorId]) -> Result<Vec<Shape>> {
        let mut shapes = Vec::with_capacity(inputs.len());
        for &t in inputs {
            let info = self.tensors.get(t.0).ok_or_else(|| Error::Shape {
                node: name.to_string(),
                op: op.name(),
                message: format!("input tensor #{} does not exist in this graph", t.0),
            })?;
            shapes.push(&info.shape);
        }
        op.infer_shapes(&shapes).map_err(|message| Error::Shape {
            node: name.to_string(),
            op: op.name(),
            message,
        })
    }

    /// Adds a node computing new tensors from `inputs`, named by the op's inputs struct
    /// (`LstmForwardInputs { x, h0, .. }`), and returns its outputs by name.
    pub fn apply<I: OpInputs<TensorId>>(
        &mut self,
        name: &str,
        op: Op,
        inputs: I,
    ) -> Result<I::Outputs> {
        let op_name = op.name();
        let outputs = self.add_node(name, op, &inputs.into_vec())?;
        I::Outputs::from_vec("outputs", outputs).map_err(|message| Error::Shape {
            node: name.to_string(),
            op: op_name,
            message,
        })
    }

    /// Adds a node from its input list (in the order of the op's structs) and returns its
    /// output list.
    fn add_node(&mut self, name: &str, op: Op, inputs: &[TensorId]) -> Result<Vec<TensorId>> {
        if op.is_update() {
            return Err(Error::Shape {
                node: name.to_string(),
                op: op.name(),
                message: "update ops are added with Graph::update".into(),
            });
        }
        let shapes = self.check(name, &op, inputs)?;
        let node = NodeId(self.nodes.len());
        let labels = op.output_labels();
        let single = shapes.len() == 1;
        let mut outputs = Vec::with_capacity(shapes.len());
        for (k, shape) in shapes.into_iter().enumerate() {
            let tname = if single {
                name.to_string()
            } else {
                format!("{name}.{}", labels.get(k).copied().unwrap_or("out"))
            };
            let t = self.leaf(&tname, shape, Role::Computed);
            self.tensors[t.0].producer = Some(node);
            outputs.push(t);
        }
        self.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
            phase: self.phase.unwrap_or(Phase::Forward),
        });
        Ok(outputs)
    }

    /// Adds an update node that overwrites `targets` (parameters or state) in place, both
    /// named by the op's structs (`AdamInputs`, `AdamTargets`).
    pub fn update<I: OpInputs<TensorId>>(
        &mut self,
        name: &str,
        op: Op,
        inputs: I,
        targets: I::Outputs,
    ) -> Result<NodeId> {
        let (inputs, targets) = (&inputs.into_vec(), &targets.into_vec());
        let err = |message: String| Error::Shape {
            node: name.to_string(),
            op: op.name(),
            message,
        };
        if !op.is_update() {
            return Err(err("not an update op; add it with Graph::apply".into()));
        }
        let shapes = self.check(name, &op, inputs)?;
        if shapes.len() != targets.len() {
            return Err(err(format!(
                "expects {} targets, got {}",
                shapes.len(),
                targets.len()
            )));
        }
        for (t, want) in targets.iter().zip(&shapes) {
            let info = self
                .tensors
                .get(t.0)
                .ok_or_else(|| err(format!("target tensor #{} does not exist", t.0)))?;
            if !matches!(info.role, Role::Parameter | Role::State) {
                return Err(err(format!(
                    "target `{}` must be a parameter or state",
                    info.name
                )));
            }
            if &info.shape != want {
                return Err(err(format!(
                    "target `{}` has shape {}, expected {want}",
                    info.name, info.shape
                )));
            }
            if inputs.contains(t) {
                return Err(err(format!("target `{}` is also an input", info.name)));
            }
        }
        self.nodes.push(Node {
            name: name.to_string(),
            op,
            inputs: inputs.to_vec(),
            outputs: targets.to_vec(),
            phase: Phase::Update,
        });
        Ok(NodeId(self.nodes.len() - 1))
    }

    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn tensor(&self, id: TensorId) -> &TensorInfo {
        &self.tensors[id.0]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    pub fn shape(&self, id: TensorId) -> &Shape {
        &self.tensors[id.0].shape
    }

    /// Finds a tensor by name (first match).
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors
            .iter()
            .position(|t| t.name == name)
            .map(TensorId)
    }

    /// Leaves of a role, in creation order.
    pub fn leaves(&self, role: Role) -> Vec<TensorId> {
        (0..self.tensors.len())
            .filter(|&i| self.tensors[i].role == role)
            .map(TensorId)
            .collect()
    }
}
