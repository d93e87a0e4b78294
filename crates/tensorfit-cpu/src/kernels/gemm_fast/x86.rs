//! The AVX-512 side of `gemm_fast`: the SIMD token, the micro-kernel and the serial
//! blocked product (see the parent module for the structure and its reasons).

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

/// `a · b_panel` over `kc` steps, `b` being `[kc, NR]`: an `R × NR` tile, returned by
/// value (a local array the loop alone touches, so LLVM keeps it in registers).
#[inline(always)]
fn micro_kernel<S: Simd, const R: usize>(simd: S, a: APanel<'_>, b: &[f32]) -> [[S::f32s; 2]; R] {
    let mut acc = [[simd.splat_f32s(0.0); 2]; R];
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
    acc
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
    let acc = micro_kernel::<S, R>(simd, a, b_panel);
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
/// Loop order (Goto/BLIS): per block of [`MC`] rows of `A` (read in place, or packed
/// into the thread's buffer), per run of packed panels of `B` ([`column_run`]), per block
/// of [`KC`] rows of `B`, per panel of the run (which then stays in L2), every
/// micro-panel of `A`. Each block of `KC` adds its sums into `C`, so a tile of `C` is
/// read back once per block: a run keeps the tiles being added to in L2 between blocks.
#[inline(always)]
fn gemm_serial<S: Simd>(
    simd: S,
    Product {
        a,
        b,
        beta,
        bias,
        c,
    }: Product<'_>,
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
    // sequential streams, which saves the packing (about a cycle per element; see
    // docs/cpu-performance.md). Rows a multiple of 4 KiB apart would all fall in one
    // L1 set: those, and transposed or strided `A`, are packed.
    let in_place = a.col_stride == 1 && a.row_stride % ALIASING_STRIDE != 0;
    // The packed blocks of `A`, kept per thread: a fresh zeroed 96 KiB on every call
    // (a stack array) was a memset per per-step product.
    let mut a_pack = A_PACK.take();
    for m0 in (0..m).step_by(MC) {
        let mc = MC.min(m - m0);
        let (run, keep_all) = column_run(panels, (mc, k), in_place);
        let need = if keep_all { mc * k } else { MC * KC };
        if a_pack.len() < need {
            a_pack.resize(need, 0.0);
        }
        for j_run in (0..panels).step_by(run) {
            for (block, k0) in b.panels().chunks(KC * panels * NR).zip((0..k).step_by(KC)) {
                let kc = KC.min(k - k0);
                // This block's packed rows of `A`, packed with the first run: kept for
                // the others, or (not kept) there is only one run.
                let packed = &mut a_pack[if keep_all { mc * k0 } else { 0 }..][..mc * kc];
                if !in_place && j_run == 0 {
                    for (i0, r) in panel_rows(mc, MR) {
                        let dst = &mut packed[i0 * kc..(i0 + r) * kc];
                        with_rows!(r, R => pack_a::<R>(a, m0 + i0, k0, dst));
                    }
                }
                let packed = &*packed;
                // The first block overwrites (or scales) C and adds the bias; later
                // blocks add to it.
                let ep = if k0 == 0 {
                    Epilogue { scale: beta, bias }
                } else {
                    Epilogue {
                        scale: 1.0,
                        bias: None,
                    }
                };
                let run_panels = block.chunks(kc * NR).enumerate().skip(j_run).take(run);
                for (jp, b_panel) in run_panels {
                    for (i0, r) in panel_rows(mc, if in_place { IN_PLACE_MR } else { MR }) {
                        let a_panel = if in_place {
                            APanel::Rows {
                                data: &a.data[(m0 + i0) * a.row_stride + k0..],
                                row_stride: a.row_stride,
                            }
                        } else {
                            APanel::Packed(&packed[i0 * kc..(i0 + r) * kc])
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
    }
    A_PACK.set(a_pack);
}

/// Panels of `B` per run of [`gemm_serial`] for a block of `mc` rows of `A` over `k`,
/// and whether every block of `KC` of those rows of `A` is packed at once (kept while
/// the runs pass): runs of [`RUN_PANELS`] where `K` spans several blocks and `A`'s
/// rows are read in place or fit [`A_KEPT_MAX`] packed; else one run of every panel,
/// each block of `A` packed just before it is used (`C` is then visited once per block
/// whole, as the classic order does: a packed `A` too large to keep would be read from
/// further away at every run instead).
fn column_run(panels: usize, (mc, k): (usize, usize), in_place: bool) -> (usize, bool) {
    let keep_all = !in_place && mc * k <= A_KEPT_MAX;
    match k > KC && (in_place || keep_all) {
        true => (RUN_PANELS.min(panels), keep_all),
        false => (panels.max(1), false),
    }
}

/// Panels of `B` per run of [`gemm_serial`]: 128 columns, whose tiles of `C` (`[50,
/// 128]`, 25 KiB, for the per-step product of an LSTM of 1024 units on 50 rows a thread)
/// stay in L2 while the run's panels of the next block (256 KiB) pass. Over the whole
/// width (4096 columns), `C` (800 KiB) was gone from L2 by the next block, and reading
/// it back was 5-9% of the product (perf, 2-core Zen 4, docs/cpu-performance.md).
const RUN_PANELS: usize = 4;

/// The most elements of `A` kept packed across the runs: 256 KiB, a quarter of the
/// smallest L2 of the AVX-512 parts (1 MiB): 64 rows of 1024.
const A_KEPT_MAX: usize = 1 << 16;

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

impl WithSimd for Product<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        gemm_serial(simd, self);
    }
}

/// One thread's GEMM of `p` ([`super::gemm_packed_serial`]).
pub(super) fn serial(token: Token, p: Product<'_>) {
    <Token as Simd>::vectorize(token, p);
}
