//! Multi-head scaled dot-product self-attention (see `tensorfit_core::AttentionDims`):
//! `attention_scores`, the weights of each query over the keys, and its gradient
//! `attention_scores_backward`; `attention_mix`, the weights applied to the values, and
//! its gradient `attention_mix_backward`.
//!
//! Sequences are `[T, B, D]`, seen per head as `[T, B·heads, Dh]`: pair `p = b·heads + h`
//! owns features `p·Dh..(p+1)·Dh` of every step (`head`); the weights are
//! `[B, heads, T, T]`, one `[T, T]` block per pair. The functions here are the readable
//! reference, plain loops on one thread that sum in a fixed order (features, then keys or
//! queries in increasing order): what the fast path (`attention_fast.rs`, which the
//! backend runs: per pair the products are small GEMMs, pairs spread over the kernel
//! threads) and the GPU kernels are tested against. Every size and every length is
//! checked before anything is written.

use tensorfit_core::args::*;
use tensorfit_core::{AttentionDims, AttentionKernels, Result};

use super::attention_fast as fast;
use super::gemm_fast;
use super::pool::row_ends;
use super::{check_len, HostKernels};
use crate::backend_error;

/// Where pair `p`'s features of step `t` start in a `[T, B, D]` tensor.
pub(crate) fn head(d: &AttentionDims, t: usize, p: usize) -> usize {
    (t * d.pairs() + p) * d.head_dim
}

/// Checks the lengths of the `[T, B, D]` slices `seqs` and the `[B, heads, T, T]` slices
/// `blocks` (each named) against `d`, for kernel `kernel`.
pub(crate) fn check_sizes(
    kernel: &str,
    d: &AttentionDims,
    seqs: &[(&str, &[f32])],
    blocks: &[(&str, &[f32])],
) -> Result<()> {
    if d.heads == 0 || d.head_dim == 0 {
        return Err(backend_error(format!(
            "{kernel}: {} heads of {} features each: each needs at least one",
            d.heads, d.head_dim
        )));
    }
    let seq = d.sequence().numel();
    let probs = d.probs().numel();
    for &(what, x) in seqs {
        check_len(kernel, what, x, seq)?;
    }
    for &(what, x) in blocks {
        check_len(kernel, what, x, probs)?;
    }
    Ok(())
}

/// The keys each row's queries may attend to: `lengths[b]`, each checked to be a whole
/// number in `0..=T` (an `Error::Input` naming `kernel` and the row), or `T` for every
/// row.
pub(crate) fn key_ends(
    kernel: &str,
    d: &AttentionDims,
    lengths: Option<&[f32]>,
) -> Result<Vec<usize>> {
    row_ends(kernel, (d.steps, d.batch), lengths)
}

/// `probs[b, h, i, j]` = softmax over the keys `j < n` of `q_i · k_j / sqrt(Dh)`, 0 for
/// `j ≥ n`, where `n = d.keys(causal, i, L_b)` (the keys inside row `b`'s `L_b` steps and,
/// if `causal`, at most `i`); a row of no keys is all zeros. `q`, `k` `[T, B, D]`,
/// `probs` `[B, heads, T, T]`, `lengths` `[B]` or every row `T` steps.
pub fn attention_scores(
    d: AttentionDims,
    causal: bool,
    lengths: Option<&[f32]>,
    q: &[f32],
    k: &[f32],
    probs: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_scores";
    check_sizes(K, &d, &[("q", q), ("k", k)], &[("probs", probs)])?;
    let ends = key_ends(K, &d, lengths)?;
    let (steps, dh, scale) = (d.steps, d.head_dim, d.scale());
    let mut scores = vec![0.0f32; steps];
    for p in 0..d.pairs() {
        let end = ends[p / d.heads];
        for i in 0..steps {
            let n = d.keys(causal, i, end);
            let row = &mut probs[(p * steps + i) * steps..][..steps];
            row.fill(0.0);
            if n == 0 {
                continue;
            }
            let q_i = &q[head(&d, i, p)..][..dh];
            for (j, s) in scores[..n].iter_mut().enumerate() {
                let k_j = &k[head(&d, j, p)..][..dh];
                let dot: f32 = q_i.iter().zip(k_j).map(|(a, b)| a * b).sum();
                *s = dot * scale;
            }
            let max = scores[..n]
                .iter()
                .copied()
                .fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for (w, &s) in row[..n].iter_mut().zip(&scores[..n]) {
                *w = (s - max).exp();
                sum += *w;
            }
            row[..n].iter_mut().for_each(|w| *w /= sum);
        }
    }
    Ok(())
}

/// The gradient of [`attention_scores`]: per pair, `ds = p ∘ (dp − rowsum(p ∘ dp))`,
/// `dq = ds · k / sqrt(Dh)` and `dk = dsᵀ · q / sqrt(Dh)`, for `probs`, `dprobs`
/// `[B, heads, T, T]` and `q`, `k`, `dq`, `dk` `[T, B, D]`. The masked weights are zeros,
/// so the masked keys get nothing.
pub fn attention_scores_backward(
    d: AttentionDims,
    (q, k): (&[f32], &[f32]),
    (probs, dprobs): (&[f32], &[f32]),
    dq: &mut [f32],
    dk: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_scores_backward";
    let seqs = [("q", q), ("k", k), ("dq", &*dq), ("dk", &*dk)];
    check_sizes(K, &d, &seqs, &[("probs", probs), ("dprobs", dprobs)])?;
    let (steps, dh, scale) = (d.steps, d.head_dim, d.scale());
    if steps == 0 {
        return Ok(());
    }
    let mut ds = vec![0.0f32; steps * steps];
    for p in 0..d.pairs() {
        let block = p * steps * steps..(p + 1) * steps * steps;
        let (pb, dpb) = (&probs[block.clone()], &dprobs[block]);
        for ((ds_i, p_i), dp_i) in ds
            .chunks_exact_mut(steps)
            .zip(pb.chunks_exact(steps))
            .zip(dpb.chunks_exact(steps))
        {
            let r: f32 = p_i.iter().zip(dp_i).map(|(a, b)| a * b).sum();
            for ((s, &w), &g) in ds_i.iter_mut().zip(p_i).zip(dp_i) {
                *s = w * (g - r);
            }
        }
        for i in 0..steps {
            let out = &mut dq[head(&d, i, p)..][..dh];
            for (f, o) in out.iter_mut().enumerate() {
                let sum: f32 = (0..steps)
                    .map(|j| ds[i * steps + j] * k[head(&d, j, p) + f])
                    .sum();
                *o = sum * scale;
            }
        }
        for j in 0..steps {
            let out = &mut dk[head(&d, j, p)..][..dh];
            for (f, o) in out.iter_mut().enumerate() {
                let sum: f32 = (0..steps)
                    .map(|i| ds[i * steps + j] * q[head(&d, i, p) + f])
                    .sum();
                *o = sum * scale;
            }
        }
    }
    Ok(())
}

/// `out[i, b, head h] = Σ_j probs[b, h, i, j] · v[j, b, head h]` (summed in key order),
/// for `probs` `[B, heads, T, T]` and `v`, `out` `[T, B, D]`.
pub fn attention_mix(d: AttentionDims, probs: &[f32], v: &[f32], out: &mut [f32]) -> Result<()> {
    const K: &str = "attention_mix";
    check_sizes(K, &d, &[("v", v), ("out", &*out)], &[("probs", probs)])?;
    let (steps, dh) = (d.steps, d.head_dim);
    for p in 0..d.pairs() {
        for i in 0..steps {
            let w = &probs[(p * steps + i) * steps..][..steps];
            let o = &mut out[head(&d, i, p)..][..dh];
            for (f, o) in o.iter_mut().enumerate() {
                *o = (0..steps).map(|j| w[j] * v[head(&d, j, p) + f]).sum();
            }
        }
    }
    Ok(())
}

/// The gradient of [`attention_mix`]: `dprobs[b, h, i, j] = dout_i · v_j` (head `h` of row
/// `b`, summed over its features) and `dv[j, b, head h] = Σ_i probs[b, h, i, j] ·
/// dout[i, b, head h]` (summed in query order).
pub fn attention_mix_backward(
    d: AttentionDims,
    (probs, v, dout): (&[f32], &[f32], &[f32]),
    dprobs: &mut [f32],
    dv: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_mix_backward";
    let seqs = [("v", v), ("dout", dout), ("dv", &*dv)];
    check_sizes(K, &d, &seqs, &[("probs", probs), ("dprobs", &*dprobs)])?;
    let (steps, dh) = (d.steps, d.head_dim);
    for p in 0..d.pairs() {
        for i in 0..steps {
            let g = &dout[head(&d, i, p)..][..dh];
            for j in 0..steps {
                let v_j = &v[head(&d, j, p)..][..dh];
                dprobs[(p * steps + i) * steps + j] = g.iter().zip(v_j).map(|(a, b)| a * b).sum();
            }
        }
        for j in 0..steps {
            let o = &mut dv[head(&d, j, p)..][..dh];
            for (f, o) in o.iter_mut().enumerate() {
                *o = (0..steps)
                    .map(|i| probs[(p * steps + i) * steps + j] * dout[head(&d, i, p) + f])
                    .sum();
            }
        }
    }
    Ok(())
}

impl<'a> AttentionKernels for HostKernels<'a> {
    fn attention_scores(
        &mut self,
        d: AttentionDims,
        causal: bool,
        i: AttentionScoresInputs<Self::In>,
        o: AttentionScoresOutputs<Self::Out>,
    ) -> Result<()> {
        let token = gemm_fast::simd();
        fast::attention_scores(token, d, causal, i.lengths, (i.q, i.k), o.probs)
    }

    fn attention_scores_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionScoresBackwardInputs<Self::In>,
        o: AttentionScoresBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        let token = gemm_fast::simd();
        let inputs = (i.q, i.k, i.probs, i.dprobs);
        fast::attention_scores_backward(token, d, inputs, o.dq, o.dk)
    }

    fn attention_mix(
        &mut self,
        d: AttentionDims,
        i: AttentionMixInputs<Self::In>,
        o: AttentionMixOutputs<Self::Out>,
    ) -> Result<()> {
        fast::attention_mix(gemm_fast::simd(), d, i.probs, i.v, o.out)
    }

    fn attention_mix_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionMixBackwardInputs<Self::In>,
        o: AttentionMixBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        let inputs = (i.probs, i.v, i.dout);
        fast::attention_mix_backward(gemm_fast::simd(), d, inputs, o.dprobs, o.dv)
    }
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
