//! The model's layers as types. Each layer owns three facts and nothing else holds them:
//! its tensors (PyTorch's names, shapes, kinds and initialisation, in one table per
//! layer), its forward builder, and for a recurrent layer its carried state.
//!
//! A layer's tensors are a named struct generic in what it holds
//! ([`LstmWeights<T>`](lstm::LstmWeights), [`BatchNormTensors<T>`](batchnorm::BatchNormTensors),
//! [`LinearTensors<T>`](dense::LinearTensors)): with `T` = [`ParamSpec`] it is the table,
//! with `T` = [`TensorId`] it is the layer's leaves on a graph (`specs.map(|s| s.leaf(g))`),
//! so a builder reaches a weight by field, never by looking a name up.
//!
//! Every kind implements [`Layer`] (its table, shape rule, properties, carried state and
//! forward), which is how the rest of the engine reaches it; `docs/adding-a-layer.md`
//! lists what a new kind touches.

pub mod batchnorm;
mod bidirectional;
pub mod body;
pub mod cell;
pub mod conv1d;
pub mod dense;
pub mod dropout;
pub mod embedding;
pub mod encoder;
pub mod gru;
pub mod head;
pub mod last_step;
pub mod layer;
pub mod layernorm;
pub mod lstm;
pub mod pool;
pub mod positions;
pub mod recurrent;

use tensorfit_core::{Graph, Shape, TensorId};

pub use batchnorm::{BatchNorm, BatchNormTensors, BatchStats};
pub use body::{BodyPart, BodyPartTensors};
pub use cell::{CellInput, CellWeights};
pub use conv1d::Conv1d;
pub use dense::{Dense, LinearTensors, OutputLayer};
pub use dropout::{Between, Dropout, DropoutRate};
pub use embedding::{Embedding, EmbeddingTensors};
pub use encoder::{Encoder, EncoderLayerTensors};
pub use gru::{Gru, GruWeights};
pub use head::{residual_add, HeadEntry, HeadPart, HeadPartTensors};
pub use last_step::LastStep;
pub use layer::{Context, Layer, LayerTraits};
pub use layernorm::LayerNorm;
pub use lstm::{Lstm, LstmGrads, LstmWeights, StatePart, StateSlot};
pub use pool::TimePool;
pub use positions::Positions;
pub use recurrent::{
    LayerForward, LayerGrads, Recurrent, RecurrentLayer, RecurrentStack, RecurrentWeights,
};

/// Whether a tensor is trained by the optimizer or is a running statistic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    Trainable,
    RunningStat,
}

/// A tensor's starting value (PyTorch's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Uniform in `[-bound, bound]`, drawn from the model's generator in table order.
    Uniform { bound: f32 },
    /// Every element `value`.
    Constant(f32),
    /// Normal with mean 0 and standard deviation `std`, drawn like `Uniform`.
    Normal { std: f32 },
}

impl Init {
    /// PyTorch's `±1/√fan` (`fan`: the hidden size for recurrent layers, the input
    /// features for linear ones).
    pub fn fan(fan: usize) -> Init {
        Init::Uniform {
            bound: 1.0 / (fan as f32).sqrt(),
        }
    }
}

/// Name, shape, kind and initialisation of one model tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSpec {
    pub name: String,
    pub shape: Shape,
    pub kind: ParamKind,
    pub init: Init,
}

impl ParamSpec {
    pub fn trainable(name: String, shape: impl Into<Shape>, init: Init) -> Self {
        ParamSpec {
            name,
            shape: shape.into(),
            kind: ParamKind::Trainable,
            init,
        }
    }

    pub fn running(name: String, shape: impl Into<Shape>, init: Init) -> Self {
        ParamSpec {
            name,
            shape: shape.into(),
            kind: ParamKind::RunningStat,
            init,
        }
    }

    /// Adds this tensor to `g` as a parameter or as state, by its kind.
    pub fn leaf(&self, g: &mut Graph) -> TensorId {
        match self.kind {
            ParamKind::Trainable => g.parameter(&self.name, self.shape.clone()),
            ParamKind::RunningStat => g.state(&self.name, self.shape.clone()),
        }
    }
}

/// A layer's named tensors, generic in what is held for each (specs in the layer's table,
/// ids on a graph, gradients); each such struct also has an inherent `map`.
pub trait Tensors<T> {
    /// The items in table order (the order of leaves, checkpoints and Adam's updates).
    fn items(&self) -> Vec<&T>;

    /// The items in table order, as values.
    fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.items().into_iter().cloned().collect()
    }
}
