//! The fast GEMM path: packed AVX-512 micro-kernels, chosen at run time.
//!
//! Why it exists: matrixmultiply (the portable path in `gemm.rs`) has AVX2/FMA kernels
//! only, which cap it near half of an AVX-512 chip's peak, and the LSTM's per-step
//! products are small and fixed (`[32, 250] · [250, 1000]` for the seed network), where a
//! general library spends much of its time packing and splitting. Measured on the
//! development machine (2 cores of an AVX-512 Xeon, shared), one thread, `B` packed
//! once, best of 300 calls in quiet minutes: `16×250×1000` 156–160 GFLOP/s,
//! `50×250×1000` 160–163 (the LSTM's per-step shapes for training and inference;
//! PyTorch's MKL on the same core, measured the same way: 158–167 and 145–162), against
//! 61–101 for matrixmultiply and 64–76 for the `gemm` crate (which also has no safe
//! API); two threads, `1024³` 268–292 where numpy's OpenBLAS gives about 296
//! (`cargo bench --bench cpu_gemm` prints these shapes).
//!
//! How: the classic Goto/BLIS structure without any `unsafe`. `B` is packed once into
//! panels of [`NR`] columns per block of [`KC`] rows ([`PackedB`], starting on a cache
//! line; the LSTM packs its weights once per call and reuses them at every step;
//! packing buffers are reused per thread). `A` is taken [`MC`] rows at a time and cut
//! into micro-panels of at most [`MR`] rows, as equal as possible; then each packed
//! panel of `B` is applied to every micro-panel while it sits in L1. A row-major `A` is
//! read in place (its rows are the micro-kernel's broadcast streams); other layouts are
//! packed per block into a buffer kept per thread. The micro-kernel keeps an `R × NR`
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

/// Rows of `B` per packed block (and of `A`'s packed panels): 256 rows of a 32-wide
/// panel are 32 KiB, which stay in L1 while every micro-panel of `A` passes by.
pub const KC: usize = 256;
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
/// Rows of `A` packed per block: 96 rows × [`KC`] are 96 KiB, which stay in L2 while
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

/// Packs columns `j0..j0 + NR` of `b` (zero beyond its last column), rows
/// `k0..k0 + kc`, into `panel` (`[kc, NR]` row-major). Rows (or, for a transposed view,
/// columns) are copied as contiguous runs where the strides allow.
fn pack_b_panel(b: MatRef<'_>, k0: usize, j0: usize, panel: &mut [f32]) {
    let kc = panel.len() / NR;
    let width = NR.min(b.cols - j0);
    if b.col_stride == 1 {
        // Each row of the panel is a contiguous run of a row of `b` (copied with a
        // length known at compile time where it can be: a `memmove` call per 128 bytes
        // was 2% of a training step).
        for (p, row) in panel.chunks_exact_mut(NR).enumerate() {
            let start = (k0 + p) * b.row_stride + j0;
            if width == NR {
                row.copy_from_slice(&b.data[start..start + NR]);
            } else {
                row[..width].copy_from_slice(&b.data[start..start + width]);
            }
        }
    } else if b.row_stride == 1 {
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
                *v = b.at(k0 + p, j0 + jj);
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
    const KEEP_MAX_ELEMENTS: usize = 1 << 20;

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

impl PackedB {
    /// Packs `b`. Costs one pass over `b`; do it once per operand that is reused.
    pub fn new(b: MatRef<'_>) -> Self {
        let (k, n) = (b.rows, b.cols);
        let panels = n.div_ceil(NR);
        let len = k * panels * NR;
        let mut data = spare::take(len + CACHE_LINE_F32);
        let start = data.as_ptr().align_offset(64).min(CACHE_LINE_F32);
        // A large `B` is packed by all threads, panel by panel: on one thread, packing
        // an LSTM's two weight matrices left the other thread idle for 6% of a layer.
        let parallel = k * n >= PARALLEL_MIN_FLOPS / 16;
        for (block, k0) in data[start..start + len]
            .chunks_mut((KC * panels * NR).max(1))
            .zip((0..k).step_by(KC))
        {
            let kc = KC.min(k - k0);
            let pack = |(jp, panel): (usize, &mut [f32])| pack_b_panel(b, k0, jp * NR, panel);
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
mod imp {
    use super::*;
    use pulp::{Simd, WithSimd};
    use std::cell::Cell;

    /// The SIMD token of this machine's fast path: AVX-512 (x86-64-v4).
    pub type Token = pulp::x86::V4;

    /// The token, if this CPU has AVX-512 (detected once by the standard library).
    pub fn simd() -> Option<Token> {
        Token::try_new()
    }

    /// Runs `f` compiled with the token's target features when there is a token, so
    /// that plain loops over slices inside it (the LSTM's gate pass, column sums) are
    /// vectorised with AVX-512; `f` must be `#[inline(always)]` for that to happen.
    pub fn vectorize<R>(token: Option<Token>, f: impl FnOnce() -> R) -> R {
        match token {
            Some(token) => token.vectorize(f),
            None => f(),
        }
    }

    /// The `R` rows of `A` one tile multiplies, over the `kc` columns of the current
    /// block: packed as `[kc, R]`, or read in place from a row-major `A` (`R` runs of
    /// `kc` elements, `row_stride` apart, the first one at the start of `data`).
    #[derive(Clone, Copy)]
    enum APanel<'a> {
        Packed(&'a [f32]),
        Rows { data: &'a [f32], row_stride: usize },
    }

    /// `acc += a · b_panel` over `kc` steps, `b` being `[kc, NR]`.
    #[inline(always)]
    fn micro_kernel<S: Simd, const R: usize>(
        simd: S,
        a: APanel<'_>,
        b: &[f32],
        acc: &mut [[S::f32s; 2]; R],
    ) {
        let (b_vecs, _) = S::as_simd_f32s(b);
        let b_steps = b_vecs.chunks_exact(2);
        // The same loop body twice, only the reading of `a` differs: a shared closure
        // made LLVM keep the accumulators on the stack.
        match a {
            APanel::Packed(a) => {
                for (a_p, b_p) in a.chunks_exact(R).zip(b_steps) {
                    let (b0, b1) = (b_p[0], b_p[1]);
                    for (i, acc_i) in acc.iter_mut().enumerate() {
                        let a_i = simd.splat_f32s(a_p[i]);
                        acc_i[0] = simd.mul_add_e_f32s(a_i, b0, acc_i[0]);
                        acc_i[1] = simd.mul_add_e_f32s(a_i, b1, acc_i[1]);
                    }
                }
            }
            APanel::Rows { data, row_stride } => {
                let kc = b_steps.len();
                let rows: [&[f32]; R] =
                    std::array::from_fn(|i| &data[i * row_stride..i * row_stride + kc]);
                for (p, b_p) in b_steps.enumerate() {
                    let (b0, b1) = (b_p[0], b_p[1]);
                    for (acc_i, row) in acc.iter_mut().zip(&rows) {
                        let a_i = simd.splat_f32s(row[p]);
                        acc_i[0] = simd.mul_add_e_f32s(a_i, b0, acc_i[0]);
                        acc_i[1] = simd.mul_add_e_f32s(a_i, b1, acc_i[1]);
                    }
                }
            }
        }
    }

    /// How one tile's result is written into `C`: scaled old values (`scale`, 0 = ignore
    /// them), plus `bias[j]` on every row when given.
    #[derive(Clone, Copy)]
    struct Epilogue<'a> {
        scale: f32,
        bias: Option<&'a [f32]>,
    }

    /// Runs the `R`-row micro-kernel for one panel of `A` against one panel of `B` and
    /// writes the `R × NR` tile into its rows of `C`, columns from `j0`.
    #[inline(always)]
    fn tile<S: Simd, const R: usize>(simd: S, t: Tile<'_>) {
        let Tile {
            a,
            b_panel,
            c_rows,
            at: (n, j0),
            ep,
        } = t;
        let lanes = S::F32_LANES;
        let mut acc = [[simd.splat_f32s(0.0); 2]; R];
        micro_kernel::<S, R>(simd, a, b_panel, &mut acc);
        for (acc_i, row) in acc.iter().zip(c_rows.chunks_exact_mut(n)) {
            for (v, &acc_v) in acc_i.iter().enumerate() {
                let lo = j0 + v * lanes;
                if lo >= n {
                    break;
                }
                let hi = (lo + lanes).min(n);
                let mut out = acc_v;
                if let Some(bias) = ep.bias {
                    out = simd.add_f32s(out, load(simd, &bias[lo..hi]));
                }
                let dst = &mut row[lo..hi];
                if ep.scale == 1.0 {
                    out = simd.add_f32s(load(simd, dst), out);
                } else if ep.scale != 0.0 {
                    // (BLAS semantics: with scale 0 the old values, even NaN, are ignored.)
                    let old = load(simd, dst);
                    out = simd.mul_add_e_f32s(simd.splat_f32s(ep.scale), old, out);
                }
                store(simd, dst, out);
            }
        }
    }

    /// A vector from `src` (at most one vector long; missing lanes are zero).
    #[inline(always)]
    fn load<S: Simd>(simd: S, src: &[f32]) -> S::f32s {
        match S::as_simd_f32s(src) {
            ([v], []) => *v,
            _ => simd.partial_load_f32s(src),
        }
    }

    /// Stores the first `dst.len()` lanes of `v` (at most one vector).
    #[inline(always)]
    fn store<S: Simd>(simd: S, dst: &mut [f32], v: S::f32s) {
        match S::as_mut_simd_f32s(dst) {
            ([d], []) => *d = v,
            _ => simd.partial_store_f32s(dst, v),
        }
    }

    /// Packs rows `i0..i0 + R` of `a`, columns `k0..k0 + kc`, as `[kc, R]` into `dst`
    /// (`kc · R` elements).
    #[inline(always)]
    fn pack_a<const R: usize>(a: MatRef<'_>, i0: usize, k0: usize, dst: &mut [f32]) {
        if a.col_stride == 1 {
            for i in 0..R {
                let start = (i0 + i) * a.row_stride + k0;
                let row = &a.data[start..start + dst.len() / R];
                for (d, &v) in dst.chunks_exact_mut(R).zip(row) {
                    d[i] = v;
                }
            }
        } else if a.row_stride == 1 {
            // A transposed row-major matrix: the `R` rows at one `k` are contiguous.
            for (p, d) in dst.chunks_exact_mut(R).enumerate() {
                let start = (k0 + p) * a.col_stride + i0;
                d.copy_from_slice(&a.data[start..start + R]);
            }
        } else {
            for (p, d) in dst.chunks_exact_mut(R).enumerate() {
                for (i, v) in d.iter_mut().enumerate() {
                    *v = a.at(i0 + i, k0 + p);
                }
            }
        }
    }

    /// The micro-panels one block of `mc` rows of `A` is cut into: as few as possible of
    /// at most `max_rows` rows, as equal as possible (50 rows → 5 × 10, not 6 × 8 + 2),
    /// so no tile computes padding rows.
    fn panel_rows(mc: usize, max_rows: usize) -> impl Iterator<Item = (usize, usize)> {
        let panels = mc.div_ceil(max_rows).max(1);
        let (base, extra) = (mc / panels, mc % panels);
        (0..panels).scan(0, move |i0, p| {
            let r = base + usize::from(p < extra);
            let start = *i0;
            *i0 += r;
            Some((start, r))
        })
    }

    /// `with_rows!(r, R => expr)`: `expr` with `R` a compile-time constant equal to the
    /// run-time row count `r` (`1 ≤ r ≤ MR`), so the packing and the micro-kernel are
    /// compiled (and unrolled) for every panel height.
    macro_rules! with_rows {
        ($r:expr, $R:ident => $body:expr) => {
            with_rows!(@ $r, $R, $body, 1 2 3 4 5 6 7 8 9 10 11 12)
        };
        (@ $r:expr, $R:ident, $body:expr, $($n:literal)*) => {
            match $r {
                $($n => {
                    const $R: usize = $n;
                    $body
                })*
                _ => unreachable!("micro-panels have 1 to MR rows"),
            }
        };
    }

    /// `c = a · b + beta · c (+ bias)` on one thread; `c` is row-major `[a.rows, b.n]`.
    ///
    /// Loop order (Goto/BLIS): per block of `KC` rows of `B`, per block of [`MC`] rows of
    /// `A` (read in place, or packed once into the thread's buffer), per packed panel of
    /// `B` (which then stays in L1), every micro-panel of `A`.
    #[inline(always)]
    fn gemm_serial<S: Simd>(
        simd: S,
        a: MatRef<'_>,
        b: &PackedB,
        beta: f32,
        bias: Option<&[f32]>,
        c: &mut [f32],
    ) {
        let (m, n, k) = (a.rows, b.n, b.k);
        if k == 0 {
            // An empty sum: only the old values and the bias remain.
            for row in c.chunks_exact_mut(n.max(1)).take(m) {
                for (j, v) in row.iter_mut().enumerate() {
                    let old = if beta == 0.0 { 0.0 } else { beta * *v };
                    *v = old + bias.map_or(0.0, |b| b[j]);
                }
            }
            return;
        }
        let panels = n.div_ceil(NR);
        // A row-major `A` is read in place by the micro-kernel, its `R` rows being `R`
        // sequential streams: packing cost ~1 cycle per element, 13% of a product with
        // `N` = 250 (in place, 16×1000×250: 136 → 158 GFLOP/s; 1600×1000×250: 117 →
        // 145). Rows a multiple of 4 KiB apart would all fall in one L1 set: those, and
        // transposed or strided `A`, are packed.
        let in_place = a.col_stride == 1 && a.row_stride % ALIASING_STRIDE != 0;
        // The packed block of `A`, kept per thread: a fresh zeroed 96 KiB on every call
        // (a stack array) was a memset per per-step product.
        let mut a_pack = A_PACK.take();
        a_pack.resize(MC * KC, 0.0);
        let mut blocks = b.panels().chunks(KC * panels * NR);
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            let Some(block) = blocks.next() else { break };
            // The first block overwrites (or scales) C and adds the bias; later blocks
            // add to it.
            let ep = if k0 == 0 {
                Epilogue { scale: beta, bias }
            } else {
                Epilogue {
                    scale: 1.0,
                    bias: None,
                }
            };
            for m0 in (0..m).step_by(MC) {
                // Micro-panel `(i0, r)` of this block is packed at `i0 · kc`.
                let mc = MC.min(m - m0);
                if !in_place {
                    for (i0, r) in panel_rows(mc, MR) {
                        let dst = &mut a_pack[i0 * kc..(i0 + r) * kc];
                        with_rows!(r, R => pack_a::<R>(a, m0 + i0, k0, dst));
                    }
                }
                for (jp, b_panel) in block.chunks(kc * NR).enumerate() {
                    for (i0, r) in panel_rows(mc, if in_place { IN_PLACE_MR } else { MR }) {
                        let a_panel = if in_place {
                            APanel::Rows {
                                data: &a.data[(m0 + i0) * a.row_stride + k0..],
                                row_stride: a.row_stride,
                            }
                        } else {
                            APanel::Packed(&a_pack[i0 * kc..(i0 + r) * kc])
                        };
                        let c_rows = &mut c[(m0 + i0) * n..(m0 + i0 + r) * n];
                        let t = Tile {
                            a: a_panel,
                            b_panel,
                            c_rows,
                            at: (n, jp * NR),
                            ep,
                        };
                        with_rows!(r, R => tile::<S, R>(simd, t));
                    }
                }
            }
        }
        A_PACK.set(a_pack);
    }

    thread_local! {
        /// See [`gemm_serial`].
        static A_PACK: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    }

    /// One tile's operands: a packed micro-panel of `A` `[kc, R]`, a packed panel of `B`
    /// `[kc, NR]`, the `R` rows of `C` it writes, `at` = (`C`'s width, first column).
    struct Tile<'a> {
        a: APanel<'a>,
        b_panel: &'a [f32],
        c_rows: &'a mut [f32],
        at: (usize, usize),
        ep: Epilogue<'a>,
    }

    struct Serial<'a, 'b> {
        a: MatRef<'a>,
        b: &'b PackedB,
        beta: f32,
        bias: Option<&'b [f32]>,
        c: &'b mut [f32],
    }

    impl WithSimd for Serial<'_, '_> {
        type Output = ();
        #[inline(always)]
        fn with_simd<S: Simd>(self, simd: S) {
            gemm_serial(simd, self.a, self.b, self.beta, self.bias, self.c);
        }
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
        <Token as Simd>::vectorize(
            token,
            Serial {
                a,
                b,
                beta,
                bias,
                c,
            },
        );
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

    pub fn vectorize<R>(_token: Option<Token>, f: impl FnOnce() -> R) -> R {
        f()
    }

    pub fn gemm_packed_serial(
        token: Token,
        _: MatRef<'_>,
        _: &PackedB,
        _: f32,
        _: Option<&[f32]>,
        _: &mut [f32],
    ) {
        match token {}
    }
}

pub use imp::{gemm_packed_serial, simd, vectorize, Token};

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
    let threads = rayon::current_num_threads();
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
            (9, 300, 33),    // K over two blocks
            (32, 250, 1000), // B packed by all threads
            (17, 513, 70),
            (70, 5, 3),
            (203, 270, 45), // more rows than one block of A, K over two blocks
            (12, 1024, 40), // rows 4 KiB apart: A packed even when not transposed
            (6, 0, 20),     // an empty sum
        ] {
            for (trans_a, trans_b) in [(false, false), (true, false), (false, true)] {
                let a = rng.vec(m * k);
                let b = rng.vec(k * n);
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
                let c0 = rng.vec(m * n);
                let bias = rng.vec(n);
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
}
