//! The layers of a head, in the order a description lists them: each a [`BatchNorm`], a
//! [`Dense`] (registered under its own name) or a dropout (no tensors).

use tensorfit_core::{Graph, Result, TensorId};

use super::dropout::{dropout, head_site, DropoutRate};
use super::{BatchNorm, BatchNormTensors, BatchStats, Dense, LinearTensors, ParamSpec, Tensors};
use crate::model::Mode;

/// One head layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadPart {
    BatchNorm(BatchNorm),
    Dense(Dense),
    /// `nn.Dropout(p)`, head layer `index` (its mask's site).
    Dropout {
        p: DropoutRate,
        index: usize,
    },
}

/// One head layer's tensors, by its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadPartTensors<T> {
    BatchNorm(BatchNormTensors<T>),
    Dense(LinearTensors<T>),
    /// A dropout has none.
    Dropout,
}

impl<T> HeadPartTensors<T> {
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> HeadPartTensors<U> {
        match self {
            HeadPartTensors::BatchNorm(t) => HeadPartTensors::BatchNorm(t.map(f)),
            HeadPartTensors::Dense(t) => HeadPartTensors::Dense(t.map(f)),
            HeadPartTensors::Dropout => HeadPartTensors::Dropout,
        }
    }
}

impl<T> Tensors<T> for HeadPartTensors<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            HeadPartTensors::BatchNorm(t) => t.items(),
            HeadPartTensors::Dense(t) => t.items(),
            HeadPartTensors::Dropout => Vec::new(),
        }
    }
}

impl HeadPart {
    pub fn specs(&self) -> HeadPartTensors<ParamSpec> {
        match self {
            HeadPart::BatchNorm(b) => HeadPartTensors::BatchNorm(b.specs()),
            HeadPart::Dense(d) => HeadPartTensors::Dense(d.specs()),
            HeadPart::Dropout { .. } => HeadPartTensors::Dropout,
        }
    }

    /// Features out of the layer, given `input` features in.
    pub fn output(&self, input: usize) -> usize {
        match self {
            HeadPart::BatchNorm(_) | HeadPart::Dropout { .. } => input,
            HeadPart::Dense(d) => d.output,
        }
    }

    /// `x` `[rows, features]` through the layer; a BatchNorm in training records its
    /// batch statistics in `stats`; a dropout drops with the training graph's
    /// `dropout_key` (none in inference).
    pub fn forward(
        &self,
        g: &mut Graph,
        (x, dropout_key): (TensorId, Option<TensorId>),
        t: &HeadPartTensors<TensorId>,
        mode: Mode,
        stats: &mut Vec<BatchStats>,
    ) -> Result<TensorId> {
        match (self, t) {
            (HeadPart::BatchNorm(b), HeadPartTensors::BatchNorm(t)) => {
                b.forward(g, x, t, mode, stats)
            }
            (HeadPart::Dense(d), HeadPartTensors::Dense(t)) => d.forward(g, x, t),
            (&HeadPart::Dropout { p, index }, HeadPartTensors::Dropout) => {
                let name = format!("head.dropout{index}");
                dropout(g, &name, x, (p, dropout_key), head_site(index), 0)
            }
            (part, _) => Err(tensorfit_core::Error::Graph(format!(
                "head layer {part:?} was given another kind's tensors"
            ))),
        }
    }
}
