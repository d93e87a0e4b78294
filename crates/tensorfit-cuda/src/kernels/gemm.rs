//! Matrix products: the `matmul` kernel, and the GEMM helper the LSTM kernels use, both
//! through cuBLAS (see `blas.rs` for the row-major to column-major mapping).
//!
//! Degenerate sizes are handled here, as the CPU reference handles them: an empty output
//! is nothing to do, and an empty inner dimension is `c = beta·c` (so `beta = 0` zeroes
//! `c`), which cuBLAS is never asked to do.

use tensorfit_core::Result;

use super::{int, Gpu};
use crate::backend_error;
use crate::driver::DevPtr;

/// `c = alpha·op(a)·op(b) + beta·c`, row-major: `a` is stored `[m, k]` (`[k, m]` if
/// `trans_a`), `b` is stored `[k, n]` (`[n, k]` if `trans_b`), `c` is `[m, n]`. `beta` is 0
/// or 1 (all the backend uses).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    g: &Gpu<'_>,
    (trans_a, trans_b): (bool, bool),
    (m, n, k): (usize, usize, usize),
    alpha: f32,
    a: DevPtr,
    b: DevPtr,
    beta: f32,
    c: DevPtr,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        return if beta == 0.0 {
            g.fill(c, 0.0, m * n)
        } else {
            Ok(())
        };
    }
    let dims = (int("gemm m", m)?, int("gemm n", n)?, int("gemm k", k)?);
    g.blas
        .sgemm(trans_a, trans_b, dims, alpha, a, b, beta, c)
        .map_err(|e| backend_error(format!("cuBLAS sgemm {m}x{n}x{k} failed: {e:?}")))
}

/// `c = op(a) · op(b)` where `op` transposes when asked: `a` is `[M, K]` (`[K, M]` if
/// `trans_a`), `b` is `[K, N]` (`[N, K]` if `trans_b`), `c` is `[M, N]`.
pub fn matmul(
    g: &Gpu<'_>,
    (a, a_dims): (DevPtr, [usize; 2]),
    (b, b_dims): (DevPtr, [usize; 2]),
    (trans_a, trans_b): (bool, bool),
    c: DevPtr,
) -> Result<()> {
    let (m, k) = if trans_a {
        (a_dims[1], a_dims[0])
    } else {
        (a_dims[0], a_dims[1])
    };
    let n = if trans_b { b_dims[0] } else { b_dims[1] };
    gemm(g, (trans_a, trans_b), (m, n, k), 1.0, a, b, 0.0, c)
}
