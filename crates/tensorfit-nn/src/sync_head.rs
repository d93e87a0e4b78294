//! The training segment split at the head, for BatchNorm over the global batch of
//! data-parallel ranks (PyTorch's `SyncBatchNorm`; `TrainOptions::sync_batch_norm`).
//!
//! BatchNorm sits in the head, which reads the top layer's last step `[B, H]`. So rather
//! than a collective inside the graph, the segment runs as three programs with the host
//! in between: [`head_input`] (the forward up to the head's input), [`head`] (over the
//! rows of every rank, gathered by the host: the head's forward with the global batch's
//! statistics, the loss, and the backward to the head's parameters and input), and
//! [`stack_grads`] (the forward again, keeping activations, and the backward from this
//! rank's rows of the head input's gradient). The forward runs twice, as with
//! recomputation; the head, small against the recurrent stack, runs on every rank over
//! the whole batch, so its statistics, gradients and running statistics are the global
//! ones without further exchange.

use tensorfit_core::{backward, Error, Graph, Result, TensorId};

use crate::description::ModelDescription;
use crate::layers::{Context, StateSlot};
use crate::model::{head as head_layers, Head, Leaves, Mode, Named};
use crate::network::Network;
use crate::train_graph::no_gradient;

/// The carried state leaves of a stack.
type Carried = Vec<(TensorId, StateSlot)>;

/// A part of the split segment.
#[derive(Debug)]
pub(crate) struct HeadPart {
    pub graph: Graph,
    /// The sequence input, in [`head_input`] and [`stack_grads`].
    pub x: Option<TensorId>,
    /// The head's input `[B, H]`: computed by [`head_input`], read by [`head`].
    pub features: Option<TensorId>,
    /// Its gradient: computed by [`head`], the seed of [`stack_grads`].
    pub features_grad: Option<TensorId>,
    /// In [`head`]: labels, loss, prediction and batch statistics.
    pub head: Option<Head>,
    /// The parameters differentiated, with their gradients.
    pub grads: Vec<(String, TensorId)>,
    pub carried: Carried,
}

impl HeadPart {
    fn new(graph: Graph) -> HeadPart {
        HeadPart {
            graph,
            x: None,
            features: None,
            features_grad: None,
            head: None,
            grads: Vec::new(),
            carried: Vec::new(),
        }
    }
}

/// The stack over `steps` steps from its carried state, and the top layer's last step.
fn stack_to_head(
    g: &mut Graph,
    net: &Network,
    leaves: &Leaves,
    (batch, steps): (usize, usize),
    keep: bool,
) -> Result<(TensorId, TensorId, Carried)> {
    if net.has_dropout() {
        return Err(Error::input(
            "dropout with BatchNorm synchronised across ranks is not built yet (the head runs apart from the stack there); train this model in one process, or without dropout",
        ));
    }
    let mode = if keep { Mode::Train } else { Mode::Infer };
    let mut cx = Context::new(mode, batch, None, None);
    let stack = net.stack(g, &leaves.ids, steps, &mut cx)?;
    let reduce = net.reduce().ok_or_else(|| {
        Error::input("BatchNorm synchronised across ranks needs a head on each sequence")
    })?;
    let last = reduce.forward(g, stack.y, &[], &mut cx)?;
    Ok((stack.x, last, stack.carried))
}

fn differentiate(
    g: &mut Graph,
    seed: (TensorId, TensorId),
    params: &Named,
) -> Result<Vec<(String, TensorId)>> {
    let wrt: Vec<TensorId> = params.iter().map(|(_, t)| *t).collect();
    backward(g, &[seed], &wrt)?
        .into_iter()
        .zip(params)
        .map(|(grad, (name, _))| Ok((name.clone(), grad.ok_or_else(|| no_gradient(name))?)))
        .collect()
}

/// The forward of `[steps, batch]` up to the head's input (no activations kept).
pub(crate) fn head_input(model: &ModelDescription, batch: usize, steps: usize) -> Result<HeadPart> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let (x, features, carried) = stack_to_head(&mut g, &net, &leaves, (batch, steps), false)?;
    Ok(HeadPart {
        x: Some(x),
        features: Some(features),
        carried,
        ..HeadPart::new(g)
    })
}

/// The head in training mode over `batch` rows of its input, with the loss's gradient
/// to the head's parameters and to its input.
pub(crate) fn head(model: &ModelDescription, batch: usize) -> Result<HeadPart> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let features = g.input("head_input", [batch, net.body_features()]);
    let mut cx = Context::new(Mode::Train, batch, None, None);
    let h = head_layers(&mut g, &net, &leaves.ids, features, &mut cx)?;
    let one = crate::train_graph::loss_grad_seed(&mut g)?;
    let mut wrt = leaves.head.clone();
    wrt.push(("head_input".into(), features));
    let mut grads = differentiate(&mut g, (h.loss, one), &wrt)?;
    let features_grad = grads.pop().map(|(_, t)| t);
    Ok(HeadPart {
        features: Some(features),
        features_grad,
        head: Some(h),
        grads,
        ..HeadPart::new(g)
    })
}

/// The forward of `[steps, batch]` keeping activations, and the backward from the
/// gradient of the head's input (an input of the program) to the input side's parameters.
pub(crate) fn stack_grads(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
) -> Result<HeadPart> {
    let net = model.network()?;
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let (x, features, carried) = stack_to_head(&mut g, &net, &leaves, (batch, steps), true)?;
    let seed = g.input("head_input.grad", [batch, net.body_features()]);
    let grads = differentiate(&mut g, (features, seed), &leaves.input)?;
    Ok(HeadPart {
        x: Some(x),
        features_grad: Some(seed),
        grads,
        carried,
        ..HeadPart::new(g)
    })
}
