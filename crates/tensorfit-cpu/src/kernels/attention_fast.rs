//! The fast path of the attention kernels (`attention.rs` is the reference they are
//! tested against), which the backend runs.
//!
//! Per `(b, h)` pair every product is a small GEMM (`[T, Dh] · [Dh, T]` for the scores,
//! `[T, T] · [T, Dh]` for the mix and the gradients): each runs on one thread through
//! `gemm_fast`'s packed micro-kernels where the CPU has AVX-512, else through
//! matrixmultiply (ndarray's `general_mat_mul`), and the pairs are spread over the kernel
//! threads (`threads.rs`). A head of a `[T, B, D]` tensor is read in place as a strided
//! `[T, Dh]` matrix (rows `B·D` apart; the GEMM packs what it does not read in place); a
//! head it writes is formed in a small buffer of the task and copied to its `T` rows of
//! `Dh` features, which `heads_mut` hands each task as slices of its own. The weights'
//! softmax is fused after the product, row by row, with `fastmath::exp` (vectorised
//! with AVX-512 where present). Every sum of one pair is made by one task in a fixed
//! order, so the results do not depend on the number of threads; they differ from the
//! reference's by rounding (the GEMM's FMA chains, the exponential within 2 ulp).
//!
//! A row of `L_b < T` steps multiplies only its `L_b` keys' columns of the scores.

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use tensorfit_core::{AttentionDims, Result};

use super::attention::{check_sizes, key_ends};
use super::fastmath::{exp, Fused, MulAdd, Separate};
use super::gemm_fast::{self, vectorize, MatRef, PackedB, Token};
use crate::{backend_error, threads};

/// Pair `p`'s head of the `[T, B, D]` tensor `x` as a `[T, Dh]` matrix (a view).
fn head_mat<'a>(d: &AttentionDims, x: &'a [f32], p: usize) -> MatRef<'a> {
    MatRef {
        data: &x[p * d.head_dim..],
        rows: d.steps,
        cols: d.head_dim,
        row_stride: d.pairs() * d.head_dim,
        col_stride: 1,
    }
}

/// Each pair's rows of the `[T, B, D]` tensor `x`: `heads[p][t]` is pair `p`'s `Dh`
/// features of step `t`, disjoint slices that the pairs' tasks write.
fn heads_mut<'a>(d: &AttentionDims, x: &'a mut [f32]) -> Vec<Vec<&'a mut [f32]>> {
    let pairs = d.pairs();
    let mut heads: Vec<Vec<&mut [f32]>> = (0..pairs).map(|_| Vec::with_capacity(d.steps)).collect();
    for (n, row) in x.chunks_exact_mut(d.head_dim).enumerate() {
        heads[n % pairs].push(row);
    }
    heads
}

/// Copies the `[T, Dh]` matrix `c` to a pair's rows.
fn scatter(c: &[f32], rows: &mut [&mut [f32]]) {
    let width = c.len() / rows.len().max(1);
    for (row, src) in rows.iter_mut().zip(c.chunks_exact(width.max(1))) {
        row.copy_from_slice(src);
    }
}

/// `c = a · b` (`c` row-major `[a.rows, b.cols]`, overwritten) on this thread.
fn product(token: Option<Token>, a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32]) -> Result<()> {
    if let Some(token) = token {
        gemm_fast::gemm_packed_serial(token, a, &PackedB::new(b), 0.0, None, c);
        return Ok(());
    }
    let (a, b) = (view(a)?, view(b)?);
    let mut c = ArrayViewMut2::from_shape((a.nrows(), b.ncols()), c)
        .map_err(|e| backend_error(format!("attention: {e}")))?;
    ndarray::linalg::general_mat_mul(1.0, &a, &b, 0.0, &mut c);
    Ok(())
}

/// `m` as an ndarray view.
fn view(m: MatRef<'_>) -> Result<ArrayView2<'_, f32>> {
    let shape = (m.rows, m.cols).strides((m.row_stride, m.col_stride));
    ArrayView2::from_shape(shape, m.data).map_err(|e| backend_error(format!("attention: {e}")))
}

/// Runs `f` for every item on the kernel threads; `f` runs compiled for the token's
/// target features where there is one.
fn per_pair<T: Send>(
    token: Option<Token>,
    items: Vec<T>,
    f: impl Fn(T) -> Result<()> + Sync + Send,
) -> Result<()> {
    threads::try_for_each(items, |item| {
        vectorize(
            token,
            #[inline(always)]
            || f(item),
        )
    })
}

/// The softmax of the first `n` scores of `row` (raw dot products, scaled by `scale`
/// after the row maximum is subtracted); the rest of the row 0. Sums in 16 lanes.
#[inline(always)]
fn softmax_row<M: MulAdd>(row: &mut [f32], n: usize, scale: f32) {
    let (live, masked) = row.split_at_mut(n);
    masked.fill(0.0);
    if live.is_empty() {
        return;
    }
    let max = live.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut lanes = [0.0f32; 16];
    let mut chunks = live.chunks_exact_mut(16);
    for chunk in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(chunk.iter_mut()) {
            *v = exp::<M>((*v - max) * scale);
            *l += *v;
        }
    }
    for (l, v) in lanes.iter_mut().zip(chunks.into_remainder()) {
        *v = exp::<M>((*v - max) * scale);
        *l += *v;
    }
    let inv = 1.0 / lanes.iter().sum::<f32>();
    live.iter_mut().for_each(|v| *v *= inv);
}

/// [`super::attention::attention_scores`] on the fast path: per pair, the scores of its
/// row's `L_b` keys as one GEMM, then each row's softmax.
pub fn attention_scores(
    token: Option<Token>,
    d: AttentionDims,
    causal: bool,
    lengths: Option<&[f32]>,
    (q, k): (&[f32], &[f32]),
    probs: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_scores";
    check_sizes(K, &d, &[("q", q), ("k", k)], &[("probs", probs)])?;
    let ends = key_ends(K, &d, lengths)?;
    let (steps, scale) = (d.steps, d.scale());
    if steps == 0 || d.pairs() == 0 {
        return Ok(());
    }
    let items: Vec<_> = probs.chunks_exact_mut(steps * steps).enumerate().collect();
    per_pair(
        token,
        items,
        #[inline(always)]
        |(p, block)| {
            let keys = ends[p / d.heads];
            if keys == 0 {
                block.fill(0.0);
                return Ok(());
            }
            // The scores of the row's keys, [T, keys], then each row spread to its place
            // (last first: row i moves from i·keys to i·T, never onto a row not yet moved).
            let k_head = MatRef {
                rows: keys,
                ..head_mat(&d, k, p)
            };
            product(
                token,
                head_mat(&d, q, p),
                k_head.t(),
                &mut block[..steps * keys],
            )?;
            if keys < steps {
                for i in (1..steps).rev() {
                    block.copy_within(i * keys..(i + 1) * keys, i * steps);
                }
            }
            for (i, row) in block.chunks_exact_mut(steps).enumerate() {
                let n = d.keys(causal, i, keys);
                match token {
                    Some(_) => softmax_row::<Fused>(row, n, scale),
                    None => softmax_row::<Separate>(row, n, scale),
                }
            }
            Ok(())
        },
    )
}

/// [`super::attention::attention_scores_backward`] on the fast path: per pair,
/// `ds = p ∘ (dp − rowsum(p ∘ dp)) / sqrt(Dh)`, then `dq = ds · k` and `dk = dsᵀ · q` as
/// GEMMs.
pub fn attention_scores_backward(
    token: Option<Token>,
    d: AttentionDims,
    (q, k, probs, dprobs): (&[f32], &[f32], &[f32], &[f32]),
    dq: &mut [f32],
    dk: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_scores_backward";
    let seqs = [("q", q), ("k", k), ("dq", &*dq), ("dk", &*dk)];
    check_sizes(K, &d, &seqs, &[("probs", probs), ("dprobs", dprobs)])?;
    let (steps, dh, scale) = (d.steps, d.head_dim, d.scale());
    if steps == 0 || d.pairs() == 0 {
        return Ok(());
    }
    let block = steps * steps;
    let items: Vec<_> = heads_mut(&d, dq)
        .into_iter()
        .zip(heads_mut(&d, dk))
        .enumerate()
        .collect();
    per_pair(
        token,
        items,
        #[inline(always)]
        |(p, (mut dq_rows, mut dk_rows))| {
            let (pb, dpb) = (&probs[p * block..][..block], &dprobs[p * block..][..block]);
            let mut ds = vec![0.0f32; block];
            for ((ds_i, p_i), dp_i) in ds
                .chunks_exact_mut(steps)
                .zip(pb.chunks_exact(steps))
                .zip(dpb.chunks_exact(steps))
            {
                let r = dot(p_i, dp_i);
                for ((s, &w), &g) in ds_i.iter_mut().zip(p_i).zip(dp_i) {
                    *s = w * (g - r) * scale;
                }
            }
            let ds_mat = MatRef::row_major(&ds, steps, steps);
            let mut c = vec![0.0f32; steps * dh];
            product(token, ds_mat, head_mat(&d, k, p), &mut c)?;
            scatter(&c, &mut dq_rows);
            product(token, ds_mat.t(), head_mat(&d, q, p), &mut c)?;
            scatter(&c, &mut dk_rows);
            Ok(())
        },
    )
}

/// `Σ a·b` in 16 lanes (a fixed order that vectorises).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((l, &x), &y) in lanes.iter_mut().zip(x).zip(y) {
            *l += x * y;
        }
    }
    for ((l, &x), &y) in lanes.iter_mut().zip(ra).zip(rb) {
        *l += x * y;
    }
    lanes.iter().sum()
}

/// [`super::attention::attention_mix`] on the fast path: per pair, `out = probs · v` as
/// one GEMM.
pub fn attention_mix(
    token: Option<Token>,
    d: AttentionDims,
    probs: &[f32],
    v: &[f32],
    out: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_mix";
    check_sizes(K, &d, &[("v", v), ("out", &*out)], &[("probs", probs)])?;
    let (steps, dh) = (d.steps, d.head_dim);
    if steps == 0 || d.pairs() == 0 {
        return Ok(());
    }
    let block = steps * steps;
    let items: Vec<_> = heads_mut(&d, out).into_iter().enumerate().collect();
    per_pair(
        token,
        items,
        #[inline(always)]
        |(p, mut rows)| {
            let weights = MatRef::row_major(&probs[p * block..][..block], steps, steps);
            let mut c = vec![0.0f32; steps * dh];
            product(token, weights, head_mat(&d, v, p), &mut c)?;
            scatter(&c, &mut rows);
            Ok(())
        },
    )
}

/// [`super::attention::attention_mix_backward`] on the fast path: per pair,
/// `dprobs = dout · vᵀ` and `dv = probsᵀ · dout` as GEMMs.
pub fn attention_mix_backward(
    token: Option<Token>,
    d: AttentionDims,
    (probs, v, dout): (&[f32], &[f32], &[f32]),
    dprobs: &mut [f32],
    dv: &mut [f32],
) -> Result<()> {
    const K: &str = "attention_mix_backward";
    let seqs = [("v", v), ("dout", dout), ("dv", &*dv)];
    check_sizes(K, &d, &seqs, &[("probs", probs), ("dprobs", &*dprobs)])?;
    let (steps, dh) = (d.steps, d.head_dim);
    if steps == 0 || d.pairs() == 0 {
        return Ok(());
    }
    let block = steps * steps;
    let items: Vec<_> = dprobs
        .chunks_exact_mut(block)
        .zip(heads_mut(&d, dv))
        .enumerate()
        .collect();
    per_pair(
        token,
        items,
        #[inline(always)]
        |(p, (dp, mut dv_rows))| {
            let g = head_mat(&d, dout, p);
            product(token, g, head_mat(&d, v, p).t(), dp)?;
            let weights = MatRef::row_major(&probs[p * block..][..block], steps, steps);
            let mut c = vec![0.0f32; steps * dh];
            product(token, weights.t(), g, &mut c)?;
            scatter(&c, &mut dv_rows);
            Ok(())
        },
    )
}
