//! The layers of a body, the part of a network over each sequence's steps between its
//! input (and embedding) and its head, in the order a description lists them.
//! [`BodyPart`] is where a kind of body layer is registered: [`BodyPart::layer`] is its
//! one match.

use tensorfit_core::Shape;

use super::layer::Layer;
use super::{
    Conv1d, Encoder, EncoderLayerTensors, LinearTensors, ParamSpec, Positions, RecurrentLayer,
    RecurrentWeights, Tensors,
};

/// One body layer: `[T, B, F]` in and out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyPart {
    /// A stack of LSTM or GRU layers (registered as `lstm` or `gru`).
    Recurrent(RecurrentLayer),
    Conv1d(Conv1d),
    Positions(Positions),
    Encoder(Encoder),
}

/// One body layer's tensors, by its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyPartTensors<T> {
    Recurrent(RecurrentWeights<T>),
    /// Its weight `[channels, in, kernel]` and bias `[channels]`.
    Conv1d(LinearTensors<T>),
    /// A learned table `[max_len, F]`, or none.
    Positions(Option<T>),
    /// Each encoder layer's, then the final norm's weight and bias `[F]`, if any.
    Encoder(Vec<EncoderLayerTensors<T>>, Option<LinearTensors<T>>),
}

impl<T> BodyPartTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> BodyPartTensors<U> {
        match self {
            BodyPartTensors::Recurrent(t) => BodyPartTensors::Recurrent(t.map(&mut f)),
            BodyPartTensors::Conv1d(t) => BodyPartTensors::Conv1d(t.map(&mut f)),
            BodyPartTensors::Positions(t) => BodyPartTensors::Positions(t.as_ref().map(&mut f)),
            BodyPartTensors::Encoder(t, norm) => {
                let layers = t.iter().map(|l| l.map(&mut f)).collect();
                BodyPartTensors::Encoder(layers, norm.as_ref().map(|n| n.map(&mut f)))
            }
        }
    }

    /// A recurrent stack's weights, if this layer is one.
    pub fn recurrent(&self) -> Option<&RecurrentWeights<T>> {
        match self {
            BodyPartTensors::Recurrent(t) => Some(t),
            BodyPartTensors::Conv1d(_)
            | BodyPartTensors::Positions(_)
            | BodyPartTensors::Encoder(..) => None,
        }
    }
}

impl<T> Tensors<T> for BodyPartTensors<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            BodyPartTensors::Recurrent(t) => t.items(),
            BodyPartTensors::Conv1d(t) => t.items(),
            BodyPartTensors::Positions(t) => t.iter().collect(),
            BodyPartTensors::Encoder(t, norm) => {
                let layers = t.iter().flat_map(|l| l.items());
                layers.chain(norm.iter().flat_map(|n| n.items())).collect()
            }
        }
    }
}

impl BodyPart {
    /// The layer, as the rest of the engine asks it.
    pub fn layer(&self) -> &dyn Layer {
        match self {
            BodyPart::Recurrent(r) => r,
            BodyPart::Conv1d(c) => c,
            BodyPart::Positions(p) => p,
            BodyPart::Encoder(e) => e,
        }
    }

    pub fn specs(&self) -> BodyPartTensors<ParamSpec> {
        match self {
            BodyPart::Recurrent(r) => BodyPartTensors::Recurrent(r.cells.specs()),
            BodyPart::Conv1d(c) => BodyPartTensors::Conv1d(c.specs()),
            BodyPart::Positions(p) => BodyPartTensors::Positions(p.specs()),
            BodyPart::Encoder(e) => BodyPartTensors::Encoder(e.specs(), e.final_norm()),
        }
    }

    /// The layer's forward FLOPs over `steps` steps of `batch` sequences.
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        match self {
            BodyPart::Recurrent(r) => r.cells.forward_flops(batch, steps),
            BodyPart::Conv1d(c) => c.forward_flops(batch, steps),
            BodyPart::Positions(_) => 0.0,
            BodyPart::Encoder(e) => e.forward_flops(batch, steps),
        }
    }

    /// The shape of the layer's input over `steps` steps of `batch` sequences: `[T, B,
    /// F]`, or token ids `[T, B]` into a recurrent stack's first layer.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        let features = match self {
            BodyPart::Recurrent(r) => return r.cells.input_shape(batch, steps),
            BodyPart::Conv1d(c) => c.input,
            BodyPart::Positions(p) => p.features,
            BodyPart::Encoder(e) => e.features,
        };
        Shape::from([steps, batch, features])
    }

    /// The recurrent stack, if this layer is one.
    pub fn recurrent(&self) -> Option<&RecurrentLayer> {
        match self {
            BodyPart::Recurrent(r) => Some(r),
            BodyPart::Conv1d(_) | BodyPart::Positions(_) | BodyPart::Encoder(_) => None,
        }
    }

    /// Whether the layer's input is added to its output (the layer asked for a
    /// residual connection; its width is unchanged).
    pub fn residual(&self) -> bool {
        match self {
            BodyPart::Recurrent(_) | BodyPart::Positions(_) | BodyPart::Encoder(_) => false,
            BodyPart::Conv1d(c) => c.spec.residual,
        }
    }
}
