//! The fast GEMM path: packed AVX-512 micro-kernels, chosen at run time.
//!
//! Why it exists: matrixmultiply (the portable path in `gemm.rs`) has AVX2/FMA kernels
//! only, which cap it near half of an AVX-512 chip's peak, and the LSTM's per-step
//! products are small and fixed (`[32, 250] · [250, 1000]` for the seed network), where a
//! general library spends much of its time packing and splitting. Measured on the
//! development machine (2 cores, AVX-512, shared): at `32×250×1000` matrixmultiply gave
//! 61–101 GFLOP/s, the `gemm` crate 64–76 (and it has no safe API), this kernel with the
//! weights packed once 130; on the input-projection and weight-gradient shapes the three
//! are within noise of each other (matrixmultiply ≈ this kernel > the `gemm` crate).
//!
//! How: the classic Goto/BLIS structure without any `unsafe`. `B` is packed once into
//! panels of [`NR`] columns per block of [`KC`] rows ([`PackedB`]; the LSTM packs its
//! recurrent weights once per sequence and reuses them at every step). `A` is packed
//! per `MR`-row panel into a stack buffer (no allocation). The micro-kernel keeps an
//! `MR × NR` tile of `C` in 16 zmm registers and does, per `k`, two vector loads of `B`,
//! `MR` broadcasts of `A` and `2·MR` FMAs. SIMD comes from `pulp`: its `V4` type proves
//! at run time that AVX-512 is present and compiles the generic kernel with those target
//! features, through a safe API. A machine without AVX-512 (or not x86-64) gets `None`
//! from [`simd`] and the caller takes the portable path.
//!
//! Summation order: every element of `C` is a sum over `k` in increasing order, one FMA
//! at a time, in blocks of `KC` added into `C`. It does not depend on how rows are split
//! across threads, so results are the same with 1 or N threads.

use rayon::prelude::*;

/// Rows of `B` per packed block (and of `A`'s packed panel): 256 rows of a 32-wide panel
/// are 32 KiB, which stays in L1 while a panel of `A` streams past it.
pub const KC: usize = 256;
/// Columns per packed panel of `B`: two AVX-512 vectors.
pub const NR: usize = 32;
/// Rows of `C` per micro-kernel tile: 8 rows × 2 vectors = 16 accumulators, enough
/// independent FMA chains to cover the FMA latency on two ports.
pub const MR: usize = 8;

/// A read-only matrix with arbitrary (non-negative) strides, so a transpose is free.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// `data` as a row-major `[rows, cols]` matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose (a view: nothing is copied).
    pub fn t(self) -> Self {
        MatRef {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Rows `r0..r0 + rows` of this matrix.
    pub fn rows_from(self, r0: usize, rows: usize) -> Self {
        let start = (r0 * self.row_stride).min(self.data.len());
        MatRef {
            data: &self.data[start..],
            rows,
            ..self
        }
    }

    /// True when every element lies inside `data`.
    pub fn in_bounds(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .zip((self.cols - 1).checked_mul(self.col_stride))
            .and_then(|(a, b)| a.checked_add(b));
        matches!(last, Some(l) if l < self.data.len())
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.row_stride + j * self.col_stride]
    }
}

/// `B` `[K, N]` packed for the micro-kernel: for each block of [`KC`] rows, panel after
/// panel of [`NR`] columns (the last one zero-padded), each panel `[kc, NR]` row-major.
#[derive(Debug, Clone)]
pub struct PackedB {
    data: Vec<f32>,
    k: usize,
    n: usize,
}

impl PackedB {
    /// Packs `b`. Costs one pass over `b`; do it once per operand that is reused.
    pub fn new(b: MatRef<'_>) -> Self {
        let (k, n) = (b.rows, b.cols);
        let panels = n.div_ceil(NR);
        let mut data = vec![0.0f32; k * panels * NR];
        let mut blocks = data.chunks_mut(KC * panels * NR);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            let Some(block) = blocks.next() else { break };
            for (jp, panel) in block.chunks_mut(kc * NR).enumerate() {
                for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
                    let j0 = jp * NR;
                    for (jj, v) in row.iter_mut().enumerate().take(n.saturating_sub(j0)) {
                        *v = b.at(k0 + p, j0 + jj);
                    }
                }
            }
        }
        PackedB { data, k, n }
    }

    /// Rows of `B` (the `K` of the product).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of `B` (the `N` of the product).
    pub fn n(&self) -> usize {
        self.n
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::*;
    use pulp::{Simd, WithSimd};

    /// The SIMD token of this machine's fast path: AVX-512 (x86-64-v4).
    pub type Token = pulp::x86::V4;

    /// The token, if this CPU has AVX-512 (detected once by the standard library).
    pub fn simd() -> Option<Token> {
        Token::try_new()
    }

    /// Runs `f` compiled with the token's target features, so that plain loops over
    /// slices inside it (the LSTM's gate pass) are vectorised with AVX-512.
    pub fn vectorize<R>(token: Token, f: impl FnOnce() -> R) -> R {
        token.vectorize(f)
    }

    /// `acc += a_panel · b_panel` over `kc` steps: `a` is `[kc, MR]`, `b` `[kc, NR]`.
    #[inline(always)]
    fn micro_kernel<S: Simd>(simd: S, a: &[f32], b: &[f32], acc: &mut [[S::f32s; 2]; MR]) {
        let (b_vecs, _) = S::as_simd_f32s(b);
        for (a_p, b_p) in a.chunks_exact(MR).zip(b_vecs.chunks_exact(2)) {
            let (b0, b1) = (b_p[0], b_p[1]);
            for (i, acc_i) in acc.iter_mut().enumerate() {
                let a_i = simd.splat_f32s(a_p[i]);
                acc_i[0] = simd.mul_add_e_f32s(a_i, b0, acc_i[0]);
                acc_i[1] = simd.mul_add_e_f32s(a_i, b1, acc_i[1]);
            }
        }
    }

    /// `c = a · b + beta · c` on one thread; `c` is row-major `[a.rows, b.n]`.
    #[inline(always)]
    fn gemm_serial<S: Simd>(simd: S, a: MatRef<'_>, b: &PackedB, beta: f32, c: &mut [f32]) {
        let (m, n, k) = (a.rows, b.n, b.k);
        let lanes = S::F32_LANES;
        let panels = n.div_ceil(NR);
        let mut a_pack = [0.0f32; MR * KC];
        let mut blocks = b.data.chunks(KC * panels * NR);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            let Some(block) = blocks.next() else { break };
            // The first block overwrites (or scales) C; later blocks add to it.
            let scale = if k0 == 0 { beta } else { 1.0 };
            for i0 in (0..m).step_by(MR) {
                let mr = MR.min(m - i0);
                let a_panel = &mut a_pack[..kc * MR];
                for (p, a_p) in a_panel.chunks_exact_mut(MR).enumerate() {
                    for (i, v) in a_p.iter_mut().enumerate() {
                        *v = if i < mr { a.at(i0 + i, k0 + p) } else { 0.0 };
                    }
                }
                for (jp, b_panel) in block.chunks(kc * NR).enumerate() {
                    let mut acc = [[simd.splat_f32s(0.0); 2]; MR];
                    micro_kernel(simd, a_panel, b_panel, &mut acc);
                    let j0 = jp * NR;
                    for (i, acc_i) in acc.iter().enumerate().take(mr) {
                        let row = &mut c[(i0 + i) * n..(i0 + i + 1) * n];
                        for (v, &acc_v) in acc_i.iter().enumerate() {
                            let lo = j0 + v * lanes;
                            if lo >= n {
                                break;
                            }
                            let dst = &mut row[lo..(lo + lanes).min(n)];
                            let out = if scale == 0.0 {
                                acc_v // BLAS semantics: old values (even NaN) ignored
                            } else if scale == 1.0 {
                                simd.add_f32s(simd.partial_load_f32s(dst), acc_v)
                            } else {
                                let old = simd.partial_load_f32s(dst);
                                simd.mul_add_e_f32s(simd.splat_f32s(scale), old, acc_v)
                            };
                            simd.partial_store_f32s(dst, out);
                        }
                    }
                }
            }
        }
    }

    struct Serial<'a, 'b> {
        a: MatRef<'a>,
        b: &'b PackedB,
        beta: f32,
        c: &'b mut [f32],
    }

    impl WithSimd for Serial<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            gemm_serial(simd, self.a, self.b, self.beta, self.c);
        }
    }

    /// One thread's GEMM, `c = a · b + beta · c` (`c` row-major `[a.rows, b.n()]`).
    pub fn gemm_packed_serial(token: Token, a: MatRef<'_>, b: &PackedB, beta: f32, c: &mut [f32]) {
        <Token as Simd>::vectorize(token, Serial { a, b, beta, c });
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::*;

    /// No fast path on this architecture: the token cannot be made.
    #[derive(Debug, Clone, Copy)]
    pub enum Token {}

    pub fn simd() -> Option<Token> {
        None
    }

    pub fn vectorize<R>(token: Token, _f: impl FnOnce() -> R) -> R {
        match token {}
    }

    pub fn gemm_packed_serial(token: Token, _: MatRef<'_>, _: &PackedB, _: f32, _: &mut [f32]) {
        match token {}
    }
}

pub use imp::{gemm_packed_serial, simd, vectorize, Token};

/// Below this many multiply-adds a product runs on one thread.
const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// `c = a · b + beta · c` with `c` row-major `[a.rows, b.n()]`, split across rayon's
/// threads by blocks of rows of `a` and `c` (each thread packs its own panels of `a`).
/// Callers check the dimensions (`a.cols == b.k()`, `c.len() == a.rows · b.n()`).
pub fn gemm_packed(token: Token, a: MatRef<'_>, b: &PackedB, beta: f32, c: &mut [f32]) {
    let (m, n) = (a.rows, b.n);
    let threads = rayon::current_num_threads();
    if threads == 1 || m <= MR || m * n * b.k < PARALLEL_MIN_FLOPS {
        gemm_packed_serial(token, a, b, beta, c);
        return;
    }
    // A few blocks per thread, whole micro-panels each, so rayon can balance the load.
    let rows = m.div_ceil(threads * 4).div_ceil(MR) * MR;
    c.par_chunks_mut(rows * n)
        .enumerate()
        .for_each(|(ci, c_block)| {
            let a_block = a.rows_from(ci * rows, c_block.len() / n);
            gemm_packed_serial(token, a_block, b, beta, c_block);
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_util::{assert_close, Rng};

    #[test]
    fn packed_gemm_matches_naive_on_odd_shapes_and_strides() {
        let Some(token) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng(3);
        for &(m, k, n) in &[
            (1, 1, 1),
            (9, 300, 33),
            (32, 250, 1000),
            (17, 513, 70),
            (70, 5, 3),
        ] {
            for trans_a in [false, true] {
                let a = rng.vec(m * k);
                let b = rng.vec(k * n);
                let a_ref = if trans_a {
                    MatRef::row_major(&a, k, m).t()
                } else {
                    MatRef::row_major(&a, m, k)
                };
                let b_ref = MatRef::row_major(&b, k, n);
                let c0 = rng.vec(m * n);
                for beta in [0.0, 1.0, 0.5] {
                    let mut c = c0.clone();
                    gemm_packed(token, a_ref, &PackedB::new(b_ref), beta, &mut c);
                    let want: Vec<f64> = (0..m * n)
                        .map(|e| {
                            let (i, j) = (e / n, e % n);
                            let s: f64 = (0..k)
                                .map(|p| a_ref.at(i, p) as f64 * b[p * n + j] as f64)
                                .sum();
                            s + beta as f64 * c0[e] as f64
                        })
                        .collect();
                    assert_close(
                        &format!("{m}x{k}x{n} {trans_a} {beta}"),
                        &c,
                        &want,
                        1e-4,
                        1e-4,
                    );
                }
            }
        }
    }
}
