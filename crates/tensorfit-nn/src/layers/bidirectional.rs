//! A bidirectional recurrent stack, PyTorch's `nn.LSTM`/`nn.GRU` with
//! `bidirectional=True`: each layer runs its cell forwards over the sequence and a second
//! cell (its `_reverse` tensors) from each sequence's own last step back to its first,
//! as `pack_padded_sequence` runs it, and gives both outputs side by side, `[T, B, 2H]`,
//! to the next layer.
//!
//! The reverse direction is the same cell op over the input reversed in time per
//! sequence ([`Op::ReverseTime`], which leaves a padded sequence's steps past its end in
//! place), its output reversed back; so every backend's recurrent kernels, their memory
//! plan and their backward serve both directions, and autodiff differentiates the whole.
//! Both directions start every batch from zeros: the reverse direction begins at the
//! sequence's end, so there is no state to carry into a next chunk, and such a stack
//! reads each sequence whole ([`super::LayerTraits::splits_in_time`] is false).

use tensorfit_core::args::{ConcatFeaturesInputs, FillInputs, ReverseTimeInputs};
use tensorfit_core::{Error, Graph, Op, Result, TensorId};

use super::{Between, Recurrent, RecurrentWeights};

/// The stack over `x` (`[T, B, I]`, each sequence stopping at its length in `lengths`
/// if given): the top layer's output `[T, B, 2H]` and its two directions' final states
/// `[B, 2H]` (forward then reverse, PyTorch's `torch.cat((h_n[-2], h_n[-1]), 1)`). With
/// `keep` the cells keep what backward needs; each layer's output but the last passes
/// through `between`'s dropout. Layer `k`'s directions are its weights at table index
/// `2k` and `2k + 1`, their nodes `{module}_l{k}` and `{module}_l{k}_reverse`.
pub(super) fn stack_over(
    cells: &Recurrent,
    g: &mut Graph,
    (x, lengths): (TensorId, Option<TensorId>),
    weights: &RecurrentWeights<TensorId>,
    batch: usize,
    (keep, between): (bool, Between),
) -> Result<(TensorId, TensorId)> {
    let fill = Op::Fill {
        value: 0.0,
        shape: cells.state_shape(batch),
    };
    let zeros = g
        .apply(
            &format!("{}.zeros", cells.module()),
            fill,
            FillInputs::default(),
        )?
        .out;
    // The LSTM starts from (h, c), the GRU from h: all zeros.
    let state = vec![zeros; cells.state_slots_per_layer()];
    let layers = cells.layers();
    let (mut y, mut ends) = (x, None);
    for k in 0..layers {
        let name = cells.layer_name(k);
        let reverse = format!("{name}_reverse");
        let forward = cells.layer(g, &name, 2 * k, (y, lengths), &state, weights, keep)?;
        let backwards = reverse_time(g, &format!("{reverse}.x"), y, lengths)?;
        let back = cells.layer(
            g,
            &reverse,
            2 * k + 1,
            (backwards, lengths),
            &state,
            weights,
            keep,
        )?;
        let back_y = reverse_time(g, &format!("{reverse}.y"), back.y(), lengths)?;
        let both = concat(g, &format!("{name}.y"), forward.y(), back_y)?;
        y = between.after(g, (k, layers), both, 0)?;
        if k + 1 == layers {
            let h_n = |f: &super::LayerForward| f.finals()[0];
            ends = Some(concat(
                g,
                &format!("{name}.ends"),
                h_n(&forward),
                h_n(&back),
            )?);
        }
    }
    let ends = ends.ok_or_else(|| Error::Graph("a bidirectional stack of no layers".into()))?;
    Ok((y, ends))
}

/// `x` reversed in time per sequence (each from its own last step).
fn reverse_time(
    g: &mut Graph,
    name: &str,
    x: TensorId,
    lengths: Option<TensorId>,
) -> Result<TensorId> {
    Ok(
        g.apply(name, Op::ReverseTime, ReverseTimeInputs { x, lengths })?
            .y,
    )
}

/// `a`'s features then `b`'s, per row.
fn concat(g: &mut Graph, name: &str, a: TensorId, b: TensorId) -> Result<TensorId> {
    Ok(
        g.apply(name, Op::ConcatFeatures, ConcatFeaturesInputs { a, b })?
            .out,
    )
}
