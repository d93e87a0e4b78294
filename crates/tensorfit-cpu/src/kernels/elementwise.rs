//! Elementwise kernels and the small data-movement ops: `binary`, `activation_forward`,
//! `activation_backward`, `sum_to_shape`, `fill`, `slice_time`, `scatter_time`, `copy`.
//!
//! These are memory-bound single passes; plain loops over `chunks_exact` let the compiler
//! vectorise them, and on a CPU they are cheap next to the GEMMs, so they stay
//! single-threaded and simple. Broadcasting is the one kind the op set has: the second
//! operand's shape is a *suffix* of the first's, so it repeats over whole contiguous
//! chunks of the first (a bias row added to every row of a batch).

use tensorfit_core::{Activation, BinaryOp, Result};

use rayon::prelude::*;

use super::gemm_fast::{self, vectorize};
use super::{check_len, PARALLEL_MIN_ELEMENTS};
use crate::backend_error;

/// `out = a ∘ b`, with `b` repeated over `a`'s leading dimensions (`b.len()` divides
/// `a.len()`).
pub fn binary(op: BinaryOp, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
    check_len("binary", "out", out, a.len())?;
    if b.is_empty() || a.len() % b.len() != 0 {
        if a.is_empty() {
            return Ok(());
        }
        return Err(backend_error(format!(
            "binary: b ({} elements) does not tile a ({} elements)",
            b.len(),
            a.len()
        )));
    }
    for (out_chunk, a_chunk) in out.chunks_exact_mut(b.len()).zip(a.chunks_exact(b.len())) {
        for ((o, &x), &y) in out_chunk.iter_mut().zip(a_chunk).zip(b) {
            *o = op.apply(x, y);
        }
    }
    Ok(())
}

/// `y = f(x)`.
pub fn activation_forward(f: Activation, x: &[f32], y: &mut [f32]) -> Result<()> {
    check_len("activation_forward", "y", y, x.len())?;
    for (y, &x) in y.iter_mut().zip(x) {
        *y = f.apply(x);
    }
    Ok(())
}

/// `dx = dy · f'(x)`, with `f'` computed from the forward output `y`, or from the input
/// `x` for an activation that [`needs_input`](Activation::needs_input) (which then must
/// be given, and otherwise must not be).
pub fn activation_backward(
    f: Activation,
    y: &[f32],
    x: Option<&[f32]>,
    dy: &[f32],
    dx: &mut [f32],
) -> Result<()> {
    const K: &str = "activation_backward";
    check_len(K, "dy", dy, y.len())?;
    check_len(K, "dx", dx, y.len())?;
    let from = match (f.needs_input(), x) {
        (true, Some(x)) => {
            check_len(K, "x", x, y.len())?;
            x
        }
        (false, None) => y,
        (needs, _) => {
            let what = if needs { "needs" } else { "takes no" };
            return Err(backend_error(format!("{K}: {} {what} x", f.name())));
        }
    };
    for ((dx, &v), &dy) in dx.iter_mut().zip(from).zip(dy) {
        *dx = dy * f.derivative(v);
    }
    Ok(())
}

/// `out[j] = Σ_i x[i, j]`: sums `x` over the leading dimensions that `out` lacks.
///
/// Each sum is accumulated in f64 over the rows in order (bias gradients sum millions
/// of rows, where f32 loses digits), so the result does not depend on the thread count;
/// threads take blocks of columns.
pub fn sum_to_shape(x: &[f32], out: &mut [f32]) -> Result<()> {
    const COLUMNS: usize = 64;
    out.fill(0.0);
    if out.is_empty() || x.len() % out.len() != 0 {
        if x.is_empty() {
            return Ok(());
        }
        return Err(backend_error(format!(
            "sum_to_shape: {} elements do not reduce to {}",
            x.len(),
            out.len()
        )));
    }
    let width = out.len();
    let token = gemm_fast::simd();
    let sum_block = |(block, out): (usize, &mut [f32])| {
        let j0 = block * COLUMNS;
        let mut acc = [0.0f64; COLUMNS];
        vectorize(
            token,
            #[inline(always)]
            || {
                for row in x.chunks_exact(width) {
                    for (a, &v) in acc.iter_mut().zip(&row[j0..j0 + out.len()]) {
                        *a += f64::from(v);
                    }
                }
            },
        );
        for (o, a) in out.iter_mut().zip(acc) {
            *o = a as f32;
        }
    };
    if x.len() < PARALLEL_MIN_ELEMENTS || crate::threads::inline() {
        out.chunks_mut(COLUMNS).enumerate().for_each(sum_block);
    } else {
        out.par_chunks_mut(COLUMNS).enumerate().for_each(sum_block);
    }
    Ok(())
}

/// Every element of `out` set to `value`.
pub fn fill(value: f32, out: &mut [f32]) -> Result<()> {
    out.fill(value);
    Ok(())
}

/// The block of time step `t` of `x` `[T, B, F]` into `out` `[B, F]`.
pub fn slice_time(t: usize, x: &[f32], out: &mut [f32]) -> Result<()> {
    let step = out.len();
    let block = time_block(t, step, x.len(), "slice_time")?;
    out.copy_from_slice(&x[block]);
    Ok(())
}

/// `out` `[steps, B, F]` zero except `out[t] = x`.
pub fn scatter_time(t: usize, x: &[f32], out: &mut [f32]) -> Result<()> {
    let step = x.len();
    let block = time_block(t, step, out.len(), "scatter_time")?;
    out.fill(0.0);
    out[block].copy_from_slice(x);
    Ok(())
}

/// `dst = src` (an update op: `dst` is an existing tensor).
pub fn copy(src: &[f32], dst: &mut [f32]) -> Result<()> {
    check_len("copy", "dst", dst, src.len())?;
    dst.copy_from_slice(src);
    Ok(())
}

/// The element range of step `t` in a sequence of `seq_len` elements cut in steps of
/// `step`.
fn time_block(
    t: usize,
    step: usize,
    seq_len: usize,
    kernel: &str,
) -> Result<std::ops::Range<usize>> {
    let start = t.checked_mul(step);
    match start.and_then(|s| s.checked_add(step)) {
        Some(end) if end <= seq_len && (step == 0 || seq_len % step == 0) => Ok(end - step..end),
        _ => Err(backend_error(format!(
            "{kernel}: step {t} of {step} elements outside a sequence of {seq_len}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_sums_over_many_rows_keep_f32_precision() {
        // 2^18 rows of 0.1 and 1/3 in 66 columns (two blocks of 64, on threads); an f32
        // running sum would be off by ~1e-3 relative, the f64 one is exact to the f32
        // result's rounding.
        let (rows, width) = (1 << 18, 66);
        let x: Vec<f32> = (0..rows * width)
            .map(|i| if i % 2 == 0 { 0.1 } else { 1.0 / 3.0 })
            .collect();
        let mut out = vec![0.0; width];
        sum_to_shape(&x, &mut out).unwrap();
        for (j, &o) in out.iter().enumerate() {
            let v = if j % 2 == 0 { 0.1f32 } else { 1.0 / 3.0 };
            let exact = f64::from(v) * rows as f64;
            let rel = (f64::from(o) - exact).abs() / exact;
            assert!(rel <= 1e-7, "column {j}: {o} vs {exact} (relative {rel:e})");
        }
    }

    #[test]
    fn binary_broadcasts_a_suffix() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut out = [0.0; 6];
        binary(BinaryOp::Add, &a, &[10.0, 20.0, 30.0], &mut out).unwrap();
        assert_eq!(out, [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
        binary(BinaryOp::Mul, &a, &[2.0], &mut out).unwrap();
        assert_eq!(out, [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
        binary(BinaryOp::Mul, &a, &a, &mut out).unwrap();
        assert_eq!(out, [1.0, 4.0, 9.0, 16.0, 25.0, 36.0]);
        assert!(binary(BinaryOp::Add, &a, &[1.0; 4], &mut out).is_err());
        assert!(binary(BinaryOp::Add, &a, &[], &mut out).is_err());
    }

    #[test]
    fn sum_to_shape_sums_leading_dimensions() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut out = [9.0; 3];
        sum_to_shape(&x, &mut out).unwrap();
        assert_eq!(out, [5.0, 7.0, 9.0]);
        let mut out = [9.0; 1];
        sum_to_shape(&x, &mut out).unwrap();
        assert_eq!(out, [21.0]);
    }

    #[test]
    fn slice_and_scatter_time_are_inverse() {
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect(); // [3, 2, 2]
        let mut step = [0.0; 4];
        slice_time(1, &x, &mut step).unwrap();
        assert_eq!(step, [4.0, 5.0, 6.0, 7.0]);
        let mut seq = [1.0; 12];
        scatter_time(2, &step, &mut seq).unwrap();
        assert_eq!(seq[..8], [0.0; 8]);
        assert_eq!(seq[8..], step);
        assert!(slice_time(3, &x, &mut step).is_err());
        assert!(scatter_time(3, &step, &mut seq).is_err());
    }

    #[test]
    fn activations_and_their_derivatives() {
        let x = [-2.0, -0.5, 0.0, 0.5, 2.0];
        for f in [
            Activation::Identity,
            Activation::Relu,
            Activation::Tanh,
            Activation::Sigmoid,
            Activation::Gelu,
        ] {
            let mut y = [0.0; 5];
            activation_forward(f, &x, &mut y).unwrap();
            let mut dx = [0.0; 5];
            let input = f.needs_input().then_some(&x[..]);
            activation_backward(f, &y, input, &[1.0; 5], &mut dx).unwrap();
            // x is given exactly when the derivative needs it.
            let wrong = (!f.needs_input()).then_some(&x[..]);
            assert!(activation_backward(f, &y, wrong, &[1.0; 5], &mut dx.clone()).is_err());
            for k in [0, 1, 3, 4] {
                let h = 1e-3f32;
                let fd = (f.apply(x[k] + h) - f.apply(x[k] - h)) / (2.0 * h);
                assert!(
                    (fd - dx[k]).abs() < 1e-3,
                    "{} at {}: {fd} vs {}",
                    f.name(),
                    x[k],
                    dx[k]
                );
            }
        }
    }
}
