//! The optimizer step: `adam_update`, one Adam step with PyTorch's formula.
//!
//! The bias corrections depend on the step count, which the host knows; it folds them
//! into scalars written to the device each step (`lr / (1 - β1^t)` and
//! `sqrt(1 - β2^t)`), so the kernel needs no counter and the graph stays the same from
//! step to step. `weight_decay` is L2 added to the gradient (PyTorch's `Adam`); AdamW's
//! decoupled decay is the third scalar, `1 - lr·decay`, which scales the parameter.

use rayon::prelude::*;
use tensorfit_core::{AdamParams, Result};

use super::gemm_fast::{self, vectorize};
use super::{check_len, PARALLEL_MIN_ELEMENTS};

/// Elements per parallel task.
const CHUNK: usize = 1 << 14;

/// One task's `((param, grad), (m, v))`.
type Chunk<'a> = ((&'a mut [f32], &'a [f32]), (&'a mut [f32], &'a mut [f32]));

/// Update op: with `(s0, s1, s2) = scalars`,
/// `g = grad + weight_decay·param`, `param *= s2`, `m = β1·m + (1-β1)·g`, `v = β2·v + (1-β2)·g²`,
/// `param -= s0 · m / (sqrt(v)/s1 + eps)`. Large tensors are split across threads, and
/// on AVX-512 the loop runs with 16 lanes (the same operations, so the same bits).
pub fn adam_update(
    p: AdamParams,
    grad: &[f32],
    scalars: &[f32],
    param: &mut [f32],
    m: &mut [f32],
    v: &mut [f32],
) -> Result<()> {
    const K: &str = "adam_update";
    check_len(K, "scalars", scalars, 3)?;
    check_len(K, "param", param, grad.len())?;
    check_len(K, "m", m, grad.len())?;
    check_len(K, "v", v, grad.len())?;
    let token = gemm_fast::simd();
    let (step_size, bias2_sqrt, decay) = (scalars[0], scalars[1], scalars[2]);
    let update = |((w, dw), (m, v)): Chunk<'_>| {
        vectorize(
            token,
            #[inline(always)]
            || {
                let state = m.iter_mut().zip(v.iter_mut());
                for ((w, &dw), (m, v)) in w.iter_mut().zip(dw).zip(state) {
                    let g = dw + p.weight_decay * *w;
                    *w *= decay;
                    *m = p.beta1 * *m + (1.0 - p.beta1) * g;
                    *v = p.beta2 * *v + (1.0 - p.beta2) * g * g;
                    *w -= step_size * *m / (v.sqrt() / bias2_sqrt + p.eps);
                }
            },
        )
    };
    if grad.len() < PARALLEL_MIN_ELEMENTS || crate::threads::inline() {
        update(((param, grad), (m, v)));
    } else {
        let weights = param.par_chunks_mut(CHUNK).zip(grad.par_chunks(CHUNK));
        let state = m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK));
        weights.zip(state).for_each(update);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_step_matches_pytorch_by_hand() {
        // Step 1, lr 0.1: s0 = 0.1 / (1 - 0.9), s1 = sqrt(1 - 0.999).
        let p = AdamParams {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.5,
        };
        let s = [0.1 / (1.0 - 0.9f32), (1.0 - 0.999f32).sqrt(), 1.0];
        let (mut w, mut m, mut v) = ([2.0f32, -1.0], [0.0; 2], [0.0; 2]);
        adam_update(p, &[0.3, 0.0], &s, &mut w, &mut m, &mut v).unwrap();
        // g = [0.3 + 1.0, 0 - 0.5]; the first step moves each weight by lr·sign(g).
        assert!(
            (m[0] - 0.13).abs() < 1e-6 && (m[1] + 0.05).abs() < 1e-6,
            "{m:?}"
        );
        assert!((v[0] - 0.001 * 1.69).abs() < 1e-7 && (v[1] - 0.001 * 0.25).abs() < 1e-7);
        assert!(
            (w[0] - 1.9).abs() < 1e-5 && (w[1] + 0.9).abs() < 1e-5,
            "{w:?}"
        );
    }

    #[test]
    fn the_decay_scalar_shrinks_the_weight_before_the_step_as_adamw_does() {
        // AdamW, lr 0.1, decay 0.5: the weight is first scaled by 1 - 0.05, then moves by
        // lr·sign(g) on the first step.
        let p = AdamParams {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let s = [0.1 / (1.0 - 0.9f32), (1.0 - 0.999f32).sqrt(), 0.95];
        let (mut w, mut m, mut v) = ([2.0f32], [0.0; 1], [0.0; 1]);
        adam_update(p, &[0.3], &s, &mut w, &mut m, &mut v).unwrap();
        assert!((w[0] - (2.0 * 0.95 - 0.1)).abs() < 1e-5, "{w:?}");
    }
}
