//! Graph builders for a described model.
//!
//! Each function adds nodes to a [`Graph`] and returns the ids a caller needs. The same
//! builders serve training, evaluation and the finite-difference tests, so what is
//! checked is what runs. Sequences are time-major (`[T, B, F]`), as in PyTorch's
//! `nn.LSTM`. The layers themselves are in [`crate::layers`], placed by
//! [`crate::network::Network`].

use tensorfit_core::args::{CopyInputs, CopyTargets, SliceTimeInputs};
use tensorfit_core::{Graph, Op, Result, TensorId};

use crate::description::{LossSpec, ModelDescription};
pub use crate::layers::lstm::LstmStack;
use crate::layers::{BatchStats, ParamKind, ParamSpec, StateSlot};
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
    /// The LSTM stack's trainable parameters, then the head's, by name, in table order.
    pub lstm: Named,
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
            lstm: trainable(specs.lstm_items(), ids.lstm_items()),
            head: trainable(specs.head_items(), ids.head_items()),
            ids,
        }
    }

    /// Every trainable parameter by name, in table order.
    pub fn params(&self) -> Named {
        self.lstm.iter().chain(&self.head).cloned().collect()
    }
}

impl LstmStack {
    /// The carried state leaves with their slots.
    pub fn carried(&self) -> Vec<(TensorId, StateSlot)> {
        carried(self.h0.iter().copied().zip(self.c0.iter().copied()))
    }
}

/// Layer by layer (h, c) leaves with their slots.
pub(crate) fn carried(
    state: impl IntoIterator<Item = (TensorId, TensorId)>,
) -> Vec<(TensorId, StateSlot)> {
    use crate::layers::StatePart::{C, H};
    state
        .into_iter()
        .enumerate()
        .flat_map(|(layer, (h, c))| {
            [
                (h, StateSlot { layer, part: H }),
                (c, StateSlot { layer, part: C }),
            ]
        })
        .collect()
}

/// The whole classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    pub stack: LstmStack,
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

/// A graph that only advances the LSTM state over a chunk of the sequence: the layers
/// in inference form, then a copy of each final state into the persistent initial state,
/// so the next chunk continues where this one stopped.
pub fn carry_graph(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
) -> Result<(Graph, LstmStack)> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let stack = net
        .lstm
        .stack(&mut g, &leaves.ids.lstm, batch, steps, false)?;
    for k in 0..net.lstm.layers {
        for (what, src, dst) in [
            ("h", stack.h_n[k], stack.h0[k]),
            ("c", stack.c_n[k], stack.c0[k]),
        ] {
            let name = format!("carry_{what}_l{k}");
            g.update(&name, Op::Copy, CopyInputs { src }, CopyTargets { dst })?;
        }
    }
    Ok((g, stack))
}

/// The whole model over a `[steps, batch, input]` chunk: LSTM stack, last step, the
/// head's layers, output layer and loss.
pub fn classifier(
    g: &mut Graph,
    model: &ModelDescription,
    batch: usize,
    steps: usize,
    mode: Mode,
) -> Result<Classifier> {
    let net = model.network()?;
    let leaves = Leaves::add(g, &net);
    let keep = mode == Mode::Train;
    let stack = net.lstm.stack(g, &leaves.ids.lstm, batch, steps, keep)?;
    let last = g.apply(
        "last_step",
        Op::SliceTime { t: steps - 1 },
        SliceTimeInputs { x: stack.y },
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
