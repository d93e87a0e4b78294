//! Graph builders for a described model.
//!
//! Each function adds nodes to a [`Graph`] and returns the ids a caller needs. The same
//! builders serve training, evaluation and the finite-difference tests, so what is
//! checked is what runs. Sequences are time-major (`[T, B, F]`, or `[T, B]` token ids), as
//! in PyTorch's `nn.LSTM` and `nn.GRU`. The layers themselves are in [`crate::layers`], placed by
//! [`crate::network::Network`].

use tensorfit_core::args::{CopyInputs, CopyTargets, SliceTimeInputs};
use tensorfit_core::{Graph, Op, Result, TensorId};

use crate::description::{LossSpec, ModelDescription};
pub use crate::layers::RecurrentStack;
use crate::layers::{BatchStats, ParamKind, ParamSpec};
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
    /// `[B]`, class indices as f32.
    pub labels: TensorId,
    /// Mean cross-entropy, `[1]`.
    pub loss: TensorId,
    /// Softmax probabilities, `[B, classes]`.
    pub probs: TensorId,
    /// Every trainable parameter, by PyTorch name.
    pub params: Named,
    /// In training: each BatchNorm's batch statistics.
    pub batch_stats: Vec<BatchStats>,
}

/// A graph that only advances the recurrent state over a chunk of the sequence: the
/// layers in inference form, then a copy of each final state into the persistent initial
/// state, so the next chunk continues where this one stopped.
pub fn carry_graph(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
) -> Result<(Graph, RecurrentStack)> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let stack = net.stack(&mut g, &leaves.ids, (batch, steps), false, false)?;
    carry_finals(&mut g, &stack)?;
    Ok((g, stack))
}

/// Copies each final state of `stack` into its persistent initial state, so that the
/// next program over the same sequences continues where this one stopped (a carried
/// chunk, or one step of a stream).
pub fn carry_finals(g: &mut Graph, stack: &RecurrentStack) -> Result<()> {
    for (&(dst, slot), &src) in stack.carried.iter().zip(&stack.finals) {
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
/// `[B]` ([`RecurrentStack::lengths`]), the layers stop at each sequence's end, and the head
/// reads each sequence's own last step.
pub fn classifier_at_lengths(
    g: &mut Graph,
    model: &ModelDescription,
    (batch, steps): (usize, usize),
    mode: Mode,
    padded: bool,
) -> Result<Classifier> {
    let net = model.network()?;
    let leaves = Leaves::add(g, &net);
    let keep = mode == Mode::Train;
    let stack = net.stack(g, &leaves.ids, (batch, steps), keep, padded)?;
    let last = g.apply(
        "last_step",
        Op::SliceTime { t: steps - 1 },
        SliceTimeInputs {
            x: stack.y,
            lengths: stack.lengths,
        },
    )?;
    let h = head(g, &net, &leaves.ids, last.out, batch, mode)?;
    Ok(Classifier {
        stack,
        labels: h.labels,
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
    pub loss: TensorId,
    pub probs: TensorId,
    pub batch_stats: Vec<BatchStats>,
}

/// The head's layers, the output layer and the loss over the top layer's last step
/// `last` `[B, H]`.
pub(crate) fn head(
    g: &mut Graph,
    net: &Network,
    ids: &NetworkTensors<TensorId>,
    last: TensorId,
    batch: usize,
    mode: Mode,
) -> Result<Head> {
    let labels = match net.out.loss {
        LossSpec::SoftmaxCrossEntropy { .. } => g.input("labels", [batch]),
        LossSpec::MeanSquaredError { outputs } => g.input("labels", [batch, outputs]),
    };
    let mut batch_stats = Vec::new();
    let mut h = last;
    for (part, t) in net.head.iter().zip(&ids.head) {
        h = part.forward(g, h, t, mode, &mut batch_stats)?;
    }
    let outs = net.out.forward(g, h, &ids.out, labels)?;
    Ok(Head {
        labels,
        loss: outs.loss,
        probs: outs.prediction,
        batch_stats,
    })
}
