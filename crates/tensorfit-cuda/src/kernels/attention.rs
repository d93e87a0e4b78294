//! Multi-head scaled dot-product self-attention: `attention_scores`, its gradient
//! `attention_scores_backward`, `attention_mix` and its gradient `attention_mix_backward`
//! (kernels in `attention.cu`), as the CPU's `kernels/attention.rs` computes them and
//! built from the same four kernels as wgpu's: the raw scores then each row's softmax;
//! the mix; the weights' gradient and the values' (a transposed mix); each query row's
//! `r = Σ_j p·dp` kept in `dq` until `dk` is done, then `dq`, which recomputes it.

use tensorfit_core::args::*;
use tensorfit_core::{AttentionDims, AttentionKernels, Error, Result};

use super::{count, int, Gpu, ATTENTION_DOT, ATTENTION_MIX, ATTENTION_ROWSUM, ATTENTION_SOFTMAX};
use crate::driver::{Arg, DevPtr};

/// `(pairs, steps, Dh)` as the kernels' `int` parameters, checked: heads of at least one
/// feature, and every weight's index within `i64` (its row and column within `int`).
fn sizes(kernel: &str, d: &AttentionDims) -> Result<[Arg; 3]> {
    if d.heads == 0 || d.head_dim == 0 {
        return Err(Error::Input(format!(
            "{kernel}: {} heads of {} features each",
            d.heads, d.head_dim
        )));
    }
    Ok([
        Arg::I32(int("pairs (batch·heads)", d.pairs())?),
        Arg::I32(int("steps", d.steps)?),
        Arg::I32(int("features per head", d.head_dim)?),
    ])
}

/// Pairs × steps (the rows of weights).
fn rows(d: &AttentionDims) -> i64 {
    count(d.pairs()) * count(d.steps)
}

/// `ptr`, or null.
fn maybe(ptr: Option<DevPtr>) -> Arg {
    Arg::Ptr(ptr.unwrap_or(DevPtr(0)))
}

/// `out[t, p] = alpha · Σ_s w · x[s, p]` over every step (see `attention.cu`); `grads`
/// = `(dprobs, rsum)` for the scores' gradient.
#[allow(clippy::too_many_arguments)]
fn mix(
    g: &Gpu<'_>,
    d: &AttentionDims,
    size: &[Arg; 3],
    (probs, grads): (DevPtr, Option<(DevPtr, DevPtr)>),
    [x, out]: [DevPtr; 2],
    transposed: bool,
    alpha: f32,
) -> Result<()> {
    let [pairs, steps, dh] = *size;
    let args = [
        Arg::Ptr(probs),
        maybe(grads.map(|(dprobs, _)| dprobs)),
        maybe(grads.map(|(_, rsum)| rsum)),
        Arg::Ptr(x),
        Arg::Ptr(out),
        pairs,
        steps,
        dh,
        Arg::I32(i32::from(grads.is_some())),
        Arg::I32(i32::from(transposed)),
        Arg::F32(alpha),
    ];
    g.launch_1d(ATTENTION_MIX, count(d.sequence().numel()), &args)
}

/// `probs` = the masked softmax of `q·kᵀ / sqrt(Dh)` per pair.
pub fn attention_scores(
    g: &Gpu<'_>,
    d: &AttentionDims,
    causal: bool,
    [q, k, probs]: [DevPtr; 3],
    lengths: Option<DevPtr>,
) -> Result<()> {
    let [pairs, steps, dh] = sizes("attention_scores", d)?;
    let args = [Arg::Ptr(q), Arg::Ptr(k), Arg::Ptr(probs), pairs, steps, dh];
    g.launch_1d(ATTENTION_DOT, count(d.probs().numel()), &args)?;
    let args = [
        maybe(lengths),
        Arg::Ptr(probs),
        pairs,
        steps,
        Arg::I32(int("heads", d.heads)?),
        Arg::F32(d.scale()),
        Arg::I32(i32::from(causal)),
    ];
    g.launch_1d(ATTENTION_SOFTMAX, rows(d), &args)
}

/// `dq`, `dk` of the weights' gradient `dprobs`.
pub fn attention_scores_backward(
    g: &Gpu<'_>,
    d: &AttentionDims,
    [q, k, probs, dprobs]: [DevPtr; 4],
    [dq, dk]: [DevPtr; 2],
) -> Result<()> {
    let size @ [pairs, steps, dh] = sizes("attention_scores_backward", d)?;
    let args = [
        Arg::Ptr(probs),
        Arg::Ptr(dprobs),
        Arg::Ptr(dq),
        pairs,
        steps,
        dh,
    ];
    g.launch_1d(ATTENTION_ROWSUM, rows(d), &args)?;
    let grads = Some((dprobs, dq));
    mix(g, d, &size, (probs, grads), [q, dk], true, d.scale())?;
    mix(g, d, &size, (probs, grads), [k, dq], false, d.scale())
}

/// `out = probs · v` per pair.
pub fn attention_mix(g: &Gpu<'_>, d: &AttentionDims, [probs, v, out]: [DevPtr; 3]) -> Result<()> {
    let size = sizes("attention_mix", d)?;
    mix(g, d, &size, (probs, None), [v, out], false, 1.0)
}

/// `dprobs = dout · vᵀ` and `dv = probsᵀ · dout` per pair.
pub fn attention_mix_backward(
    g: &Gpu<'_>,
    d: &AttentionDims,
    [probs, v, dout]: [DevPtr; 3],
    [dprobs, dv]: [DevPtr; 2],
) -> Result<()> {
    let size @ [pairs, steps, dh] = sizes("attention_mix_backward", d)?;
    let args = [
        Arg::Ptr(dout),
        Arg::Ptr(v),
        Arg::Ptr(dprobs),
        pairs,
        steps,
        dh,
    ];
    g.launch_1d(ATTENTION_DOT, count(d.probs().numel()), &args)?;
    mix(g, d, &size, (probs, None), [dout, dv], true, 1.0)
}

impl<'g> AttentionKernels for Gpu<'g> {
    fn attention_scores(
        &mut self,
        d: AttentionDims,
        causal: bool,
        i: AttentionScoresInputs<DevPtr>,
        o: AttentionScoresOutputs<DevPtr>,
    ) -> Result<()> {
        attention_scores(self, &d, causal, [i.q, i.k, o.probs], i.lengths)
    }

    fn attention_scores_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionScoresBackwardInputs<DevPtr>,
        o: AttentionScoresBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let inputs = [i.q, i.k, i.probs, i.dprobs];
        attention_scores_backward(self, &d, inputs, [o.dq, o.dk])
    }

    fn attention_mix(
        &mut self,
        d: AttentionDims,
        i: AttentionMixInputs<DevPtr>,
        o: AttentionMixOutputs<DevPtr>,
    ) -> Result<()> {
        attention_mix(self, &d, [i.probs, i.v, o.out])
    }

    fn attention_mix_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionMixBackwardInputs<DevPtr>,
        o: AttentionMixBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        attention_mix_backward(self, &d, [i.probs, i.v, i.dout], [o.dprobs, o.dv])
    }
}
