//! Graph builders for a described model.
//!
//! Each function adds nodes to a [`Graph`] and returns the ids a caller needs. The same
//! builders serve training, evaluation and the finite-difference tests, so what is
//! checked is what runs. Sequences are time-major (`[T, B, F]`, or `[T, B]` token ids), as
//! in PyTorch's `nn.LSTM` and `nn.GRU`. The layers themselves are in [`crate::layers`], placed by
//! [`crate::network::Network`].

use tensorfit_core::args::{CopyInputs, CopyTargets};
use tensorfit_core::rows::leading;
use tensorfit_core::{Graph, Op, Result, TensorId};

use crate::description::{HeadOn, LossSpec, ModelDescription};
pub use crate::layers::RecurrentStack;
use crate::layers::{dropout, BatchStats, Context, ParamKind, ParamSpec, StateSlot};
use crate::network::{Network, NetworkTensors};

/// Tensors by name (PyTorch's parameter names).
pub type Named = Vec<(String, TensorId)>;

/// Training (batch statistics, activations kept for backward) or inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Train,
    Infer,
}

/// The network's tensors as leaves of one graph.
#[derive(Debug, Clone)]
pub(crate) struct Leaves {
    pub ids: NetworkTensors<TensorId>,
    /// The input side's trainable parameters (embedding, recurrent stack), then the
    /// head's, by name, in table order.
    pub input: Named,
    pub head: Named,
}

impl Leaves {
    /// Adds every tensor of `net` to `g` in table order.
    pub fn add(g: &mut Graph, net: &Network) -> Leaves {
        let specs = net.specs();
        let ids = specs.map(|s| s.leaf(g));
        let trainable = |specs: Vec<&ParamSpec>, ids: Vec<&TensorId>| -> Named {
            specs
                .into_iter()
                .zip(ids)
                .filter(|(s, _)| s.kind == ParamKind::Trainable)
                .map(|(s, t)| (s.name.clone(), *t))
                .collect()
        };
        Leaves {
            input: trainable(specs.input_items(), ids.input_items()),
            head: trainable(specs.head_items(), ids.head_items()),
            ids,
        }
    }

    /// Every trainable parameter by name, in table order.
    pub fn params(&self) -> Named {
        self.input.iter().chain(&self.head).cloned().collect()
    }
}

/// The whole classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    pub stack: RecurrentStack,
    /// `[B]` class indices as f32 (`[T, B]` with a head on every step), or mean squared
    /// error's targets `[B, K]` (`[T, B, K]`).
    pub labels: TensorId,
    /// A head on every step with cross-entropy: the `[1]` input the host writes with
    /// [`crate::every_step::loss_scale`], so that the loss is the mean over the rows
    /// not ignored.
    pub loss_scale: Option<TensorId>,
    /// Mean loss, `[1]`.
    pub loss: TensorId,
    /// Softmax probabilities `[B, classes]` (`[T, B, classes]` on every step), or a
    /// regression's predictions.
    pub probs: TensorId,
    /// Every trainable parameter, by PyTorch name.
    pub params: Named,
    /// In training: each BatchNorm's batch statistics.
    pub batch_stats: Vec<BatchStats>,
}

/// A graph that only advances the recurrent state over a chunk of the sequence: the
/// layers in inference form, then a copy of each final state into the persistent initial
/// state, so the next chunk continues where this one stopped. With `padded` the chunk
/// takes each sequence's `lengths` within it (0 for a sequence that ended before it: its
/// state carries through).
pub fn carry_graph(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
    padded: bool,
) -> Result<(Graph, RecurrentStack)> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let mut cx = Context::padded(&mut g, Mode::Infer, (batch, padded), None);
    let stack = net.stack(&mut g, &leaves.ids, steps, &mut cx)?;
    copy_finals(&mut g, &stack.carried, &stack.finals)?;
    Ok((g, stack))
}

/// Copies each final state `finals` into the carried state it started from (`carried`,
/// in the same order), so the next chunk continues where this one stopped.
pub fn copy_finals(
    g: &mut Graph,
    carried: &[(TensorId, StateSlot)],
    finals: &[TensorId],
) -> Result<()> {
    for (&(dst, slot), &src) in carried.iter().zip(finals) {
        // `state.h_l0` is carried by `carry_h_l0`.
        let name = slot.name().replacen("state.", "carry_", 1);
        g.update(&name, Op::Copy, CopyInputs { src }, CopyTargets { dst })?;
    }
    Ok(())
}

/// The whole model over a chunk of `steps` steps: embedding if any, recurrent stack,
/// last step, the head's layers, output layer and loss.
pub fn classifier(
    g: &mut Graph,
    model: &ModelDescription,
    batch: usize,
    steps: usize,
    mode: Mode,
) -> Result<Classifier> {
    classifier_at_lengths(g, model, (batch, steps), mode, false)
}

/// [`classifier`], over a padded batch when `padded`: the graph has the input `lengths`
/// `[B]` ([`RecurrentStack::lengths`]), the layers stop at each sequence's end, and a head
/// on the last step reads each sequence's own last step (in inference, the top layer's
/// final state, which carries a sequence that ended in an earlier chunk). A head on every
/// step reads every step; the host labels the steps past a sequence's end `IGNORE_LABEL`
/// ([`crate::every_step`]), and such a head may not train a BatchNorm nor end in mean
/// squared error (refused, naming the layer or loss).
pub fn classifier_at_lengths(
    g: &mut Graph,
    model: &ModelDescription,
    (batch, steps): (usize, usize),
    mode: Mode,
    padded: bool,
) -> Result<Classifier> {
    let net = model.network()?;
    if padded {
        crate::every_step::check_padded(&net, mode)?;
    }
    let leaves = Leaves::add(g, &net);
    let key = dropout::key_leaf(g, mode == Mode::Train && net.has_dropout());
    let mut cx = Context::padded(g, mode, (batch, padded), key);
    let stack = net.stack(g, &leaves.ids, steps, &mut cx)?;
    // `[B, H]` through the last step (or a pool over the steps); with a head on every
    // step `[T, B, H]`, read by the head's layers as T·B rows (`tensorfit_core::rows`).
    let rows = match net.reduce() {
        Some(reduce) => reduce.forward(g, stack.y, &[], &mut cx)?,
        None => stack.y,
    };
    let h = head(g, &net, &leaves.ids, rows, &mut cx)?;
    Ok(Classifier {
        stack,
        labels: h.labels,
        loss_scale: h.loss_scale,
        loss: h.loss,
        probs: h.probs,
        params: leaves.params(),
        batch_stats: h.batch_stats,
    })
}

/// The classifier's head and loss.
#[derive(Debug)]
pub(crate) struct Head {
    pub labels: TensorId,
    pub loss_scale: Option<TensorId>,
    pub loss: TensorId,
    pub probs: TensorId,
    pub batch_stats: Vec<BatchStats>,
}

/// The head's layers, the output layer and the loss over `rows`: the top layer's last
/// step `[B, H]`, or every step `[T, B, H]` with a head on every step; its dropouts drop
/// with `cx`'s dropout key (training only); its BatchNorms' batch statistics are those
/// `cx` records.
pub(crate) fn head(
    g: &mut Graph,
    net: &Network,
    ids: &NetworkTensors<TensorId>,
    rows: TensorId,
    cx: &mut Context,
) -> Result<Head> {
    let mut target = leading(g.shape(rows));
    if let LossSpec::MeanSquaredError { outputs } = net.out.loss {
        target.0.push(outputs);
    }
    let labels = g.input("labels", target);
    let mut h = rows;
    for (part, t) in net.head.iter().zip(&ids.head) {
        h = part.forward(g, h, t, cx)?;
    }
    let outs = net.out.forward(g, h, &ids.out, labels)?;
    let (loss, loss_scale) = match (net.head_on, net.out.loss) {
        (HeadOn::EveryStep, LossSpec::SoftmaxCrossEntropy { .. }) => {
            let (loss, scale) = crate::every_step::scaled(g, outs.loss)?;
            (loss, Some(scale))
        }
        _ => (outs.loss, None),
    };
    Ok(Head {
        labels,
        loss_scale,
        loss,
        probs: outs.prediction,
        batch_stats: std::mem::take(&mut cx.stats),
    })
}
