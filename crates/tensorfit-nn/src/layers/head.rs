//! The layers of a head, in the order a description lists them: each a [`BatchNorm`] or a
//! [`Dense`], registered under its own name.

use tensorfit_core::{Graph, Result, TensorId};

use super::{BatchNorm, BatchNormTensors, BatchStats, Dense, LinearTensors, ParamSpec, Tensors};
use crate::model::Mode;

/// One head layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadPart {
    BatchNorm(BatchNorm),
    Dense(Dense),
}

/// One head layer's tensors, by its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadPartTensors<T> {
    BatchNorm(BatchNormTensors<T>),
    Dense(LinearTensors<T>),
}

impl<T> HeadPartTensors<T> {
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> HeadPartTensors<U> {
        match self {
            HeadPartTensors::BatchNorm(t) => HeadPartTensors::BatchNorm(t.map(f)),
            HeadPartTensors::Dense(t) => HeadPartTensors::Dense(t.map(f)),
        }
    }
}

impl<T> Tensors<T> for HeadPartTensors<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            HeadPartTensors::BatchNorm(t) => t.items(),
            HeadPartTensors::Dense(t) => t.items(),
        }
    }
}

impl HeadPart {
    pub fn specs(&self) -> HeadPartTensors<ParamSpec> {
        match self {
            HeadPart::BatchNorm(b) => HeadPartTensors::BatchNorm(b.specs()),
            HeadPart::Dense(d) => HeadPartTensors::Dense(d.specs()),
        }
    }

    /// Features out of the layer, given `input` features in.
    pub fn output(&self, input: usize) -> usize {
        match self {
            HeadPart::BatchNorm(_) => input,
            HeadPart::Dense(d) => d.output,
        }
    }

    /// `x` `[rows, features]` through the layer; a BatchNorm in training records its
    /// batch statistics in `stats`.
    pub fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        t: &HeadPartTensors<TensorId>,
        mode: Mode,
        stats: &mut Vec<BatchStats>,
    ) -> Result<TensorId> {
        match (self, t) {
            (HeadPart::BatchNorm(b), HeadPartTensors::BatchNorm(t)) => {
                b.forward(g, x, t, mode, stats)
            }
            (HeadPart::Dense(d), HeadPartTensors::Dense(t)) => d.forward(g, x, t),
            (part, _) => Err(tensorfit_core::Error::Graph(format!(
                "head layer {part:?} was given another kind's tensors"
            ))),
        }
    }
}
