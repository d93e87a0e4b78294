//! A stack of LSTM layers, PyTorch's `nn.LSTM(input, hidden, num_layers)` registered as
//! `lstm`: its weights (`lstm.weight_ih_l{k}`, ...), the (h, c) it carries between
//! chunks of a sequence (`state.h_l{k}`, `state.c_l{k}`), and its forward and backward
//! nodes. Every one of those names is made here and nowhere else.
//!
//! The first layer reads features (`[T, B, input]`) or, with [`CellInput::Tokens`], token
//! ids (`[T, B]`) as the exact one-hot input of width `input` (the vocabulary), which the
//! LSTM op computes as a gather of `weight_ih_l0`'s columns without materialising it.

use tensorfit_core::args::{
    LstmBackwardInputs, LstmBackwardOutputs, LstmForwardInputs, LstmForwardOutputs,
};
use tensorfit_core::{Error, Graph, Op, Result, Shape, TensorId};

use super::cell::{CellInput, CellStack, CellWeights};
use super::ParamSpec;

/// `layers` stacked LSTM layers of `hidden` units over `input` features per step (or a
/// vocabulary of `input` tokens, by `input_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lstm {
    pub input: usize,
    pub hidden: usize,
    pub layers: usize,
    pub input_kind: CellInput,
    /// PyTorch's `bidirectional=`: each layer also runs each sequence backwards (its
    /// `_reverse` tensors) and gives both directions' outputs side by side. It carries no
    /// state between chunks: every batch starts both directions from zeros.
    pub bidirectional: bool,
}

/// One layer's weights, in PyTorch's order (gates i, f, g, o in each).
pub type LstmWeights<T> = CellWeights<T>;

/// One layer's weight gradients as the backward op gives them: both bias vectors share
/// one gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmGrads<T> {
    pub w_ih: T,
    pub w_hh: T,
    pub bias: T,
}

impl<T: Copy> LstmGrads<T> {
    /// The gradient of each weight.
    pub fn per_weight(&self) -> LstmWeights<T> {
        LstmWeights {
            w_ih: self.w_ih,
            w_hh: self.w_hh,
            b_ih: self.bias,
            b_hh: self.bias,
        }
    }
}

/// The two halves of an LSTM layer's carried state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StatePart {
    H,
    C,
}

/// One carried state tensor: a layer's h or c, `[B, H]`. Its shape depends on the batch,
/// so unlike a parameter one copy is kept per batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateSlot {
    pub layer: usize,
    pub part: StatePart,
}

impl StateSlot {
    /// The tensor's name in a graph: `state.h_l{k}` or `state.c_l{k}`.
    pub fn name(&self) -> String {
        let part = match self.part {
            StatePart::H => "h",
            StatePart::C => "c",
        };
        format!("state.{part}_l{}", self.layer)
    }
}

impl Lstm {
    /// The stack as the cells' shared code sees it: registered as `lstm` (`self.lstm`),
    /// four gate blocks per unit.
    fn cells(&self) -> CellStack {
        CellStack {
            module: "lstm",
            gates: 4,
            input: self.input,
            input_kind: self.input_kind,
            hidden: self.hidden,
            layers: self.layers,
            bidirectional: self.bidirectional,
        }
    }

    /// The weight table: per layer, PyTorch's names and shapes, uniform in ±1/√H.
    pub fn specs(&self) -> Vec<LstmWeights<ParamSpec>> {
        self.cells().specs()
    }

    /// Every carried state tensor, layer by layer, h before c (none when bidirectional).
    pub fn state_slots(&self) -> Vec<StateSlot> {
        self.cells()
            .carried_layers()
            .flat_map(|layer| [StatePart::H, StatePart::C].map(|part| StateSlot { layer, part }))
            .collect()
    }

    /// Features per step out of each layer: both directions' when bidirectional.
    pub fn output_features(&self) -> usize {
        self.cells().output_features()
    }

    /// The shape of the input over `steps` steps of `batch` sequences (time-major):
    /// `[T, B, input]` features, or `[T, B]` token ids.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        self.cells().input_shape(batch, steps)
    }

    /// The shape of one carried state tensor at batch size `batch`.
    pub fn state_shape(&self, batch: usize) -> Shape {
        self.cells().state_shape(batch)
    }

    /// Layer `k`'s initial (h, c) as persistent leaves of `g`.
    pub fn state_leaves(&self, g: &mut Graph, k: usize, batch: usize) -> (TensorId, TensorId) {
        let [h, c] = [StatePart::H, StatePart::C].map(|part| {
            g.state(
                &StateSlot { layer: k, part }.name(),
                self.state_shape(batch),
            )
        });
        (h, c)
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences: Σ over layers
    /// 2·4·H·(I+H)·B·T (the convention the benchmarks report against); on token input
    /// the first layer's input projection is a gather, with no multiply-adds (I = 0).
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        self.cells().forward_flops(batch, steps)
    }

    /// One layer over `x` from (`h0`, `c0`). With `keep` it keeps what backward needs.
    pub fn layer(
        g: &mut Graph,
        name: &str,
        x: TensorId,
        state: (TensorId, TensorId),
        w: &LstmWeights<TensorId>,
        keep: bool,
    ) -> Result<LstmForwardOutputs<TensorId>> {
        Lstm::layer_at_lengths(g, name, (x, None), state, w, keep)
    }

    /// [`Lstm::layer`] over a padded batch: each sequence of `x` stops at its length in
    /// `lengths` `[B]`, if given.
    pub fn layer_at_lengths(
        g: &mut Graph,
        name: &str,
        (x, lengths): (TensorId, Option<TensorId>),
        (h0, c0): (TensorId, TensorId),
        w: &LstmWeights<TensorId>,
        keep: bool,
    ) -> Result<LstmForwardOutputs<TensorId>> {
        let inputs = LstmForwardInputs {
            x,
            h0,
            c0,
            w_ih: w.w_ih,
            w_hh: w.w_hh,
            b_ih: w.b_ih,
            b_hh: w.b_hh,
            lengths,
        };
        let op = Op::LstmForward {
            keep_for_backward: keep,
        };
        g.apply(name, op, inputs)
    }

    /// The backward of one layer's forward `fwd` (which kept its cells) over `x` from
    /// (`h0`, `c0`), each sequence stopping at its length in `lengths` as in the forward,
    /// given the gradients of its outputs; `input_grad`: also the gradient of `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_backward(
        g: &mut Graph,
        name: &str,
        (x, lengths): (TensorId, Option<TensorId>),
        (h0, c0): (TensorId, TensorId),
        w: &LstmWeights<TensorId>,
        fwd: &LstmForwardOutputs<TensorId>,
        (dy, dh_n, dc_n): (TensorId, TensorId, TensorId),
        input_grad: bool,
    ) -> Result<(LstmBackwardOutputs<TensorId>, LstmGrads<TensorId>)> {
        let cells = fwd
            .cells
            .ok_or_else(|| Error::Graph(format!("{name}: the forward kept no cells")))?;
        let inputs = LstmBackwardInputs {
            x,
            h0,
            c0,
            w_ih: w.w_ih,
            w_hh: w.w_hh,
            y: fwd.y,
            gates: fwd.gates,
            cells,
            dy,
            dh_n,
            dc_n,
            lengths,
        };
        let outs = g.apply(name, Op::LstmBackward { input_grad }, inputs)?;
        let grads = LstmGrads {
            w_ih: outs.dw_ih,
            w_hh: outs.dw_hh,
            bias: outs.db,
        };
        Ok((outs, grads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::Recurrent;

    #[test]
    fn a_stack_on_token_ids_reads_t_by_b_ids_and_gives_the_same_shapes() {
        let dense = Lstm {
            input: 152,
            hidden: 8,
            layers: 2,
            input_kind: CellInput::Features,
            bidirectional: false,
        };
        let tokens = Lstm {
            input_kind: CellInput::Tokens,
            ..dense
        };
        assert_eq!(tokens.input_shape(4, 9), Shape::from([9, 4]));
        assert_eq!(tokens.specs(), dense.specs(), "same weights, same names");
        let mut g = Graph::new();
        let rec = Recurrent::Lstm(tokens);
        let w = rec.specs().map(|p| p.leaf(&mut g));
        let stack = rec.stack(&mut g, &w, (4, 9), (true, false)).unwrap();
        assert_eq!(g.shape(stack.x), &Shape::from([9, 4]));
        assert_eq!(g.shape(stack.y), &Shape::from([9, 4, 8]));
        let gemm_free = dense.forward_flops(4, 9) - tokens.forward_flops(4, 9);
        assert_eq!(gemm_free, 2.0 * 4.0 * 8.0 * 152.0 * 4.0 * 9.0);
    }
}
