//! What the LSTM and GRU stacks share, written once: one layer's weights in PyTorch's
//! order ([`CellWeights`]), their table, the forward FLOP count and the carried state's
//! shape. A cell gives its module name (`lstm`, `gru`), its gate count and its first
//! layer's input; [`Lstm`](super::Lstm) and [`Gru`](super::Gru) add only their ops and
//! their state.

use tensorfit_core::Shape;

use super::{Init, ParamSpec, Tensors};

/// One layer's weights, in PyTorch's order (each `[GATES·H, ·]` of gate blocks in the
/// cell's order). Also a layer's weight gradients where each bias gets its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellWeights<T> {
    /// `[GATES·H, input]` (`input` = H above the first layer).
    pub w_ih: T,
    /// `[GATES·H, H]`.
    pub w_hh: T,
    pub b_ih: T,
    pub b_hh: T,
}

impl<T> CellWeights<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> CellWeights<U> {
        CellWeights {
            w_ih: f(&self.w_ih),
            w_hh: f(&self.w_hh),
            b_ih: f(&self.b_ih),
            b_hh: f(&self.b_hh),
        }
    }
}

impl<T> Tensors<T> for CellWeights<T> {
    fn items(&self) -> Vec<&T> {
        vec![&self.w_ih, &self.w_hh, &self.b_ih, &self.b_hh]
    }
}

/// What the first layer of a recurrent stack reads at each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CellInput {
    /// `input` f32 features.
    #[default]
    Features,
    /// One token id in `0..input`, the exact one-hot input never materialised (the
    /// layer's ops gather the columns of `weight_ih_l0`).
    Tokens,
}

/// A stack of `layers` layers of one cell with `gates` gate blocks per unit, registered
/// under `module`, over `input` features (or a vocabulary, by `input_kind`) per step;
/// `bidirectional`: each layer in both directions, its output both side by side.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellStack {
    pub module: &'static str,
    pub gates: usize,
    pub input: usize,
    pub input_kind: CellInput,
    pub hidden: usize,
    pub layers: usize,
    pub bidirectional: bool,
}

impl CellStack {
    /// 1, or 2 for a bidirectional stack.
    pub fn directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    /// The layers whose state is carried between chunks of a sequence: all, or none
    /// for a bidirectional stack (its reverse direction starts at each sequence's end).
    pub fn carried_layers(&self) -> std::ops::Range<usize> {
        match self.bidirectional {
            true => 0..0,
            false => 0..self.layers,
        }
    }

    /// Features per step out of each layer: both directions' side by side.
    pub fn output_features(&self) -> usize {
        self.directions() * self.hidden
    }

    /// Features into layer `k`: the stack's input, or the output of the layer below.
    fn layer_input(&self, k: usize) -> usize {
        match k {
            0 => self.input,
            _ => self.output_features(),
        }
    }

    /// The weight table: per layer and direction (PyTorch's order: `l0`, `l0_reverse`,
    /// `l1`, ...), PyTorch's names (`{module}.weight_ih_l{k}`, `..._l{k}_reverse`) and
    /// shapes, uniform in ±1/√H.
    pub fn specs(&self) -> Vec<CellWeights<ParamSpec>> {
        let (h, rows) = (self.hidden, self.gates * self.hidden);
        let init = Init::fan(h);
        let directions = self.directions();
        (0..self.layers * directions)
            .map(|i| {
                let (k, reverse) = (i / directions, i % directions == 1);
                let input = self.layer_input(k);
                let suffix = if reverse { "_reverse" } else { "" };
                let spec = |what: &str, shape: Shape| {
                    let name = format!("{}.{what}_l{k}{suffix}", self.module);
                    ParamSpec::trainable(name, shape, init)
                };
                CellWeights {
                    w_ih: spec("weight_ih", Shape::from([rows, input])),
                    w_hh: spec("weight_hh", Shape::from([rows, h])),
                    b_ih: spec("bias_ih", Shape::from([rows])),
                    b_hh: spec("bias_hh", Shape::from([rows])),
                }
            })
            .collect()
    }

    /// The shape of the input over `steps` steps of `batch` sequences (time-major):
    /// `[T, B, input]` features, or `[T, B]` token ids.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        match self.input_kind {
            CellInput::Features => Shape::from([steps, batch, self.input]),
            CellInput::Tokens => Shape::from([steps, batch]),
        }
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences: Σ over layers and
    /// directions 2·GATES·H·(I+H)·B·T (the convention the benchmarks report against); on
    /// token input the first layer's input projection is a gather, with no multiply-adds
    /// (I = 0).
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        let h = self.hidden as f64;
        (0..self.layers)
            .map(|k| {
                let i = match (k, self.input_kind) {
                    (0, CellInput::Tokens) => 0,
                    _ => self.layer_input(k),
                };
                2.0 * self.gates as f64 * h * (i as f64 + h)
            })
            .sum::<f64>()
            * self.directions() as f64
            * batch as f64
            * steps as f64
    }

    /// The shape of one carried state tensor at batch size `batch`, `[B, H]`.
    pub fn state_shape(&self, batch: usize) -> Shape {
        Shape::from([batch, self.hidden])
    }
}
