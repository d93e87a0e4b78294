//! A training segment's graph before the optimizer is appended: forward, loss, and the
//! gradient of every parameter. Built here by autodiff, or with recomputation partly by
//! hand ([`crate::recompute`]).

use tensorfit_core::args::FillInputs;
use tensorfit_core::{backward, Error, Graph, Op, Result, Shape, TensorId};

use crate::description::ModelDescription;
use crate::layers::{BatchStats, StateSlot};
use crate::model::{classifier_at_lengths, Mode, Named};

#[derive(Debug)]
pub(crate) struct TrainGraph {
    pub graph: Graph,
    /// One input per sub-segment, in time order, with its length.
    pub xs: Vec<(TensorId, usize)>,
    /// The sequences' lengths `[B]` within each entry of `xs`, in its order (a padded
    /// segment; none otherwise).
    pub lengths: Vec<TensorId>,
    /// The labels the loss reads and the predictions, in time order: one of each, or one
    /// per entry of `xs` where the head on every step is recomputed with its sub-segment.
    pub labels: Vec<TensorId>,
    pub probs: Vec<TensorId>,
    /// The mean loss `[1]` over the whole segment.
    pub loss: TensorId,
    /// A head on every step with cross-entropy: the `[1]` input
    /// [`crate::every_step::loss_scale`].
    pub loss_scale: Option<TensorId>,
    /// In training: each BatchNorm's batch statistics.
    pub batch_stats: Vec<BatchStats>,
    /// Every trainable parameter by name, in table order.
    pub params: Named,
    /// Gradient of every parameter, in `params` order.
    pub grads: Vec<TensorId>,
    /// The carried state leaves.
    pub carried: Vec<(TensorId, StateSlot)>,
    /// The final state, in the order of `carried` (what a window of windowed truncated
    /// BPTT carries on).
    pub finals: Vec<TensorId>,
}

/// The seed of the loss's gradient: a `[1]` tensor of ones.
pub(crate) fn loss_grad_seed(g: &mut Graph) -> Result<TensorId> {
    let seed = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    Ok(g.apply("loss.grad_seed", seed, FillInputs::default())?.out)
}

/// The error for a parameter the loss does not reach.
pub(crate) fn no_gradient(name: &str) -> Error {
    Error::Graph(format!("the loss does not depend on parameter `{name}`"))
}

/// The whole segment differentiated by autodiff, keeping its activations for backward;
/// over a padded batch when `padded`.
pub(crate) fn train_graph(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
    padded: bool,
) -> Result<TrainGraph> {
    let mut g = Graph::new();
    let c = classifier_at_lengths(&mut g, model, (batch, steps), Mode::Train, padded)?;
    let one = loss_grad_seed(&mut g)?;
    let wrt: Vec<TensorId> = c.params.iter().map(|(_, t)| *t).collect();
    let grads = backward(&mut g, &[(c.loss, one)], &wrt)?
        .into_iter()
        .zip(&c.params)
        .map(|(grad, (name, _))| grad.ok_or_else(|| no_gradient(name)))
        .collect::<Result<Vec<_>>>()?;
    Ok(TrainGraph {
        graph: g,
        xs: vec![(c.stack.x, steps)],
        finals: c.stack.finals,
        carried: c.stack.carried,
        lengths: c.stack.lengths.into_iter().collect(),
        labels: vec![c.labels],
        probs: vec![c.probs],
        loss: c.loss,
        loss_scale: c.loss_scale,
        batch_stats: c.batch_stats,
        params: c.params,
        grads,
    })
}
