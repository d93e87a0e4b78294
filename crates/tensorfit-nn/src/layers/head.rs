//! The layers of a head, in the order a description lists them: each a [`BatchNorm`], a
//! [`LayerNorm`], a [`Dense`] (registered under its own name) or a [`Dropout`] (no
//! tensors). [`HeadPart`]
//! is where a kind of head layer is registered: [`HeadPart::layer`] is its one match.

use tensorfit_core::args::BinaryInputs;
use tensorfit_core::{BinaryOp, Graph, Op, Result, TensorId};

use super::layer::{Context, Layer};
use super::{
    BatchNorm, BatchNormTensors, Dense, Dropout, LayerNorm, LinearTensors, ParamSpec, Tensors,
};

/// One head layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadPart {
    BatchNorm(BatchNorm),
    LayerNorm(LayerNorm),
    Dense(Dense),
    Dropout(Dropout),
}

/// One head layer's tensors, by its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadPartTensors<T> {
    BatchNorm(BatchNormTensors<T>),
    /// Its weight and bias `[F]`.
    LayerNorm(LinearTensors<T>),
    Dense(LinearTensors<T>),
    /// A dropout has none.
    Dropout,
}

impl<T> HeadPartTensors<T> {
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> HeadPartTensors<U> {
        match self {
            HeadPartTensors::BatchNorm(t) => HeadPartTensors::BatchNorm(t.map(f)),
            HeadPartTensors::LayerNorm(t) => HeadPartTensors::LayerNorm(t.map(f)),
            HeadPartTensors::Dense(t) => HeadPartTensors::Dense(t.map(f)),
            HeadPartTensors::Dropout => HeadPartTensors::Dropout,
        }
    }
}

impl<T> Tensors<T> for HeadPartTensors<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            HeadPartTensors::BatchNorm(t) => t.items(),
            HeadPartTensors::LayerNorm(t) => t.items(),
            HeadPartTensors::Dense(t) => t.items(),
            HeadPartTensors::Dropout => Vec::new(),
        }
    }
}

impl HeadPart {
    /// The layer, as the rest of the engine asks it.
    pub fn layer(&self) -> &dyn Layer {
        match self {
            HeadPart::BatchNorm(b) => b,
            HeadPart::LayerNorm(n) => n,
            HeadPart::Dense(d) => d,
            HeadPart::Dropout(d) => d,
        }
    }

    pub fn specs(&self) -> HeadPartTensors<ParamSpec> {
        match self {
            HeadPart::BatchNorm(b) => HeadPartTensors::BatchNorm(b.specs()),
            HeadPart::LayerNorm(n) => HeadPartTensors::LayerNorm(n.specs()),
            HeadPart::Dense(d) => HeadPartTensors::Dense(d.specs()),
            HeadPart::Dropout(_) => HeadPartTensors::Dropout,
        }
    }
}

/// A head layer as the network places it: the layer, and whether its input is added to
/// its output (the layer asked for a residual connection; its width is unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadEntry {
    pub part: HeadPart,
    pub residual: bool,
}

impl HeadEntry {
    /// `x` `[rows, features]` through the layer (see [`Layer::forward`]), plus `x` when
    /// it asks for a residual connection.
    pub fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        t: &HeadPartTensors<TensorId>,
        cx: &mut Context,
    ) -> Result<TensorId> {
        let y = self.part.layer().forward(g, x, &t.to_vec(), cx)?;
        match self.residual {
            false => Ok(y),
            true => residual_add(g, self.part.layer().name(), (x, y)),
        }
    }
}

/// `x + y`, a layer `name`'s input added to its output (a residual connection).
pub fn residual_add(g: &mut Graph, name: &str, (x, y): (TensorId, TensorId)) -> Result<TensorId> {
    let add = Op::Binary(BinaryOp::Add);
    Ok(g.apply(
        &format!("{name}.residual"),
        add,
        BinaryInputs { a: x, b: y },
    )?
    .out)
}
