//! Matrix products: the `matmul` kernel, and the GEMM helper the LSTM kernels use.
//!
//! On a CPU with AVX-512, [`gemm`] hands the product to the packed micro-kernels of
//! `gemm_fast/` (same results up to summation order; see that file for why and the
//! measurements). Everywhere else — and as the readable reference — every product goes
//! through `ndarray::linalg::general_mat_mul`, which calls
//! matrixmultiply's sgemm with the views' strides, on blocks
//! of rows split over rayon's threads (not matrixmultiply's own threads: kernels run
//! only on the kernel pool, whose threads flush subnormals to zero; see `threads.rs`). A transpose is therefore free: `.t()` swaps the strides of a view, nothing is
//! copied. Sub-blocks (one time step of a sequence) are contiguous sub-slices viewed as
//! their own matrices. Dimensions are checked before the call, because ndarray panics on
//! a mismatch and a backend must return an error instead.

use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;
use tensorfit_core::Result;

use super::gemm_fast::{self, MatRef, PackedB};
use crate::backend_error;

/// `view` as a [`MatRef`] when its elements are one contiguous slice with non-negative
/// strides (every view the kernels make is), else `None`.
pub fn as_mat_ref<'a>(view: &ArrayView2<'a, f32>) -> Option<MatRef<'a>> {
    let strides = view.strides();
    let (rs, cs) = (
        usize::try_from(strides[0]).ok()?,
        usize::try_from(strides[1]).ok()?,
    );
    let data = view.to_slice_memory_order()?;
    let m = MatRef {
        data,
        rows: view.nrows(),
        cols: view.ncols(),
        row_stride: rs,
        col_stride: cs,
    };
    m.in_bounds().then_some(m)
}

/// `data` as a row-major `[rows, cols]` matrix; `data` must have exactly that many elements.
pub fn mat(data: &[f32], rows: usize, cols: usize) -> Result<ArrayView2<'_, f32>> {
    if rows.checked_mul(cols) != Some(data.len()) {
        return Err(backend_error(format!(
            "gemm: {} elements viewed as a [{rows}, {cols}] matrix",
            data.len()
        )));
    }
    ArrayView2::from_shape((rows, cols), data).map_err(|e| backend_error(format!("gemm: {e}")))
}

/// `data` as a mutable row-major `[rows, cols]` matrix.
pub fn mat_mut(data: &mut [f32], rows: usize, cols: usize) -> Result<ArrayViewMut2<'_, f32>> {
    if rows.checked_mul(cols) != Some(data.len()) {
        return Err(backend_error(format!(
            "gemm: {} elements viewed as a [{rows}, {cols}] matrix",
            data.len()
        )));
    }
    ArrayViewMut2::from_shape((rows, cols), data).map_err(|e| backend_error(format!("gemm: {e}")))
}

/// `c = alpha · a · b + beta · c`. With `beta = 0`, `c`'s old values are ignored (even
/// NaN), as in BLAS.
pub fn gemm(
    alpha: f32,
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    c: &mut ArrayViewMut2<'_, f32>,
) -> Result<()> {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    if k != k2 || c.dim() != (m, n) {
        return Err(backend_error(format!(
            "gemm: [{m}, {k}] · [{k2}, {n}] into {:?}",
            c.dim()
        )));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // An empty sum: c = beta · c. (Done here so that no zero-sized view, whose
        // strides ndarray sets to 0, reaches sgemm.)
        if beta == 0.0 {
            c.fill(0.0);
        } else {
            c.mapv_inplace(|v| beta * v);
        }
        return Ok(());
    }
    if alpha == 1.0 {
        if let (Some(token), Some(a_ref), Some(b_ref)) =
            (gemm_fast::simd(), as_mat_ref(&a), as_mat_ref(&b))
        {
            if let Some(c_slice) = c.as_slice_mut() {
                // Summed over slices of `k`: a packed copy of all of `b` grows with `k`,
                // and a weight gradient's `b` is a whole sequence of activations
                // ([T·B, H]: 25 MiB at T = 100, B = 256, H = 256), allocated at every
                // step outside the memory plan. Slices of whole `KC` blocks add into `c`
                // in the order one product does.
                let rows = gemm_fast::packed_b_rows(n);
                for (i, k0) in (0..k).step_by(rows).enumerate() {
                    let kc = rows.min(k - k0);
                    let a_k = a_ref.t().rows_from(k0, kc).t();
                    let b_k = PackedB::new(b_ref.rows_from(k0, kc));
                    let beta = if i == 0 { beta } else { 1.0 };
                    gemm_fast::gemm_packed(token, a_k, &b_k, beta, None, c_slice);
                }
                return Ok(());
            }
        }
    }
    general_mat_mul_by_rows(alpha, a, b, beta, c);
    Ok(())
}

/// Below this many multiply-adds a reference product runs on one thread.
pub(crate) const PARALLEL_MIN_MULADDS: usize = 1 << 18;

/// `general_mat_mul` on blocks of rows of `a` and `c`, a few blocks per thread. Each
/// element of `c` is summed in the same order whatever the split, so the result does not
/// depend on the thread count.
fn general_mat_mul_by_rows(
    alpha: f32,
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    beta: f32,
    c: &mut ArrayViewMut2<'_, f32>,
) {
    let (m, k) = a.dim();
    let threads = crate::threads::available();
    if threads == 1 || m < 2 || m.saturating_mul(k).saturating_mul(b.ncols()) < PARALLEL_MIN_MULADDS
    {
        general_mat_mul(alpha, &a, &b, beta, c);
        return;
    }
    let rows = m.div_ceil(threads * 4);
    let a_blocks: Vec<_> = a.axis_chunks_iter(Axis(0), rows).collect();
    let c_blocks: Vec<_> = c.axis_chunks_iter_mut(Axis(0), rows).collect();
    a_blocks
        .into_par_iter()
        .zip(c_blocks)
        .for_each(|(a, mut c)| general_mat_mul(alpha, &a, &b, beta, &mut c));
}

/// `c = op(a) · op(b)` where `op` transposes when asked: `a` is `[M, K]` (`[K, M]` if
/// `trans_a`), `b` is `[K, N]` (`[N, K]` if `trans_b`), `c` is `[M, N]`.
pub fn matmul(
    a: &[f32],
    a_dims: [usize; 2],
    b: &[f32],
    b_dims: [usize; 2],
    trans_a: bool,
    trans_b: bool,
    c: &mut [f32],
) -> Result<()> {
    let a = mat(a, a_dims[0], a_dims[1])?;
    let b = mat(b, b_dims[0], b_dims[1])?;
    let a = if trans_a { a.reversed_axes() } else { a };
    let b = if trans_b { b.reversed_axes() } else { b };
    let (m, n) = (a.nrows(), b.ncols());
    gemm(1.0, a, b, 0.0, &mut mat_mut(c, m, n)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_testing::{assert_close, Rng, TestRng};

    /// `c[i][j] = Σ_k op(a)[i][k] · op(b)[k][j]`, one element at a time, in f64.
    fn naive(
        a: &[f32],
        b: &[f32],
        (m, k, n): (usize, usize, usize),
        trans_a: bool,
        trans_b: bool,
    ) -> Vec<f64> {
        let at = |i: usize, p: usize| if trans_a { a[p * m + i] } else { a[i * k + p] };
        let bt = |p: usize, j: usize| if trans_b { b[j * k + p] } else { b[p * n + j] };
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| at(i, p) as f64 * bt(p, j) as f64).sum();
            }
        }
        c
    }

    #[test]
    fn matmul_matches_naive_for_all_transposes() {
        let mut rng = Rng::new(7);
        for round in 0..24 {
            let (m, k, n) = (rng.range(1, 13), rng.range(1, 17), rng.range(1, 11));
            let (trans_a, trans_b) = (round % 2 == 1, (round / 2) % 2 == 1);
            let a = rng.signed_vec(m * k);
            let b = rng.signed_vec(k * n);
            let a_dims = if trans_a { [k, m] } else { [m, k] };
            let b_dims = if trans_b { [n, k] } else { [k, n] };
            let mut c = vec![f32::NAN; m * n];
            matmul(&a, a_dims, &b, b_dims, trans_a, trans_b, &mut c).unwrap();
            let want = naive(&a, &b, (m, k, n), trans_a, trans_b);
            let what = format!("matmul {m}x{k}x{n} trans ({trans_a}, {trans_b})");
            assert_close(&what, &c, &want, 1e-5, 1e-5);
        }
    }

    #[test]
    fn a_product_longer_than_one_packed_slice_adds_its_slices_as_one_product_does() {
        let Some(token) = gemm_fast::simd() else {
            eprintln!("skipped: no AVX-512 on this CPU (the sliced path is the packed one)");
            return;
        };
        // A weight gradient's shape: k (rows of the sequence) spans three slices and a
        // part, n is not a multiple of a panel.
        let n = 40;
        let k = 3 * gemm_fast::packed_b_rows(n) + 100;
        let m = 7;
        let mut rng = Rng::new(5);
        let (a, b) = (rng.signed_vec(k * m), rng.signed_vec(k * n));
        let (a_t, b_v) = (
            mat(&a, k, m).unwrap().reversed_axes(),
            mat(&b, k, n).unwrap(),
        );
        let c0 = rng.signed_vec(m * n);
        let mut sliced = c0.clone();
        gemm(1.0, a_t, b_v, 0.5, &mut mat_mut(&mut sliced, m, n).unwrap()).unwrap();
        // The same sum with all of `b` packed at once.
        let (a_ref, b_ref) = (as_mat_ref(&a_t).unwrap(), as_mat_ref(&b_v).unwrap());
        let mut whole = c0;
        gemm_fast::gemm_packed(token, a_ref, &PackedB::new(b_ref), 0.5, None, &mut whole);
        assert_eq!(sliced, whole);
    }

    #[test]
    fn reference_products_split_over_threads_by_rows_match_naive() {
        // alpha != 1 takes the reference path; 301·40·50 multiply-adds are above
        // PARALLEL_MIN_MULADDS, so the rows are split over the threads (an uneven split).
        let (m, k, n) = (301, 40, 50);
        assert!(m * k * n >= PARALLEL_MIN_MULADDS);
        let mut rng = Rng::new(11);
        let (a, b) = (rng.signed_vec(m * k), rng.signed_vec(k * n));
        let mut c = vec![1.0; m * n];
        let (av, bv) = (mat(&a, m, k).unwrap(), mat(&b, k, n).unwrap());
        gemm(0.5, av, bv, 2.0, &mut mat_mut(&mut c, m, n).unwrap()).unwrap();
        let want: Vec<f64> = naive(&a, &b, (m, k, n), false, false)
            .iter()
            .map(|v| 0.5 * v + 2.0)
            .collect();
        assert_close("reference gemm by rows", &c, &want, 1e-5, 1e-5);
    }

    #[test]
    fn gemm_accumulates_with_beta_and_handles_empty_k() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, 0.0, 1.0];
        let mut c = [10.0, 10.0, 10.0, 10.0];
        gemm(
            1.0,
            mat(&a, 2, 2).unwrap(),
            mat(&b, 2, 2).unwrap(),
            1.0,
            &mut mat_mut(&mut c, 2, 2).unwrap(),
        )
        .unwrap();
        assert_eq!(c, [11.0, 12.0, 13.0, 14.0]);
        let mut c = [5.0; 6];
        gemm(
            1.0,
            mat(&[], 2, 0).unwrap(),
            mat(&[], 0, 3).unwrap(),
            0.0,
            &mut mat_mut(&mut c, 2, 3).unwrap(),
        )
        .unwrap();
        assert_eq!(c, [0.0; 6]);
    }

    #[test]
    fn mismatched_dimensions_are_errors_not_panics() {
        let mut c = [0.0; 4];
        assert!(matmul(&[1.0; 6], [2, 3], &[1.0; 6], [2, 3], false, false, &mut c).is_err());
        assert!(matmul(&[1.0; 5], [2, 3], &[1.0; 6], [3, 2], false, false, &mut c).is_err());
        assert!(matmul(&[1.0; 6], [2, 3], &[1.0; 6], [3, 2], false, false, &mut c).is_ok());
    }
}
