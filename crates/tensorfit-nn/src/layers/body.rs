//! The layers of a body, the part of a network over each sequence's steps between its
//! input (and embedding) and its head, in the order a description lists them.
//! [`BodyPart`] is where a kind of body layer is registered: [`BodyPart::layer`] is its
//! one match.

use super::layer::Layer;
use super::{ParamSpec, RecurrentLayer, RecurrentWeights, Tensors};

/// One body layer: `[T, B, F]` in and out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyPart {
    /// A stack of LSTM or GRU layers (registered as `lstm` or `gru`).
    Recurrent(RecurrentLayer),
}

/// One body layer's tensors, by its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyPartTensors<T> {
    Recurrent(RecurrentWeights<T>),
}

impl<T> BodyPartTensors<T> {
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> BodyPartTensors<U> {
        match self {
            BodyPartTensors::Recurrent(t) => BodyPartTensors::Recurrent(t.map(f)),
        }
    }

    /// A recurrent stack's weights, if this layer is one.
    pub fn recurrent(&self) -> Option<&RecurrentWeights<T>> {
        match self {
            BodyPartTensors::Recurrent(t) => Some(t),
        }
    }
}

impl<T> Tensors<T> for BodyPartTensors<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            BodyPartTensors::Recurrent(t) => t.items(),
        }
    }
}

impl BodyPart {
    /// The layer, as the rest of the engine asks it.
    pub fn layer(&self) -> &dyn Layer {
        match self {
            BodyPart::Recurrent(r) => r,
        }
    }

    pub fn specs(&self) -> BodyPartTensors<ParamSpec> {
        match self {
            BodyPart::Recurrent(r) => BodyPartTensors::Recurrent(r.cells.specs()),
        }
    }

    /// The layer's forward FLOPs over `steps` steps of `batch` sequences.
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        match self {
            BodyPart::Recurrent(r) => r.cells.forward_flops(batch, steps),
        }
    }

    /// The recurrent stack, if this layer is one.
    pub fn recurrent(&self) -> Option<&RecurrentLayer> {
        match self {
            BodyPart::Recurrent(r) => Some(r),
        }
    }
}
