//! Recomputation with a head on every step (language models, taggers).
//!
//! The head reads every step of the top layer's output. Keeping that output whole for the
//! head's backward would keep `T·B·H` values through the backward pass; instead each
//! sub-segment's part of the head is recomputed with the sub-segment, from the top
//! layer's recomputed output, and differentiated there by autodiff: its gradient is that
//! sub-segment's `dy` at the top layer. What the forward pass keeps of the head is the
//! predictions (the program's output) and the loss; the peak holds one sub-segment's
//! head activations besides them (for the character-level model at B=32, T=2000 the
//! peak drops from 1.13 GiB to 65-175 MiB, by the sub-segment: `docs/recomputation.md`).
//! The head's parameter gradients are summed over the sub-segments, like the stack's.
//!
//! The loss is the plain graph's: each part's mean over its `S·B` rows weighs `S/T`, and
//! with cross-entropy the sum is multiplied by the `loss_scale` input (the mean over the
//! rows not ignored, [`crate::every_step`]). A head dropout numbers a part's elements from
//! the part's first row, so the parts drop what the whole head drops. A BatchNorm
//! normalises over all `T·B` rows at once, which no part sees: it is refused.

use tensorfit_core::args::{BinaryInputs, FillInputs};
use tensorfit_core::{BinaryOp, Error, Graph, Op, Result, Shape, TensorId};

use crate::description::{HeadOn, LossSpec};
use crate::layers::Context;
use crate::model::Mode;
use crate::network::{Network, NetworkTensors};

/// Refuses a network whose head recomputation cannot split: a layer that mixes the rows
/// of its batch (BatchNorm) in a head on every step, named.
pub(super) fn check(net: &Network) -> Result<()> {
    if net.head_on != HeadOn::EveryStep {
        return Ok(());
    }
    match net.head_layers().find(|l| l.traits().mixes_rows) {
        Some(layer) => Err(Error::input(format!(
            "head layer `{}` ({}) mixes the rows of its batch, and in a head on every step those are all steps at once, which recomputation splits into sub-segments; train without recomputation or drop the layer",
            layer.name(),
            layer.kind(),
        ))),
        None => Ok(()),
    }
}

/// One sub-segment's part of the head.
#[derive(Debug, Clone, Copy)]
pub(super) struct Part {
    /// Its labels `[S, B]` (targets `[S, B, K]`), written by the host.
    pub labels: TensorId,
    /// Its loss, weighted as its share of the whole segment's.
    pub loss: TensorId,
    pub probs: TensorId,
}

/// Where a part lies: its first step and its steps, of the segment's `steps`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub t0: usize,
    pub len: usize,
    pub steps: usize,
}

/// The head over `y` `[S, B, H]`, the top layer's output over `span`, scoring `labels`
/// (added as the input `labels.{k}` when `None`); its loss weighs `S/T`, times
/// `loss_scale` with cross-entropy. Its dropouts drop with `key`.
#[allow(clippy::too_many_arguments)]
pub(super) fn part(
    g: &mut Graph,
    net: &Network,
    ids: &NetworkTensors<TensorId>,
    (k, span, y): (usize, Span, TensorId),
    labels: Option<TensorId>,
    (key, loss_scale): (Option<TensorId>, Option<TensorId>),
) -> Result<Part> {
    let labels = match labels {
        Some(l) => l,
        None => {
            let mut shape = Shape::from([span.len, g.shape(y).dims()[1]]);
            if let LossSpec::MeanSquaredError { outputs } = net.out.loss {
                shape.0.push(outputs);
            }
            g.input(&format!("labels.{k}"), shape)
        }
    };
    // From the part's first step, so that its dropouts drop what the whole head's do.
    let batch = g.shape(y).dims()[1];
    let mut cx = Context::new(Mode::Train, batch, None, key);
    cx.first_step = span.t0;
    let mut h = y;
    for (layer, t) in net.head.iter().zip(&ids.head) {
        h = layer.forward(g, h, t, &mut cx)?;
    }
    let outs = net.out.forward(g, h, &ids.out, labels)?;
    let share = Op::Fill {
        value: (span.len as f64 / span.steps as f64) as f32,
        shape: Shape::from([1]),
    };
    let share = g.apply(&format!("loss.share.seg{k}"), share, FillInputs::default())?;
    let mut loss = mul(g, &format!("loss.seg{k}"), outs.loss, share.out)?;
    if let Some(scale) = loss_scale {
        loss = mul(g, &format!("loss.seg{k}.over_counted_rows"), loss, scale)?;
    }
    Ok(Part {
        labels,
        loss,
        probs: outs.prediction,
    })
}

fn mul(g: &mut Graph, name: &str, a: TensorId, b: TensorId) -> Result<TensorId> {
    Ok(
        g.apply(name, Op::Binary(BinaryOp::Mul), BinaryInputs { a, b })?
            .out,
    )
}

/// The sum of the parts' losses: the segment's loss.
pub(super) fn total(g: &mut Graph, parts: &[Part]) -> Result<TensorId> {
    let mut sum = parts
        .first()
        .ok_or_else(|| Error::Graph("a head on every step over no sub-segment".into()))?
        .loss;
    for (k, p) in parts.iter().enumerate().skip(1) {
        let add = Op::Binary(BinaryOp::Add);
        let inputs = BinaryInputs { a: sum, b: p.loss };
        sum = g.apply(&format!("loss.sum.seg{k}"), add, inputs)?.out;
    }
    Ok(sum)
}
