//! What the AVX-512 fast paths of every recurrent cell share (`lstm/fast.rs`,
//! `gru/fast.rs`): the split of the batch into rows per thread (the time loop runs on
//! every thread at once, each over its own rows for all steps: rows of a recurrent layer
//! never exchange data, so there is no barrier per step; [`PartRows`] says where a
//! thread's rows of a step lie) and the input projection with its bias, prepared once per
//! call, which each thread applies to its own rows.

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::tokens::{token_index, Table};
use tensorfit_core::RecurrentDims;

use crate::kernels::gemm_fast::{gemm_packed, gemm_packed_serial, MatRef, PackedB, Token, KC};
use crate::kernels::packs::Packer;
use crate::kernels::PARALLEL_MIN_ELEMENTS;

/// Batch rows per thread for a call of `steps` steps over `batch` rows of a layer of
/// `hidden` units. One part when the call is too small to be worth splitting ([`splits`]).
pub(crate) fn rows_per_part((steps, batch): (usize, usize), hidden: usize) -> usize {
    let threads = crate::threads::available().max(1);
    if splits((steps, batch), hidden) {
        batch.div_ceil(threads).max(1)
    } else {
        batch.max(1)
    }
}

/// The least work of a call's recurrent products, in multiply-adds (`T·B·G·H·H`), for
/// which its time loop is split across threads ([`splits`]): the split costs a pool task
/// per call (a thread woken), never a meeting per step. Split from 1,024 to 8,192 gate
/// values a step (B = 4 to 32, H = 16 to 64, 50 to 2000 steps: 6.5 M to 600 M), the time
/// was 0.70-0.89× that of one thread; at B = 8, H = 64 over 10 steps (1.3 M) the same
/// or, with the machine busy, 1.65× (2-core Zen 5, 2026-12-05, docs/benchmark-matrix.md).
const SPLIT_MIN_MULADDS: usize = 1 << 22;

/// Whether the time loop of a call of `steps` steps over `batch` rows of a layer of
/// `hidden` units is split across threads: for two rows or more, when a step's gates are
/// at least `PARALLEL_MIN_ELEMENTS` values over the call (measured as four gate blocks,
/// the LSTM's, for both cells) and its products at least [`SPLIT_MIN_MULADDS`]. A
/// one-step call (a stream step) of a few rows runs on one thread.
pub(crate) fn splits((steps, batch): (usize, usize), hidden: usize) -> bool {
    let gates = steps * batch * 4 * hidden;
    batch >= 2 && gates >= PARALLEL_MIN_ELEMENTS && gates * hidden >= SPLIT_MIN_MULADDS
}

/// One thread's batch rows, `start..end` of `batch`, as [`rows_per_part`] splits a batch,
/// with their sequences' lengths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartRows<'a> {
    batch: usize,
    start: usize,
    end: usize,
    /// The lengths of these rows only (row 0 is `start`).
    pub lengths: RowLengths<'a>,
}

impl<'a> PartRows<'a> {
    /// Part `p` of a batch of `batch` rows split into parts of `part` rows, holding `m`
    /// of them; `lengths`: every row's.
    pub fn new(
        batch: usize,
        (p, part): (usize, usize),
        m: usize,
        lengths: Option<&'a [f32]>,
    ) -> Self {
        let (start, end) = (p * part, p * part + m);
        PartRows {
            batch,
            start,
            end,
            lengths: RowLengths(lengths).rows(start..end),
        }
    }

    /// The part's elements of step `t` of a `[T, B, width]` tensor (with `t = 0`, of a
    /// `[B, width]` one: an initial state).
    #[inline(always)]
    pub fn at(&self, width: usize, t: usize) -> Range<usize> {
        (t * self.batch + self.start) * width..(t * self.batch + self.end) * width
    }

    /// The part's state before step `t`: its rows of step `t - 1` of `seq`
    /// `[T, B, width]`, or at `t = 0` of the initial state `init` `[B, width]`.
    #[inline(always)]
    pub fn before<'s>(
        &self,
        width: usize,
        t: usize,
        (init, seq): (&'s [f32], &'s [f32]),
    ) -> &'s [f32] {
        match t {
            0 => &init[self.at(width, 0)],
            _ => &seq[self.at(width, t - 1)],
        }
    }
}

/// `buf` `[T, B, width]` split into parts of `rows` batch rows: `out[p][t]` is part
/// `p`'s rows of step `t`.
pub(crate) fn split_steps(buf: &mut [f32], step: usize, part: usize) -> Vec<Vec<&mut [f32]>> {
    let parts = step.div_ceil(part.max(1));
    let mut out: Vec<Vec<&mut [f32]>> = (0..parts).map(|_| Vec::new()).collect();
    for step_slice in buf.chunks_mut(step.max(1)) {
        for (p, piece) in step_slice.chunks_mut(part.max(1)).enumerate() {
            out[p].push(piece);
        }
    }
    out
}

/// The input projection with its bias (the LSTM's `b_ih + b_hh`, the GRU's `b_ih`),
/// prepared once per call: `w_ihᵀ` packed for the GEMM of dense input; on token input
/// (the ids have been checked by `recurrent::check_inputs`) each row's gates are token
/// `v`'s column of `w_ih` plus the bias, read from a table `[V, G·H]` formed once when the
/// call has at least as many rows as there are tokens, and gathered from `w_ih` where they
/// are read otherwise: the table costs `V·G·H` values a call (800 MiB at V = 50,000 and
/// H = 1024), outside any plan, for a call that reads fewer rows than that. Both give the
/// same sums.
pub(crate) enum Projection<'w> {
    Dense {
        w_ih_t: Arc<PackedB>,
        bias: Vec<f32>,
    },
    /// `[V, G·H]`: row `v` is `w_ih[:, v] + bias`.
    Table(Vec<f32>),
    /// Token `v`'s column of `w_ih`, where `columns` says, and the bias.
    Columns {
        w_ih: &'w [f32],
        columns: Table,
        bias: Vec<f32>,
    },
}

impl<'w> Projection<'w> {
    /// `packs` packs `w_ih` (dense input).
    pub(crate) fn new(
        d: &impl RecurrentDims,
        (w_ih, packs): (&'w [f32], &mut Packer<'_>),
        bias: Vec<f32>,
    ) -> Self {
        let ((input, tokens), width) = (d.input(), d.gate_width());
        if !tokens {
            let w_ih_t = packs.pack("w_ih", MatRef::row_major(w_ih, width, input).t());
            return Projection::Dense { w_ih_t, bias };
        }
        let columns = d.token_table();
        if d.rows() < input {
            return Projection::Columns {
                w_ih,
                columns,
                bias,
            };
        }
        let mut table = vec![0.0; input * width];
        for (v, row) in table.chunks_exact_mut(width.max(1)).enumerate() {
            for (j, (t, b)) in row.iter_mut().zip(&bias).enumerate() {
                *t = w_ih[columns.at(v, j)] + b;
            }
        }
        Projection::Table(table)
    }

    /// [`Projection::project`] for the rows of `x` inside their sequence at step `t`
    /// (every row without lengths; `live` made for `m` rows of `x` and of `gates`): a row
    /// past its end is left for the cell's pass to overwrite.
    pub(crate) fn project_live(
        &self,
        token: Token,
        (x, m, gates): (&[f32], usize, &mut [f32]),
        live: &mut LiveRows,
        (t, lengths): (usize, RowLengths<'_>),
    ) {
        match self {
            Projection::Dense { w_ih_t, bias } => {
                live.gemm(
                    token,
                    w_ih_t,
                    (x, gates),
                    (t, lengths),
                    Written::Biased(bias),
                );
            }
            Projection::Table(_) | Projection::Columns { .. } => {
                // One row each, copied: only the live ones.
                let width = (gates.len() / m.max(1)).max(1);
                let rows = gates.chunks_exact_mut(width).zip(x).enumerate();
                for (_, (g, id)) in rows.filter(|(r, _)| !lengths.past_end(t, *r)) {
                    self.project(token, std::slice::from_ref(id), 1, g);
                }
            }
        }
    }

    /// `gates = x · w_ihᵀ + bias` for the `m` rows of `x` (`m·I` features or `m` ids).
    pub(crate) fn project(&self, token: Token, x: &[f32], m: usize, gates: &mut [f32]) {
        let width = (gates.len() / m.max(1)).max(1);
        match self {
            Projection::Dense { w_ih_t, bias } => {
                let x = MatRef::row_major(x, m, w_ih_t.k());
                gemm_packed_serial(token, x, w_ih_t, 0.0, Some(bias), gates);
            }
            Projection::Table(table) => {
                let vocab = table.len() / width;
                for (row, &id) in gates.chunks_exact_mut(width).zip(x) {
                    let v = token_index(id, vocab).unwrap_or_default();
                    row.copy_from_slice(&table[v * width..(v + 1) * width]);
                }
            }
            Projection::Columns {
                w_ih,
                columns,
                bias,
            } => {
                for (row, &id) in gates.chunks_exact_mut(width).zip(x) {
                    let v = token_index(id, columns.vocab).unwrap_or_default();
                    for (j, (g, b)) in row.iter_mut().zip(bias).enumerate() {
                        *g = w_ih[columns.at(v, j)] + b;
                    }
                }
            }
        }
    }
}

/// What a step's recurrent GEMM over a thread's rows does with `c`.
#[derive(Clone, Copy)]
pub(crate) enum Written<'b> {
    /// `c += a · w`.
    Added,
    /// `c = a · w + bias`.
    Biased(&'b [f32]),
}

/// The per-step recurrent GEMM of one thread's rows over the rows inside their sequence
/// only (with lengths; every row without), and the buffers it gathers them into, made
/// once per call (one step of the thread's rows of `a` and of `c`: outside the plan, the
/// size of one step of the layer's gates at most).
///
/// Each row of a product is its own sum, whatever rows run beside it, so a row inside its
/// sequence gets what the whole product gives it bit for bit: the rows run in place when
/// they are one run, else gathered (with their `c`), multiplied and put back. A row past its end is not
/// multiplied: with [`Written::Added`] its `c` gets `+ 0.0`, what the product adds for its row
/// of `a` being zero (the backward's gradients past the end; the forward's gates there
/// are overwritten), with [`Written::Biased`] it is left for the cell's pass to overwrite.
pub(crate) struct LiveRows {
    live: Vec<usize>,
    a: Vec<f32>,
    c: Vec<f32>,
}

impl LiveRows {
    /// For `m` rows of `a` `[m, k]` and `c` `[m, n]`; with no lengths, nothing is held.
    pub(crate) fn new(lengths: RowLengths<'_>, m: usize, (k, n): (usize, usize)) -> Self {
        let held = if lengths.0.is_some() { m } else { 0 };
        LiveRows {
            live: Vec::with_capacity(held),
            a: vec![0.0; held * k],
            c: vec![0.0; held * n],
        }
    }

    /// `c` (`[m, w.n()]`) as `into` says, from `a` (`[m, w.k()]`) and `w`, over the rows
    /// inside their sequence at step `t`; at step 0, an `a` of zeros is not multiplied
    /// ([`zero_product`]).
    #[inline(always)]
    pub(crate) fn gemm(
        &mut self,
        token: Token,
        w: &PackedB,
        (a, c): (&[f32], &mut [f32]),
        (t, lengths): (usize, RowLengths<'_>),
        into: Written<'_>,
    ) {
        let (k, n) = (w.k(), w.n());
        let m = c.len() / n.max(1);
        if t == 0 && a.iter().all(|&v| v == 0.0) {
            zero_product(c, n, into, |r| lengths.past_end(t, r));
            return;
        }
        let (beta, bias) = match into {
            Written::Added => (1.0, None),
            Written::Biased(bias) => (0.0, Some(bias)),
        };
        self.live.clear();
        self.live
            .extend((0..m).filter(|&r| !lengths.past_end(t, r)));
        let live = &self.live;
        if live.len() == m {
            gemm_packed_serial(token, MatRef::row_major(a, m, k), w, beta, bias, c);
            return;
        }
        if let Written::Added = into {
            for r in (0..m).filter(|&r| lengths.past_end(t, r)) {
                for v in &mut c[r * n..(r + 1) * n] {
                    *v += 0.0;
                }
            }
        }
        let Some((&first, &last)) = live.first().zip(live.last()) else {
            return;
        };
        let rows = live.len();
        if last + 1 - first == rows {
            // One run of rows: in place.
            let a_run = MatRef::row_major(&a[first * k..(last + 1) * k], rows, k);
            let c_run = &mut c[first * n..(last + 1) * n];
            gemm_packed_serial(token, a_run, w, beta, bias, c_run);
            return;
        }
        // Scattered rows: gathered (with their old `c` when it is added to: the product
        // adds each block of `KC` terms to it in turn), multiplied, put back.
        for (dst, &r) in self.a.chunks_exact_mut(k.max(1)).zip(live) {
            dst.copy_from_slice(&a[r * k..(r + 1) * k]);
        }
        let (a_live, c_live) = (&self.a[..rows * k], &mut self.c[..rows * n]);
        if let Written::Added = into {
            for (dst, &r) in c_live.chunks_exact_mut(n.max(1)).zip(live) {
                dst.copy_from_slice(&c[r * n..(r + 1) * n]);
            }
        }
        gemm_packed_serial(
            token,
            MatRef::row_major(a_live, rows, k),
            w,
            beta,
            bias,
            c_live,
        );
        for (src, &r) in c_live.chunks_exact(n.max(1)).zip(live) {
            c[r * n..(r + 1) * n].copy_from_slice(src);
        }
    }
}

/// What [`LiveRows::gemm`] writes into `c` (`[m, n]`) when every element of `a` is zero
/// (at step 0, the initial state, zero unless the caller gives one, as in PyTorch): each
/// sum is then `+0` (`0·w` is `±0`, and `+0 + -0` is `+0`), so `c + 0` with
/// [`Written::Added`], `bias + 0` with [`Written::Biased`] on the rows inside their
/// sequence (`past_end(r)` false), bit for bit what the product writes, at the cost of a
/// pass over `c`: at T = 10 the first step's product was a tenth of the layer's. (A
/// non-finite weight would have made the product NaN, `0·∞`; the step after reads a state
/// that is not zero, and the NaN comes then.)
fn zero_product(c: &mut [f32], n: usize, into: Written<'_>, past_end: impl Fn(usize) -> bool) {
    match into {
        Written::Added => c.iter_mut().for_each(|v| *v += 0.0),
        Written::Biased(bias) => {
            let rows = c.chunks_exact_mut(n.max(1)).enumerate();
            for (_, row) in rows.filter(|(r, _)| !past_end(*r)) {
                for (v, &b) in row.iter_mut().zip(bias) {
                    *v = b + 0.0;
                }
            }
        }
    }
}

/// `c = aᵀ · b` (`a` `[K, M]`, `b` `[K, N]`, both row-major; `c` `[M, N]`, with `beta` 0 or
/// any `beta` as in `gemm`) summed over the rows `k` that `kept(k)` holds only: a weight gradient
/// over the real steps of a padded batch, whose padded rows of `a` are zeros.
///
/// The sums are those of the whole product (`gemm::gemm`'s packed path) bit for bit: there
/// each element is summed in blocks of `KC` rows of the product, each block's sum
/// starting at +0 and adding its terms in order with one FMA each, then added into `c`.
/// Here the blocks are the same rows, each packed with its kept rows only, in order: a
/// dropped term is `0 · v` for a finite `v`, which leaves a sum that is never -0 as it was.
/// A block with no kept row adds +0 to `c` as the whole product's does (`-0` becomes +0).
///
/// It runs as `cᵀ = bᵀ · a`: `a`, the wide operand (the gates), is packed straight from
/// its kept rows, and the narrow `b` (the inputs or the states) is gathered into the
/// micro-kernel's rows; with few columns in `b` (3 input features) the whole product's
/// `[M, N]` tiles were mostly padding. `cᵀ` is held in a buffer the size of `c`.
pub(crate) fn gemm_tn_kept(
    token: Token,
    (a, b): (MatRef<'_>, MatRef<'_>),
    kept: impl Fn(usize) -> bool,
    beta: f32,
    c: &mut [f32],
) {
    let (k, m, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    // cᵀ, starting as c's old values when they are added to.
    let mut c_t = vec![0.0; m * n];
    if beta != 0.0 {
        for (i, row) in c.chunks_exact(n).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                c_t[j * m + i] = v;
            }
        }
    }
    let mut rows = Vec::with_capacity(KC.min(k));
    let mut b_rows = Vec::with_capacity(KC.min(k) * n);
    for (block, k0) in (0..k).step_by(KC).enumerate() {
        let scale = if block == 0 { beta } else { 1.0 };
        rows.clear();
        rows.extend((k0..(k0 + KC).min(k)).filter(|&r| kept(r)));
        if rows.is_empty() {
            // The block's sum is +0: what adding it (or writing it) leaves.
            for v in c_t.iter_mut() {
                *v = match scale {
                    0.0 => 0.0,
                    1.0 => *v + 0.0,
                    _ => scale.mul_add(*v, 0.0),
                };
            }
            continue;
        }
        b_rows.clear();
        for &r in &rows {
            b_rows.extend_from_slice(&b.data[r * b.row_stride..][..n]);
        }
        let b_t = MatRef::row_major(&b_rows, rows.len(), n).t();
        let a_kept = PackedB::from_rows(a, &rows);
        gemm_packed(token, b_t, &a_kept, scale, None, &mut c_t);
    }
    for (i, row) in c.chunks_exact_mut(n).enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = c_t[j * m + i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm::{gemm, mat, mat_mut};
    use crate::kernels::gemm_fast::simd;
    use tensorfit_core::seq_lengths::past_end;
    use tensorfit_testing::{Rng, TestRng};

    #[test]
    fn a_steps_product_over_the_live_rows_is_the_whole_products_bit_for_bit() {
        let Some(token) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(5);
        // (rows, k, n) with K over two blocks of KC, and each way the live rows fall: all,
        // one run, scattered, none.
        for (m, k, n) in [
            (16, 32, 128),
            (9, KC + 134, 130),
            (3, KC + 44, 1200),
            (24, 5, 3),
        ] {
            let w = rng.signed_vec(k * n);
            let w = PackedB::new(MatRef::row_major(&w, k, n));
            // Signed zeros in the bias and the old values: what `+ 0` changes.
            let mut bias = rng.signed_vec(n);
            bias[0] = -0.0;
            // At step 0 also with `a` all zeros (an initial state; `zero_product`).
            for (t, zero_a) in [(4, false), (0, false), (0, true)] {
                let all_live = vec![9.0; m];
                let run: Vec<f32> = (0..m)
                    .map(|r| if (1..m - 1).contains(&r) { 5.0 } else { 2.0 })
                    .collect();
                let scattered: Vec<f32> = (0..m).map(|r| [0.0, 7.0, 4.0][r % 3]).collect();
                for lengths in [all_live, run, scattered, vec![3.0; m]] {
                    let rows = RowLengths(Some(&lengths));
                    // Rows of `a` past their end are zeros (the backward's gradients).
                    let mut a = rng.signed_vec(m * k);
                    for (r, row) in a.chunks_exact_mut(k).enumerate() {
                        if rows.past_end(t, r) || zero_a {
                            row.fill(if r % 2 == 0 { 0.0 } else { -0.0 });
                        }
                    }
                    let mut old = rng.signed_vec(m * n);
                    old.iter_mut().step_by(3).for_each(|v| *v = -0.0);
                    let mut live = LiveRows::new(rows, m, (k, n));
                    for into in [Written::Added, Written::Biased(&bias)] {
                        let (beta, b) = match into {
                            Written::Added => (1.0, None),
                            Written::Biased(bias) => (0.0, Some(bias)),
                        };
                        let mut want = old.clone();
                        gemm_packed_serial(
                            token,
                            MatRef::row_major(&a, m, k),
                            &w,
                            beta,
                            b,
                            &mut want,
                        );
                        let mut got = old.clone();
                        live.gemm(token, &w, (&a, &mut got), (t, rows), into);
                        for r in 0..m {
                            // With a bias, a row past its end is the cell pass's to overwrite.
                            if matches!(into, Written::Biased(_)) && rows.past_end(t, r) {
                                continue;
                            }
                            let (g, w) = (&got[r * n..][..n], &want[r * n..][..n]);
                            let same = g.iter().zip(w).all(|(g, w)| g.to_bits() == w.to_bits());
                            assert!(
                                same,
                                "{m}x{k}x{n} t {t} zero a {zero_a} lengths {lengths:?} row {r}: \
                             not bit-equal"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_sum_over_the_real_steps_is_the_whole_products_bit_for_bit() {
        let Some(token) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(7);
        // (T, B, M, N, longest length): K over several blocks of KC rows, one block with
        // every row padded (T = 2.5·KC / 16, B = 16, lengths <= 10: the second block's
        // steps, KC / 16 ..), few columns.
        for (steps, batch, m, n, longest) in [
            (5 * KC / 32, 16, 128, 3, 10),
            (37, 13, 40, 32, 37),
            (5, 3, 12, 7, 5),
            (30, 1, 20, 33, 0),
        ] {
            let lengths: Vec<f32> = (0..batch).map(|_| rng.range(0, longest) as f32).collect();
            let k = steps * batch;
            let kept = |r: usize| !past_end(r / batch, lengths[r % batch]);
            // `a` (the gates' gradients) is zero on padded rows; `b` is anything finite.
            let mut a = rng.signed_vec(k * m);
            for (r, row) in a.chunks_exact_mut(m).enumerate() {
                if !kept(r) {
                    row.fill(0.0);
                }
            }
            let b = rng.signed_vec(k * n);
            for beta in [0.0, 1.0] {
                let old = rng.signed_vec(m * n);
                let mut want = old.clone();
                let (a_m, b_m) = (mat(&a, k, m).unwrap(), mat(&b, k, n).unwrap());
                let mut want_m = mat_mut(&mut want, m, n).unwrap();
                gemm(1.0, a_m.t(), b_m, beta, &mut want_m).unwrap();
                let mut got = old;
                let operands = (MatRef::row_major(&a, k, m), MatRef::row_major(&b, k, n));
                gemm_tn_kept(token, operands, kept, beta, &mut got);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "T {steps} B {batch} M {m} N {n} beta {beta}: not bit-equal"
                );
            }
        }
    }
}
