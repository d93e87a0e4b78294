//! The fast GEMM path: packed AVX-512 micro-kernels, chosen at run time.
//!
//! Why it exists: matrixmultiply (the portable path in `gemm.rs`) has AVX2/FMA kernels
//! only, which cap it near half of an AVX-512 chip's peak, and the LSTM's per-step
//! products are small and fixed (`[32, 250] · [250, 1000]` for the seed network), where a
//! general library spends much of its time packing and splitting. On those shapes these
//! kernels run at about MKL's speed and well above matrixmultiply's and the `gemm`
//! crate's (which also has no safe API); the figures, and how they were measured, are in
//! docs/cpu-performance.md (`cargo bench --bench cpu_gemm` prints these shapes).
//!
//! How: the classic Goto/BLIS structure without any `unsafe`. `B` is packed once into
//! panels of [`NR`] columns per block of [`KC`] rows ([`PackedB`], starting on a cache
//! line; the LSTM packs its weights once per call and reuses them at every step;
//! packing buffers are reused per thread). `A` is taken [`MC`] rows at a time and cut
//! into micro-panels of at most [`MR`] rows, as equal as possible; then each packed
//! panel of `B` is applied to every micro-panel while it sits in L2, a few panels at a
//! time through every block of `K`, so the tiles of `C` being summed stay near. A
//! row-major `A` is read in place (its rows are the micro-kernel's broadcast streams);
//! other layouts are packed into a buffer kept per thread. The micro-kernel keeps an `R × NR`
//! tile of `C` in `2·R` zmm registers (`R ≤ 12`) and does, per `k`, two vector loads of
//! `B`, `R` broadcasts of `A` and `2·R` FMAs; the tile is written with `beta` and an
//! optional bias row applied, so a bias costs no extra pass. SIMD comes from `pulp`: its
//! `V4` type proves at run time that AVX-512 is present and compiles the generic kernel
//! with those target features, through a safe API. A machine without AVX-512 (or not
//! x86-64) gets `None` from [`simd`] and the caller takes the portable path.
//!
//! Summation order: every element of `C` is a sum over `k` in increasing order, one FMA
//! at a time, in blocks of `KC` added into `C`. It does not depend on how rows are split
//! across threads, so results are the same with 1 or N threads.

use rayon::prelude::*;

/// Rows of `B` per packed block (and of `A`'s packed panels): 512 rows of a 32-wide
/// panel are 64 KiB, which stay in L2 (read once per `k` by each micro-panel of `A`,
/// two vectors per `2·R` FMAs, far below L2's bandwidth) while every micro-panel passes
/// by. Each block's sums are added into `C` once, so the block is as long as L2 allows:
/// with 256 (a panel in a 32 KiB L1) the per-step products of a wide layer
/// (`[16 or 50, 1024] · [1024, 4096]`) spent 5-6% of their time adding blocks into `C`,
/// and ran at 0.93-0.97× the speed of 512 (2-core Zen 4, 2026-12-05,
/// docs/cpu-performance.md).
pub const KC: usize = 512;
/// Columns per packed panel of `B`: two AVX-512 vectors.
pub const NR: usize = 32;
/// Most rows of `C` per micro-kernel tile: 12 rows × 2 vectors = 24 accumulators of
/// AVX-512's 32 registers, enough independent FMA chains to cover the FMA latency on
/// two ports. Kernels for every row count from 1 to `MR` exist, so a block of rows is
/// cut into equal micro-panels and no tile computes padding.
pub const MR: usize = 12;
/// Most rows of an in-place `A` per tile: the micro-kernel keeps one pointer per row,
/// and with 11 or 12 of them they no longer fit in registers (3× slower).
const IN_PLACE_MR: usize = 10;
/// Row strides (elements) at which the rows of an in-place `A` alias in L1: 4 KiB.
const ALIASING_STRIDE: usize = 1024;
/// `f32`s per 64-byte cache line.
const CACHE_LINE_F32: usize = 16;
/// Rows of `A` packed per block: 96 rows × [`KC`] are 192 KiB, which stay in L2 while
/// each panel of `B` is applied to all of them.
pub const MC: usize = 96;

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
#[derive(Debug)]
pub struct PackedB {
    /// The packed panels start at `data[start]`, the first 64-byte boundary: the
    /// allocator's 16-byte alignment made every vector load of `B` straddle two cache
    /// lines.
    data: Vec<f32>,
    start: usize,
    k: usize,
    n: usize,
}

impl Drop for PackedB {
    fn drop(&mut self) {
        spare::give(std::mem::take(&mut self.data));
    }
}

/// Which rows and columns of a matrix are packed: all, or those listed, in order.
#[derive(Clone, Copy, Default)]
struct Picked<'a> {
    rows: Option<&'a [usize]>,
    cols: Option<&'a [usize]>,
}

/// Packs columns `j0..j0 + NR` of `b` (zero beyond its last column), rows
/// `k0..k0 + kc`, into `panel` (`[kc, NR]` row-major); with `picked` rows or columns,
/// the `p`-th row (column) packed is `b`'s `picked[p]`. Rows (or, for a transposed view,
/// columns) are copied as contiguous runs where the strides allow.
fn pack_b_panel(b: MatRef<'_>, (k0, picked): (usize, Picked<'_>), j0: usize, panel: &mut [f32]) {
    let kc = panel.len() / NR;
    let cols = picked.cols.map_or(b.cols, <[usize]>::len);
    let width = NR.min(cols - j0);
    let row_of = |p: usize| picked.rows.map_or(k0 + p, |rows| rows[k0 + p]);
    let col_of = |j: usize| picked.cols.map_or(j, |cols| cols[j]);
    if let (Some(_), 1, None) = (picked.cols, b.row_stride, picked.rows) {
        // Picked columns of a transposed row-major matrix: each a contiguous run.
        for jj in 0..width {
            let start = col_of(j0 + jj) * b.col_stride + k0;
            let col = &b.data[start..start + kc];
            for (row, &v) in panel.chunks_exact_mut(NR).zip(col) {
                row[jj] = v;
            }
        }
    } else if picked.cols.is_some() {
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            for (jj, v) in row.iter_mut().enumerate().take(width) {
                *v = b.at(row_of(p), col_of(j0 + jj));
            }
        }
    } else if b.col_stride == 1 {
        // Each row of the panel is a contiguous run of a row of `b` (copied with a
        // length known at compile time where it can be, not a `memmove` call per row).
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            let start = row_of(p) * b.row_stride + j0;
            if width == NR {
                row.copy_from_slice(&b.data[start..start + NR]);
            } else {
                row[..width].copy_from_slice(&b.data[start..start + width]);
            }
        }
    } else if b.row_stride == 1 && picked.rows.is_none() {
        // A transposed row-major matrix: each column of the panel is a contiguous run.
        for jj in 0..width {
            let start = (j0 + jj) * b.col_stride + k0;
            let col = &b.data[start..start + kc];
            for (row, &v) in panel.chunks_exact_mut(NR).zip(col) {
                row[jj] = v;
            }
        }
    } else {
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            for (jj, v) in row.iter_mut().enumerate().take(width) {
                *v = b.at(row_of(p), j0 + jj);
            }
        }
    }
    if width < NR {
        for row in panel.chunks_exact_mut(NR) {
            row[width..].fill(0.0);
        }
    }
}

/// Packing buffers kept for reuse, per thread. Every layer call packs its weights
/// afresh (they change every step); allocating those megabytes each time costs a page
/// fault per 4 KiB and the kernel's zeroing of each page, a few percent of a step.
mod spare {
    use std::cell::RefCell;

    /// Buffers kept per thread, and the largest one kept (larger ones are freed).
    const KEEP: usize = 4;
    pub const KEEP_MAX_ELEMENTS: usize = 1 << 20;

    thread_local! {
        static SPARE: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
    }

    /// A buffer of `len` elements, reusing a kept one when there is one: its contents
    /// are arbitrary, the caller overwrites every element.
    pub fn take(len: usize) -> Vec<f32> {
        let kept = SPARE
            .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.pop()))
            .ok()
            .flatten();
        let mut v = kept.unwrap_or_default();
        v.truncate(len);
        v.resize(len, 0.0);
        v
    }

    /// Keeps `v` for a later [`take`] on this thread, if there is room.
    pub fn give(v: Vec<f32>) {
        if v.capacity() == 0 || v.capacity() > KEEP_MAX_ELEMENTS {
            return;
        }
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                if s.len() < KEEP {
                    s.push(v);
                }
            }
        });
    }
}

/// The most rows of a `B` of `n` columns packed at once so that the packed copy is one
/// a thread keeps for reuse: a multiple of [`KC`], at least one block.
pub fn packed_b_rows(n: usize) -> usize {
    let per_row = n.div_ceil(NR).max(1) * NR;
    ((spare::KEEP_MAX_ELEMENTS - CACHE_LINE_F32) / per_row / KC * KC).max(KC)
}

/// Elements of the buffer a packed `B` of `k` rows and `n` columns takes: whole panels
/// of [`NR`] columns, and a cache line's slack to align the first.
pub fn packed_b_elements(k: usize, n: usize) -> usize {
    k * n.div_ceil(NR) * NR + CACHE_LINE_F32
}

impl PackedB {
    /// Packs `b`. Costs one pass over `b`; do it once per operand that is reused.
    pub fn new(b: MatRef<'_>) -> Self {
        Self::pack(b, Picked::default())
    }

    /// Packs rows `rows` of `b`, in that order: the `B` whose row `p` is `b`'s row
    /// `rows[p]` (each at most `b.rows - 1`), without forming it. The product then sums
    /// over those rows only (the recurrent layers' weight gradients over the real steps
    /// of a padded batch, `recurrent/fast.rs`).
    pub fn from_rows(b: MatRef<'_>, rows: &[usize]) -> Self {
        let picked = Picked {
            rows: Some(rows),
            cols: None,
        };
        Self::pack(
            MatRef {
                rows: rows.len(),
                ..b
            },
            picked,
        )
    }

    /// Packs columns `cols` of `b`, in that order, in a buffer of its own of exactly the
    /// size it needs (as [`PackedB::new_exact`]): the `B` whose column `j` is `b`'s
    /// column `cols[j]`. Each element of a product with it is summed as with `b` whole
    /// (the recurrent layers' column schedule, `recurrent/columns.rs`).
    pub fn from_columns(b: MatRef<'_>, cols: &[usize]) -> Self {
        let len = packed_b_elements(b.rows, cols.len());
        let mut data = Vec::new();
        data.reserve_exact(len);
        data.resize(len, 0.0);
        let picked = Picked {
            rows: None,
            cols: Some(cols),
        };
        let b = MatRef {
            cols: cols.len(),
            ..b
        };
        Self::pack_into(data, b, picked)
    }

    /// [`PackedB::new`] in a buffer of its own, of exactly the size it needs, not one
    /// taken from the thread's spares (which may be larger): for a copy kept across
    /// calls (`packs.rs`), whose size the host plan counts.
    pub fn new_exact(b: MatRef<'_>) -> Self {
        let len = packed_b_elements(b.rows, b.cols);
        let mut data = Vec::new();
        data.reserve_exact(len);
        data.resize(len, 0.0);
        Self::pack_into(data, b, Picked::default())
    }

    /// Bytes of the buffer holding the packed panels.
    pub fn bytes(&self) -> u64 {
        (self.data.capacity() * std::mem::size_of::<f32>()) as u64
    }

    /// [`PackedB::new`], or with `picked` [`PackedB::from_rows`].
    fn pack(b: MatRef<'_>, picked: Picked<'_>) -> Self {
        let data = spare::take(packed_b_elements(b.rows, b.cols));
        Self::pack_into(data, b, picked)
    }

    /// Packs `b` (or its rows `picked`) into `data`, of [`packed_b_elements`] elements.
    fn pack_into(mut data: Vec<f32>, b: MatRef<'_>, picked: Picked<'_>) -> Self {
        let (k, n) = (b.rows, b.cols);
        let panels = n.div_ceil(NR);
        let len = k * panels * NR;
        let start = data.as_ptr().align_offset(64).min(CACHE_LINE_F32);
        // A large `B` is packed by all threads, panel by panel: on one thread, packing
        // an LSTM's two weight matrices left the other thread idle for 6% of a layer.
        let parallel = k * n >= PARALLEL_MIN_FLOPS / 16 && !crate::threads::inline();
        for (block, k0) in data[start..start + len]
            .chunks_mut((KC * panels * NR).max(1))
            .zip((0..k).step_by(KC))
        {
            let kc = KC.min(k - k0);
            let pack =
                |(jp, panel): (usize, &mut [f32])| pack_b_panel(b, (k0, picked), jp * NR, panel);
            if parallel {
                block.par_chunks_mut(kc * NR).enumerate().for_each(pack);
            } else {
                block.chunks_mut(kc * NR).enumerate().for_each(pack);
            }
        }
        PackedB { data, start, k, n }
    }

    /// The packed panels.
    fn panels(&self) -> &[f32] {
        let len = self.k * self.n.div_ceil(NR) * NR;
        &self.data[self.start..self.start + len]
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
#[path = "x86.rs"]
mod imp;

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use super::*;

    /// No fast path on this architecture: the token cannot be made.
    #[derive(Debug, Clone, Copy)]
    pub enum Token {}

    pub fn simd() -> Option<Token> {
        None
    }

    pub fn vectorize<R>(_token: Option<Token>, f: impl FnOnce() -> R) -> R {
        f()
    }

    pub(super) fn serial(token: Token, _: Product<'_>) {
        match token {}
    }
}

pub use imp::{simd, vectorize, Token};

/// The operands of one product `c = a · b + beta · c (+ bias)`: `c` row-major
/// `[a.rows, b.n()]`; `bias`, when given, `[b.n()]`, added to every row.
struct Product<'a> {
    a: MatRef<'a>,
    b: &'a PackedB,
    beta: f32,
    bias: Option<&'a [f32]>,
    c: &'a mut [f32],
}

/// One thread's GEMM, `c = a · b + beta · c (+ bias)` (`c` row-major
/// `[a.rows, b.n()]`; `bias`, when given, `[b.n()]`, added to every row).
pub fn gemm_packed_serial(
    token: Token,
    a: MatRef<'_>,
    b: &PackedB,
    beta: f32,
    bias: Option<&[f32]>,
    c: &mut [f32],
) {
    imp::serial(
        token,
        Product {
            a,
            b,
            beta,
            bias,
            c,
        },
    );
}

/// Below this many multiply-adds a product runs on one thread.
const PARALLEL_MIN_FLOPS: usize = 1 << 20;

/// `c = a · b + beta · c (+ bias)` with `c` row-major `[a.rows, b.n()]`, split across
/// rayon's threads by blocks of rows of `a` and `c` (each thread packs its own blocks of
/// `a`). Callers check the dimensions (`a.cols == b.k()`, `c.len() == a.rows · b.n()`,
/// `bias.len() == b.n()`).
pub fn gemm_packed(
    token: Token,
    a: MatRef<'_>,
    b: &PackedB,
    beta: f32,
    bias: Option<&[f32]>,
    c: &mut [f32],
) {
    let (m, n) = (a.rows, b.n);
    let threads = crate::threads::available();
    if threads == 1 || m <= MR || m * n * b.k < PARALLEL_MIN_FLOPS {
        gemm_packed_serial(token, a, b, beta, bias, c);
        return;
    }
    // A few blocks per thread, so rayon can balance the load.
    let rows = m.div_ceil(threads * 4).max(MR);
    c.par_chunks_mut(rows * n)
        .enumerate()
        .for_each(|(ci, c_block)| {
            let a_block = a.rows_from(ci * rows, c_block.len() / n);
            gemm_packed_serial(token, a_block, b, beta, bias, c_block);
        });
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_testing::{assert_close, Rng, TestRng};

    #[test]
    fn packed_gemm_matches_naive_on_odd_shapes_and_strides() {
        let Some(token) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(3);
        for &(m, k, n) in &[
            (1, 1, 1),
            (9, KC + 44, 33), // K over two blocks
            (32, 250, 1000),  // B packed by all threads
            (17, KC + 1, 70),
            (70, 5, 3),
            (203, KC + 14, 45), // more rows than one block of A, K over two blocks
            (12, 1024, 40),     // rows 4 KiB apart: A packed even when not transposed
            (40, 2 * KC + 7, 300), // K over three blocks, C's columns in several runs
            (6, 0, 20),         // an empty sum
        ] {
            for (trans_a, trans_b) in [(false, false), (true, false), (false, true)] {
                let a = rng.signed_vec(m * k);
                let b = rng.signed_vec(k * n);
                let a_ref = if trans_a {
                    MatRef::row_major(&a, k, m).t()
                } else {
                    MatRef::row_major(&a, m, k)
                };
                let b_ref = if trans_b {
                    MatRef::row_major(&b, n, k).t()
                } else {
                    MatRef::row_major(&b, k, n)
                };
                let c0 = rng.signed_vec(m * n);
                let bias = rng.signed_vec(n);
                for (beta, with_bias) in [(0.0, false), (1.0, false), (0.5, false), (0.0, true)] {
                    let mut c = c0.clone();
                    let bias = with_bias.then_some(&bias[..]);
                    gemm_packed(token, a_ref, &PackedB::new(b_ref), beta, bias, &mut c);
                    let want: Vec<f64> = (0..m * n)
                        .map(|e| {
                            let (i, j) = (e / n, e % n);
                            let s: f64 = (0..k)
                                .map(|p| a_ref.at(i, p) as f64 * b_ref.at(p, j) as f64)
                                .sum();
                            s + beta as f64 * c0[e] as f64 + bias.map_or(0.0, |b| b[j] as f64)
                        })
                        .collect();
                    assert_close(
                        &format!(
                            "{m}x{k}x{n} trans {trans_a} {trans_b} beta {beta} bias {with_bias}"
                        ),
                        &c,
                        &want,
                        1e-4,
                        1e-4,
                    );
                }
            }
        }
    }

    #[test]
    fn a_product_is_the_same_bits_whatever_columns_are_packed_beside_each() {
        let Some(token) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(11);
        // K over several blocks and N over several runs of panels, with `A` read in
        // place, packed and kept for every run, and packed block by block (too large to
        // keep): each element is its own sum, as when its panel is packed alone.
        let (k, n) = (2 * KC + 76, 8 * NR + 5);
        for (m, transposed) in [(37, false), (40, true), (80, true)] {
            let a = rng.signed_vec(m * k);
            let a = match transposed {
                false => MatRef::row_major(&a, m, k),
                true => MatRef::row_major(&a, k, m).t(),
            };
            let b = rng.signed_vec(k * n);
            let b = MatRef::row_major(&b, k, n);
            let old = rng.signed_vec(m * n);
            let mut whole = old.clone();
            gemm_packed_serial(token, a, &PackedB::new(b), 1.0, None, &mut whole);
            for j0 in (0..n).step_by(NR) {
                let cols: Vec<usize> = (j0..n.min(j0 + NR)).collect();
                let w = cols.len();
                let mut alone: Vec<f32> = (0..m)
                    .flat_map(|i| old[i * n + j0..i * n + j0 + w].to_vec())
                    .collect();
                let panel = PackedB::from_columns(b, &cols);
                gemm_packed_serial(token, a, &panel, 1.0, None, &mut alone);
                for i in 0..m {
                    let got = &whole[i * n + j0..i * n + j0 + w];
                    let want = &alone[i * w..(i + 1) * w];
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(g, w)| g.to_bits() == w.to_bits());
                    assert!(
                        same,
                        "{m} rows (transposed {transposed}), row {i}, columns from {j0}"
                    );
                }
            }
        }
    }
}
