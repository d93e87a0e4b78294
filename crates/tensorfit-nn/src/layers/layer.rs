//! The one trait every layer kind implements, and what a layer's forward is given.
//!
//! A model is an ordered list of layers ([`crate::network::Network::layers`]); each kind
//! is one file of this module implementing [`Layer`]: its tensors (PyTorch's names), its
//! shape rule, its forward graph (the backward comes from the ops' autodiff), its carried
//! state if any, and the [`LayerTraits`] the rest of the engine decides by. No method has
//! a default: a new kind answers every question itself, so nothing can decide for a layer
//! it has not met. `docs/adding-a-layer.md` lists the files a new kind touches.

use std::fmt;

use tensorfit_core::{Error, Graph, Result, TensorId};

use super::{BatchStats, ParamSpec, StateSlot};
use crate::model::Mode;

/// What the engine must know of a layer to plan, split and synchronise a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerTraits {
    /// Its output for one row depends on the other rows of the batch (BatchNorm's
    /// statistics): micro-batches would change the results, data-parallel ranks must
    /// synchronise it, and padded steps would count in it.
    pub mixes_rows: bool,
    /// Its output at one step depends on other steps (a recurrent cell): a sequence split
    /// in time needs what the layer carries from one part to the next.
    pub mixes_steps: bool,
    /// It carries a state from one step to the next ([`Layer::state_slots`]), so it can
    /// stream a step at a time and continue a sequence chunk by chunk.
    pub carries_state: bool,
    /// Its output over a sequence cut in time (chunks of inference or of truncated BPTT
    /// continued from what the layers carry, recomputed sub-segments, a stream of single
    /// steps) is its output over the whole sequence. False for a layer that reads each
    /// sequence whole (a bidirectional stack): those strategies are refused, naming it.
    pub splits_in_time: bool,
    /// It reads the training step's dropout key: it drops elements in training.
    pub random: bool,
}

impl LayerTraits {
    /// A layer that treats every row and every step on its own, carries nothing and
    /// draws nothing (an embedding, a linear map, LayerNorm). A kind still names this
    /// answer itself.
    pub const PER_ROW: LayerTraits = LayerTraits {
        mixes_rows: false,
        mixes_steps: false,
        carries_state: false,
        splits_in_time: true,
        random: false,
    };
}

/// What one graph gives every layer's forward beyond its input, and what the layers
/// leave in it for the rest of the graph (statistics to update, state to carry).
#[derive(Debug)]
pub struct Context {
    pub mode: Mode,
    /// The sequences in the batch.
    pub batch: usize,
    /// Each sequence's length `[B]` for a padded batch, written by the host.
    pub lengths: Option<TensorId>,
    /// The training step's dropout key (`None` in inference and without dropout).
    pub dropout_key: Option<TensorId>,
    /// The first step of this graph's part of a longer segment (a recomputed
    /// sub-segment's start; 0 otherwise): a dropout numbers its mask's elements from it,
    /// so the parts drop what the whole would.
    pub first_step: usize,
    /// In training: each BatchNorm's batch statistics, in layer order.
    pub stats: Vec<BatchStats>,
    /// Each carried state leaf with its slot, in layer order.
    pub carried: Vec<(TensorId, StateSlot)>,
    /// The final value of each carried state, in the same order.
    pub finals: Vec<TensorId>,
    /// Each sequence's summary at its end, `[B, F]`, left by the layer below where its
    /// output's step at the sequence's end is not that summary (a bidirectional stack:
    /// each direction's own last step; a recurrent stack in inference over a padded
    /// batch: its final h, carried past a sequence that ended in an earlier chunk); what
    /// [`super::LastStep`] reads when set.
    pub ends: Option<TensorId>,
}

impl Context {
    /// A graph's context: nothing recorded yet, from the segment's first step.
    pub fn new(mode: Mode, batch: usize, lengths: Option<TensorId>, key: Option<TensorId>) -> Self {
        Context {
            mode,
            batch,
            lengths,
            dropout_key: key,
            first_step: 0,
            stats: Vec::new(),
            carried: Vec::new(),
            finals: Vec::new(),
            ends: None,
        }
    }

    /// A graph's context over `batch` sequences, adding the input `lengths` `[B]` the
    /// host writes when they are `padded`.
    pub fn padded(
        g: &mut Graph,
        mode: Mode,
        (batch, padded): (usize, bool),
        key: Option<TensorId>,
    ) -> Self {
        let lengths = padded.then(|| g.input("lengths", [batch]));
        Context::new(mode, batch, lengths, key)
    }

    /// Whether the graph keeps what backward needs (training).
    pub fn keep(&self) -> bool {
        self.mode == Mode::Train
    }
}

/// One kind of layer. Implemented once per kind, in its own file.
pub trait Layer: fmt::Debug + Send + Sync {
    /// The kind as a description file spells it (`"lstm"`, `"batchnorm"`).
    fn kind(&self) -> &'static str;

    /// The name its tensors are registered under (`bn1` for `bn1.weight`) and errors
    /// name it by.
    fn name(&self) -> &str;

    /// Its tensors in table order: the order of graph leaves, checkpoints and the
    /// optimizer's updates.
    fn table(&self) -> Vec<ParamSpec>;

    /// Features per step (or per row) out of the layer, given `input` in.
    fn output_features(&self, input: usize) -> usize;

    /// What the engine must know of it.
    fn traits(&self) -> LayerTraits;

    /// Every state tensor it carries between chunks of a sequence, in order (none for a
    /// layer that carries nothing).
    fn state_slots(&self) -> Vec<StateSlot>;

    /// `x` through the layer; `tensors` are its leaves on `g`, in [`Layer::table`] order.
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId>;
}

/// A layer given `got` tensors where its table has `want`.
pub(crate) fn wrong_tensors(layer: &dyn Layer, want: usize, got: usize) -> Error {
    Error::Graph(format!(
        "layer `{}` ({}) has {want} tensors, was given {got}",
        layer.name(),
        layer.kind()
    ))
}

/// `tensors` as an array of `N`, or the error naming `layer`.
pub(crate) fn exactly<const N: usize>(
    layer: &dyn Layer,
    tensors: &[TensorId],
) -> Result<[TensorId; N]> {
    tensors
        .try_into()
        .map_err(|_| wrong_tensors(layer, N, tensors.len()))
}
