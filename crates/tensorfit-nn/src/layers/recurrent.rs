//! The recurrent stack of a network, LSTM or GRU layers ([`Recurrent`]), so that the graph
//! builders, the trainer and the planner reach either cell through one type: its weight
//! table, its carried state slots (the LSTM's h and c, the GRU's h), its FLOPs and its
//! forward over a sequence, and one layer's forward and backward for the builders that
//! place them by hand (recomputation). The cells themselves are in [`super::lstm`] and
//! [`super::gru`].

use tensorfit_core::args::{GruForwardOutputs, LstmForwardOutputs};
use tensorfit_core::{Error, Graph, Result, Shape, TensorId};

use super::cell::CellWeights;
use super::layer::{Context, Layer, LayerTraits};
use super::{
    Between, DropoutRate, Gru, GruWeights, Lstm, LstmWeights, ParamSpec, StatePart, StateSlot,
    Tensors,
};
use crate::model::Mode;

/// The layers of the recurrent stack, by cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recurrent {
    Lstm(Lstm),
    Gru(Gru),
}

/// One item per tensor of the stack, layer by layer, by cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecurrentWeights<T> {
    Lstm(Vec<LstmWeights<T>>),
    Gru(Vec<GruWeights<T>>),
}

impl<T> RecurrentWeights<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> RecurrentWeights<U> {
        match self {
            RecurrentWeights::Lstm(w) => {
                RecurrentWeights::Lstm(w.iter().map(|l| l.map(&mut f)).collect())
            }
            RecurrentWeights::Gru(w) => {
                RecurrentWeights::Gru(w.iter().map(|l| l.map(&mut f)).collect())
            }
        }
    }
}

impl<T> Tensors<T> for RecurrentWeights<T> {
    fn items(&self) -> Vec<&T> {
        match self {
            RecurrentWeights::Lstm(w) => w.iter().flat_map(|l| l.items()).collect(),
            RecurrentWeights::Gru(w) => w.iter().flat_map(|l| l.items()).collect(),
        }
    }
}

/// The stack over a sequence: its carried state leaves, their final values, the top
/// layer's output.
#[derive(Debug, Clone)]
pub struct RecurrentStack {
    /// The sequence the host writes (`[T, B, F]` features or `[T, B]` token ids).
    pub x: TensorId,
    /// Each carried state leaf with its slot, in [`Recurrent::state_slots`] order.
    pub carried: Vec<(TensorId, StateSlot)>,
    /// The final value of each carried state, in the same order.
    pub finals: Vec<TensorId>,
    /// Output sequence of the top layer, `[T, B, H]` (`[T, B, 2H]` bidirectional).
    pub y: TensorId,
    /// A bidirectional stack's summary of each sequence, `[B, 2H]`: the top layer's
    /// forward direction at the sequence's end beside its reverse direction at the
    /// sequence's start, each direction's own last step (what a head on the last step
    /// reads; `None` for one direction, whose last step is its output's).
    pub ends: Option<TensorId>,
    /// Each sequence's length `[B]` for a padded batch, written by the host (see
    /// `tensorfit_core::seq_lengths`); every layer stops at it.
    pub lengths: Option<TensorId>,
}

impl RecurrentStack {
    /// The initial leaves of one part of the carried state (`h` or `c`), layer by layer.
    pub fn initial(&self, part: StatePart) -> Vec<TensorId> {
        self.of_part(part).map(|(leaf, _)| leaf).collect()
    }

    /// The final values of one part of the carried state, layer by layer.
    pub fn last(&self, part: StatePart) -> Vec<TensorId> {
        self.of_part(part).map(|(_, last)| last).collect()
    }

    fn of_part(&self, part: StatePart) -> impl Iterator<Item = (TensorId, TensorId)> + '_ {
        self.carried
            .iter()
            .zip(&self.finals)
            .filter(move |((_, slot), _)| slot.part == part)
            .map(|((leaf, _), last)| (*leaf, *last))
    }
}

/// One layer's forward outputs, as its backward needs them.
#[derive(Debug, Clone, Copy)]
pub enum LayerForward {
    Lstm(LstmForwardOutputs<TensorId>),
    Gru(GruForwardOutputs<TensorId>),
}

impl LayerForward {
    /// The layer's output sequence `[T, B, H]`.
    pub fn y(&self) -> TensorId {
        match self {
            LayerForward::Lstm(o) => o.y,
            LayerForward::Gru(o) => o.y,
        }
    }

    /// The layer's final state in slot order: (h, c) or h.
    pub fn finals(&self) -> Vec<TensorId> {
        match self {
            LayerForward::Lstm(o) => vec![o.h_n, o.c_n],
            LayerForward::Gru(o) => vec![o.h_n],
        }
    }
}

/// What one layer's backward gives.
#[derive(Debug, Clone)]
pub struct LayerGrads {
    /// The gradient of the layer's input, when asked for.
    pub dx: Option<TensorId>,
    /// The gradient of its initial state, in slot order.
    pub dstate: Vec<TensorId>,
    /// The gradient of each weight in table order (the LSTM's two biases share one).
    pub weights: Vec<TensorId>,
}

fn other_cell() -> Error {
    Error::Graph("the recurrent weights or state are of another cell than the stack".into())
}

impl Recurrent {
    /// The node name of layer `k` (`lstm_l0`, `gru_l2`).
    pub fn layer_name(&self, k: usize) -> String {
        format!("{}_l{k}", self.module())
    }

    /// The module its tensors are registered under, PyTorch's: `lstm` or `gru`.
    pub fn module(&self) -> &'static str {
        match self {
            Recurrent::Lstm(_) => "lstm",
            Recurrent::Gru(_) => "gru",
        }
    }

    /// Layer `k`'s initial state as persistent leaves of `g`, in slot order.
    pub fn state_leaves(&self, g: &mut Graph, k: usize, batch: usize) -> Vec<TensorId> {
        match self {
            Recurrent::Lstm(l) => {
                let (h, c) = l.state_leaves(g, k, batch);
                vec![h, c]
            }
            Recurrent::Gru(l) => vec![l.state_leaves(g, k, batch)],
        }
    }

    /// Layer `k` over `x` from `state` (slot order), each sequence stopping at its length
    /// in `lengths` `[B]` if given; with `keep` it keeps what backward needs.
    #[allow(clippy::too_many_arguments)]
    pub fn layer(
        &self,
        g: &mut Graph,
        name: &str,
        k: usize,
        (x, lengths): (TensorId, Option<TensorId>),
        state: &[TensorId],
        weights: &RecurrentWeights<TensorId>,
        keep: bool,
    ) -> Result<LayerForward> {
        match (weights, state) {
            (RecurrentWeights::Lstm(w), &[h, c]) => {
                let w = w.get(k).ok_or_else(other_cell)?;
                Ok(LayerForward::Lstm(Lstm::layer_at_lengths(
                    g,
                    name,
                    (x, lengths),
                    (h, c),
                    w,
                    keep,
                )?))
            }
            (RecurrentWeights::Gru(w), &[h]) => {
                let w = w.get(k).ok_or_else(other_cell)?;
                Ok(LayerForward::Gru(Gru::layer(
                    g,
                    name,
                    (x, lengths),
                    h,
                    w,
                    keep,
                )?))
            }
            _ => Err(other_cell()),
        }
    }

    /// The backward of layer `k`'s forward `fwd` (built with `keep`) over `x` from
    /// `state` (and the forward's `lengths`), given the gradients of its output `dy` and
    /// of its final state `dfinal` (slot order); `input_grad`: also the gradient of `x`.
    #[allow(clippy::too_many_arguments)]
    pub fn layer_backward(
        &self,
        g: &mut Graph,
        name: &str,
        k: usize,
        (x, lengths, state): (TensorId, Option<TensorId>, &[TensorId]),
        weights: &RecurrentWeights<TensorId>,
        fwd: &LayerForward,
        (dy, dfinal): (TensorId, &[TensorId]),
        input_grad: bool,
    ) -> Result<LayerGrads> {
        match (weights, fwd, state, dfinal) {
            (RecurrentWeights::Lstm(w), LayerForward::Lstm(f), &[h, c], &[dh, dc]) => {
                let w = w.get(k).ok_or_else(other_cell)?;
                let ds = (dy, dh, dc);
                let (d, grads) =
                    Lstm::layer_backward(g, name, (x, lengths), (h, c), w, f, ds, input_grad)?;
                Ok(LayerGrads {
                    dx: d.dx,
                    dstate: vec![d.dh0, d.dc0],
                    weights: grads.per_weight().to_vec(),
                })
            }
            (RecurrentWeights::Gru(w), LayerForward::Gru(f), &[h], &[dh]) => {
                let w = w.get(k).ok_or_else(other_cell)?;
                let (d, grads) =
                    Gru::layer_backward(g, name, (x, lengths), h, w, f, (dy, dh), input_grad)?;
                Ok(LayerGrads {
                    dx: d.dx,
                    dstate: vec![d.dh0],
                    weights: grads.to_vec(),
                })
            }
            _ => Err(other_cell()),
        }
    }

    /// The weight table (PyTorch's names under `lstm.` or `gru.`).
    pub fn specs(&self) -> RecurrentWeights<super::ParamSpec> {
        match self {
            Recurrent::Lstm(l) => RecurrentWeights::Lstm(l.specs()),
            Recurrent::Gru(l) => RecurrentWeights::Gru(l.specs()),
        }
    }

    pub fn layers(&self) -> usize {
        match self {
            Recurrent::Lstm(l) => l.layers,
            Recurrent::Gru(l) => l.layers,
        }
    }

    pub fn bidirectional(&self) -> bool {
        match self {
            Recurrent::Lstm(l) => l.bidirectional,
            Recurrent::Gru(l) => l.bidirectional,
        }
    }

    /// The tensors of its table: four per layer and direction.
    pub fn tensor_count(&self) -> usize {
        let directions = if self.bidirectional() { 2 } else { 1 };
        4 * self.layers() * directions
    }

    /// Features per step out of each layer: `hidden`, or `2 · hidden` bidirectional.
    pub fn output_features(&self) -> usize {
        match self {
            Recurrent::Lstm(l) => l.output_features(),
            Recurrent::Gru(l) => l.output_features(),
        }
    }

    pub fn hidden(&self) -> usize {
        match self {
            Recurrent::Lstm(l) => l.hidden,
            Recurrent::Gru(l) => l.hidden,
        }
    }

    /// Every carried state tensor, layer by layer.
    pub fn state_slots(&self) -> Vec<StateSlot> {
        match self {
            Recurrent::Lstm(l) => l.state_slots(),
            Recurrent::Gru(l) => l.state_slots(),
        }
    }

    /// The state tensors each layer starts from: the LSTM's h and c, the GRU's h.
    pub fn state_slots_per_layer(&self) -> usize {
        match self {
            Recurrent::Lstm(_) => 2,
            Recurrent::Gru(_) => 1,
        }
    }

    /// The shape of one carried state tensor at batch size `batch`.
    pub fn state_shape(&self, batch: usize) -> Shape {
        Shape::from([batch, self.hidden()])
    }

    /// The shape of the first layer's input over `steps` steps of `batch` sequences.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        match self {
            Recurrent::Lstm(l) => l.input_shape(batch, steps),
            Recurrent::Gru(l) => l.input_shape(batch, steps),
        }
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences (each cell's convention).
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        match self {
            Recurrent::Lstm(l) => l.forward_flops(batch, steps),
            Recurrent::Gru(l) => l.forward_flops(batch, steps),
        }
    }

    /// The whole stack over the input it adds (`x`, of [`Recurrent::input_shape`], and
    /// with `padded` the sequences' `lengths` `[B]`), each layer from its carried state:
    /// [`Recurrent::stack_over`] with no dropout between the layers.
    pub fn stack(
        &self,
        g: &mut Graph,
        weights: &RecurrentWeights<TensorId>,
        (batch, steps): (usize, usize),
        (keep, padded): (bool, bool),
    ) -> Result<RecurrentStack> {
        let x = g.input("x", self.input_shape(batch, steps));
        let lengths = padded.then(|| g.input("lengths", [batch]));
        self.stack_over(g, (x, lengths), weights, batch, (keep, Between::NONE))
    }

    /// The whole stack over `x` (of [`Recurrent::input_shape`], or the output of a layer
    /// before it), each layer from its carried state (layer `k`'s node is
    /// [`Recurrent::layer_name`]`(k)`, fed by the one below); with `keep` the layers keep
    /// what backward needs; with `lengths` `[B]` (a padded batch) each sequence stops at
    /// its end; each layer's output but the last passes through `between`'s dropout.
    /// A bidirectional stack carries nothing: `layers::bidirectional::stack_over`.
    pub fn stack_over(
        &self,
        g: &mut Graph,
        (x, lengths): (TensorId, Option<TensorId>),
        weights: &RecurrentWeights<TensorId>,
        batch: usize,
        (keep, between): (bool, Between),
    ) -> Result<RecurrentStack> {
        if self.bidirectional() {
            let (y, ends) = super::bidirectional::stack_over(
                self,
                g,
                (x, lengths),
                weights,
                batch,
                (keep, between),
            )?;
            return Ok(RecurrentStack {
                x,
                carried: Vec::new(),
                finals: Vec::new(),
                y,
                ends: Some(ends),
                lengths,
            });
        }
        let layers = self.layers();
        let (mut leaves, mut finals, mut y) = (Vec::new(), Vec::new(), x);
        for k in 0..layers {
            let state = self.state_leaves(g, k, batch);
            let name = self.layer_name(k);
            let outs = self.layer(g, &name, k, (y, lengths), &state, weights, keep)?;
            leaves.extend(state);
            y = between.after(g, (k, layers), outs.y(), 0)?;
            finals.extend(outs.finals());
        }
        Ok(RecurrentStack {
            x,
            carried: leaves.into_iter().zip(self.state_slots()).collect(),
            finals,
            y,
            ends: None,
            lengths,
        })
    }
}

/// A recurrent stack as a layer of the network: PyTorch's `nn.LSTM`/`nn.GRU` with
/// `num_layers` and `dropout` (on every layer's output but the last, in training).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecurrentLayer {
    pub cells: Recurrent,
    pub dropout: DropoutRate,
}

impl RecurrentWeights<TensorId> {
    /// The stack's leaves from `items` in table order (four per layer and direction), or
    /// `None` when they are not the tensors of `cells`.
    fn from_items(cells: &Recurrent, items: &[TensorId]) -> Option<Self> {
        if items.len() != cells.tensor_count() {
            return None;
        }
        let layers = items.chunks_exact(4).map(|w| CellWeights {
            w_ih: w[0],
            w_hh: w[1],
            b_ih: w[2],
            b_hh: w[3],
        });
        Some(match cells {
            Recurrent::Lstm(_) => RecurrentWeights::Lstm(layers.collect()),
            Recurrent::Gru(_) => RecurrentWeights::Gru(layers.collect()),
        })
    }
}

impl Layer for RecurrentLayer {
    fn kind(&self) -> &'static str {
        self.cells.module()
    }

    fn name(&self) -> &str {
        self.cells.module()
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.cells.specs().to_vec()
    }

    fn output_features(&self, _input: usize) -> usize {
        self.cells.output_features()
    }

    /// A bidirectional stack reads each sequence whole: it carries nothing, so a
    /// sequence cut in time would give other numbers.
    fn traits(&self) -> LayerTraits {
        let whole = self.cells.bidirectional();
        LayerTraits {
            mixes_rows: false,
            mixes_steps: true,
            carries_state: !whole,
            splits_in_time: !whole,
            random: self.dropout.is_active() && self.cells.layers() > 1,
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        self.cells.state_slots()
    }

    /// The whole stack over `x`, each layer from its carried state (recorded in `cx`
    /// with its final value), stopping at each sequence's length.
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let weights = RecurrentWeights::from_items(&self.cells, tensors).ok_or_else(|| {
            super::layer::wrong_tensors(self, self.cells.tensor_count(), tensors.len())
        })?;
        let between = Between {
            p: self.dropout,
            key: cx.dropout_key,
        };
        let keep = cx.keep();
        let stack =
            self.cells
                .stack_over(g, (x, cx.lengths), &weights, cx.batch, (keep, between))?;
        // Each sequence's summary at its end for a last step above: a bidirectional
        // stack's, or in inference over a padded batch the top layer's final h (its own
        // last step, or for a sequence that ended in an earlier chunk the state carried
        // through this one since).
        let top_h = stack
            .carried
            .iter()
            .zip(&stack.finals)
            .rfind(|((_, slot), _)| slot.part == StatePart::H)
            .map(|(_, last)| *last);
        let padded_inference = cx.lengths.is_some() && cx.mode == Mode::Infer;
        cx.ends = stack.ends.or(top_h.filter(|_| padded_inference));
        cx.carried.extend(stack.carried);
        cx.finals.extend(stack.finals);
        Ok(stack.y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::CellInput;

    /// An LSTM stack and a GRU stack of `layers` layers of 4 units over 3 features.
    fn both_cells(layers: usize) -> [Recurrent; 2] {
        let lstm = Lstm {
            input: 3,
            hidden: 4,
            layers,
            input_kind: CellInput::Features,
            bidirectional: false,
        };
        let gru = Gru {
            input: lstm.input,
            hidden: lstm.hidden,
            layers,
            input_kind: lstm.input_kind,
            bidirectional: false,
        };
        [Recurrent::Lstm(lstm), Recurrent::Gru(gru)]
    }

    #[test]
    fn both_cells_pair_each_carried_state_leaf_with_its_final_value_by_slot() {
        let [lstm, gru] = both_cells(2);
        for (stack, slots) in [(lstm, 4), (gru, 2)] {
            let mut g = Graph::new();
            let w = stack.specs().map(|s| s.leaf(&mut g));
            let x = g.input("x", stack.input_shape(5, 6));
            let s = stack
                .stack_over(&mut g, (x, None), &w, 5, (false, Between::NONE))
                .unwrap();
            assert_eq!((s.carried.len(), s.finals.len()), (slots, slots));
            for (&(leaf, slot), &last) in s.carried.iter().zip(&s.finals) {
                assert_eq!(g.tensor(leaf).name, slot.name());
                assert_eq!(g.shape(last), &Shape::from([5, 4]));
            }
            assert_eq!(g.shape(s.y), &Shape::from([6, 5, 4]));
        }
    }

    #[test]
    fn weights_of_the_other_cell_are_an_error() {
        let [lstm, gru] = both_cells(1);
        let mut g = Graph::new();
        let w = lstm.specs().map(|s| s.leaf(&mut g));
        let x = g.input("x", gru.input_shape(2, 2));
        assert!(gru
            .stack_over(&mut g, (x, None), &w, 2, (false, Between::NONE))
            .is_err());
    }
}
