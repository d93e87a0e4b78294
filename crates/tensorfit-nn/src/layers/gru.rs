//! A stack of GRU layers, PyTorch's `nn.GRU(input, hidden, num_layers)` registered as
//! `gru`: its weights (`gru.weight_ih_l{k}`, ...), the h it carries between chunks of a
//! sequence (`state.h_l{k}`, the LSTM's slot names, h only), and its forward and backward
//! nodes. A sibling of [`Lstm`](super::Lstm) with the same methods, so that the network
//! calls either through one match.

use tensorfit_core::args::{
    GruBackwardInputs, GruBackwardOutputs, GruForwardInputs, GruForwardOutputs,
};
use tensorfit_core::{Graph, Op, Result, Shape, TensorId};

use super::cell::{CellInput, CellStack, CellWeights};
use super::{ParamSpec, StatePart, StateSlot};

/// `layers` stacked GRU layers of `hidden` units over `input` features per step (or a
/// vocabulary of `input` tokens, by `input_kind`, as the LSTM's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gru {
    pub input: usize,
    pub hidden: usize,
    pub layers: usize,
    pub input_kind: CellInput,
    /// PyTorch's `bidirectional=`: each layer also runs each sequence backwards (its
    /// `_reverse` tensors) and gives both directions' outputs side by side. It carries no
    /// state between chunks: every batch starts both directions from zeros.
    pub bidirectional: bool,
}

/// One layer's weights, in PyTorch's order (gates r, z, n in each). Also one layer's
/// weight gradients: unlike the LSTM's, the two biases get different ones (`b_hn` sits
/// inside the reset product).
pub type GruWeights<T> = CellWeights<T>;

impl Gru {
    /// The stack as the cells' shared code sees it: registered as `gru` (`self.gru`),
    /// three gate blocks per unit.
    fn cells(&self) -> CellStack {
        CellStack {
            module: "gru",
            gates: 3,
            input: self.input,
            input_kind: self.input_kind,
            hidden: self.hidden,
            layers: self.layers,
            bidirectional: self.bidirectional,
        }
    }

    /// The weight table: per layer, PyTorch's names and shapes, uniform in ±1/√H.
    pub fn specs(&self) -> Vec<GruWeights<ParamSpec>> {
        self.cells().specs()
    }

    /// Every carried state tensor, layer by layer: each layer's h (none when
    /// bidirectional).
    pub fn state_slots(&self) -> Vec<StateSlot> {
        self.cells()
            .carried_layers()
            .map(|layer| StateSlot {
                layer,
                part: StatePart::H,
            })
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

    /// Layer `k`'s initial h as a persistent leaf of `g`.
    pub fn state_leaves(&self, g: &mut Graph, k: usize, batch: usize) -> TensorId {
        let slot = StateSlot {
            layer: k,
            part: StatePart::H,
        };
        g.state(&slot.name(), self.state_shape(batch))
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences: Σ over layers
    /// 2·3·H·(I+H)·B·T (the LSTM's convention, with three gates; I = 0 on token input).
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        self.cells().forward_flops(batch, steps)
    }

    /// One layer over `x` from `h0`, each sequence stopping at its length in `lengths`
    /// `[B]` if given. With `keep` it keeps what backward needs.
    pub fn layer(
        g: &mut Graph,
        name: &str,
        (x, lengths): (TensorId, Option<TensorId>),
        h0: TensorId,
        w: &GruWeights<TensorId>,
        keep: bool,
    ) -> Result<GruForwardOutputs<TensorId>> {
        let inputs = GruForwardInputs {
            x,
            h0,
            w_ih: w.w_ih,
            w_hh: w.w_hh,
            b_ih: w.b_ih,
            b_hh: w.b_hh,
            lengths,
        };
        let op = Op::GruForward {
            keep_for_backward: keep,
        };
        g.apply(name, op, inputs)
    }

    /// The backward of one layer's forward `fwd` (built with `keep`) over `x` from `h0`,
    /// each sequence stopping at its length in `lengths` as in the forward, given the
    /// gradients of its outputs; `input_grad`: also the gradient of `x`. Returns the op's
    /// outputs and the gradient of each weight.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_backward(
        g: &mut Graph,
        name: &str,
        (x, lengths): (TensorId, Option<TensorId>),
        h0: TensorId,
        w: &GruWeights<TensorId>,
        fwd: &GruForwardOutputs<TensorId>,
        (dy, dh_n): (TensorId, TensorId),
        input_grad: bool,
    ) -> Result<(GruBackwardOutputs<TensorId>, GruWeights<TensorId>)> {
        let inputs = GruBackwardInputs {
            x,
            h0,
            w_ih: w.w_ih,
            w_hh: w.w_hh,
            y: fwd.y,
            gates: fwd.gates,
            hidden: fwd.hidden,
            dy,
            dh_n,
            lengths,
        };
        let outs = g.apply(name, Op::GruBackward { input_grad }, inputs)?;
        let grads = GruWeights {
            w_ih: outs.dw_ih,
            w_hh: outs.dw_hh,
            b_ih: outs.db_ih,
            b_hh: outs.db_hh,
        };
        Ok((outs, grads))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Recurrent, Tensors};

    const GRU: Gru = Gru {
        input: 7,
        hidden: 5,
        layers: 2,
        input_kind: CellInput::Features,
        bidirectional: false,
    };

    #[test]
    fn the_weights_have_pytorch_names_and_shapes() {
        let specs = GRU.specs();
        let table: Vec<(String, Shape)> = specs
            .iter()
            .flat_map(|w| {
                w.items()
                    .into_iter()
                    .map(|s| (s.name.clone(), s.shape.clone()))
            })
            .collect();
        let want = [
            ("gru.weight_ih_l0", vec![15, 7]),
            ("gru.weight_hh_l0", vec![15, 5]),
            ("gru.bias_ih_l0", vec![15]),
            ("gru.bias_hh_l0", vec![15]),
            ("gru.weight_ih_l1", vec![15, 5]),
            ("gru.weight_hh_l1", vec![15, 5]),
            ("gru.bias_ih_l1", vec![15]),
            ("gru.bias_hh_l1", vec![15]),
        ];
        let want: Vec<(String, Shape)> = want
            .into_iter()
            .map(|(n, s)| (n.to_string(), Shape::new(&s)))
            .collect();
        assert_eq!(table, want);
    }

    #[test]
    fn each_layer_carries_only_its_h() {
        let names: Vec<String> = GRU.state_slots().iter().map(StateSlot::name).collect();
        assert_eq!(names, ["state.h_l0", "state.h_l1"]);
    }

    #[test]
    fn the_stack_feeds_each_layer_the_one_below_and_names_its_nodes() {
        let mut g = Graph::new();
        let gru = Recurrent::Gru(GRU);
        let weights = gru.specs().map(|s| g.input(&s.name, s.shape.clone()));
        let stack = gru.stack(&mut g, &weights, (3, 4), (true, false)).unwrap();
        assert_eq!(g.shape(stack.x), &Shape::new(&[4, 3, 7]));
        assert_eq!(g.shape(stack.y), &Shape::new(&[4, 3, 5]));
        let (h0, h_n) = (stack.initial(StatePart::H), stack.last(StatePart::H));
        assert_eq!((h0.len(), h_n.len()), (2, 2));
        assert!(h_n.iter().all(|&h| g.shape(h) == &Shape::new(&[3, 5])));
        let layer = |k: usize| g.tensor(h_n[k]).name.clone();
        assert!(layer(0).starts_with("gru_l0") && layer(1).starts_with("gru_l1"));
    }

    #[test]
    fn forward_flops_count_three_gates_per_layer() {
        // Layer 0: 2·3·5·(7+5) = 360, layer 1: 2·3·5·(5+5) = 300, per row and step.
        assert_eq!(GRU.forward_flops(3, 4), 660.0 * 12.0);
    }
}
