//! The column schedule of the recurrent fast paths' inference forward (`lstm/columns.rs`,
//! `gru/columns.rs`): for a batch too small to split by rows, each kernel thread owns a
//! fixed share of the hidden units for the whole sequence — the columns of all `G` gate
//! blocks of those units in `w_ihᵀ` and `w_hhᵀ`, kept packed for it (`packs.rs`) — and
//! computes, per step, its units' input projections, their recurrent products over the
//! whole `h_{t-1}`, and their cells. The threads then meet once per step (`Exchange`):
//! `h_t` must be whole before any thread's next product.
//!
//! Why: with one row (or a few), the row schedule (`fast.rs`) runs the layer on one
//! thread, streaming the whole of `w_hh` through one core per step, and a pool task per
//! step costs more than the step. Split by columns, each core streams its share only,
//! and the rows of every tile are the whole batch.
//!
//! The results are the row schedule's bit for bit: each element of a product is its own
//! sum over `k`, in the same blocks of `KC`, whatever columns are packed beside it
//! (`PackedB::from_columns`), and the gate passes are per unit; whichever thread runs a
//! share's step ([`run_shares`]; on one thread, or inline, one thread runs them all in
//! turn), it forms the same sums.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::tokens::token_index;

use super::fast::{LiveRows, Projection, Written};
use crate::kernels::gemm_fast::{self, gemm_packed_serial, vectorize, MatRef, PackedB, Token};
use crate::kernels::packs::Packer;

/// Units per share are cut at multiples of this: one AVX-512 vector of the gate passes.
const UNIT_ALIGN: usize = 16;

/// The least work of one share's step of the recurrent product for which the column
/// schedule pays for its meeting per step, in multiply-adds, a single row counted as two
/// (the micro-kernel's one-row tiles are bound by loads, at about half the speed per row
/// of two-row ones): inference, then training (whose steps exchange more: the backward's
/// `dgates`, `G` values a unit, and two meetings). A step shorter than this is at the
/// mercy of the other thread: on this shared 2-core Zen 5 (2026-12-05,
/// docs/benchmark-matrix.md) H = 64 at B = 1 or 8 (16 K, 65 K a share) ran 0.60-0.75× the
/// time by columns in quiet rounds and 1.07-1.14× when the host was busy, H = 128 at B = 8
/// in training (262 K) 0.98× and 1.3-1.6×; H = 250 at B = 1 (256 K) 0.37× and H = 250 at B
/// = 4 in training (512 K) 0.82-0.97× in every round. (First set 2026-12-04 from H = 64 at
/// B = 8 and 16, 1.11× and 1.17× by columns on a busy host.)
pub(crate) const SHARE_STEP_MULADDS: [usize; 2] = [3 << 16, 3 << 17];

/// The least work of one share over a call (its steps' products), in multiply-adds as
/// [`SHARE_STEP_MULADDS`] counts them, for which the column schedule pays for its start
/// (a second thread woken per call): H = 64 at B = 8 over 10 steps (655 K) ran 1.3× the
/// time by columns, H = 64 at B = 32 over 10 steps (2.6 M) 0.83× (2026-12-05).
pub(crate) const SHARE_CALL_MULADDS: usize = 1 << 20;

/// Rows per thread from which the row schedule's tiles no longer gain from the column
/// schedule's taller ones, for a layer whose `w_hh` is `w_hh_bytes`, in a `pass`: with
/// fewer, a tile is bound by streaming its share of `w_hh`. Measured on a 2-core Zen 4
/// (2026-12-05, docs/benchmark-matrix.md "13:06" and "17:26"; Zen 5 2026-12-04):
///
/// - 4 where a thread's whole `w_hh` is at most [`W_HH_STREAM_BYTES`]: read from near
///   caches, the row schedule's thin tiles lose nothing and the column schedule's
///   meetings cost. At 4 rows (B = 8) rows took 0.86-0.93× the time in training at H =
///   192-384, 0.94-0.95× in inference at H = 192 and 250; at 2 and 3 rows, level.
/// - 8 beyond it in inference, between the shapes on either side: H = 1024 at 4 rows
///   ran 0.80-0.86× the time by columns, at 8 rows 1.05×; 50 rows at H = 64 1.25×.
/// - 4 in training whatever `w_hh`: its steps also carry the input and weight
///   gradients' products, which columns do not shorten, and meet twice. At 4-7 rows
///   and `w_hh` beyond 4 MiB rows took 0.90-0.95× the column schedule's time at H =
///   1024 (B = 8, T = 10-200; B = 14), 0.76-0.94× at H = 768, 0.88× at H = 640, B = 12,
///   1.01× at H = 1024, B = 12.
pub(crate) fn rows_stream_bound(w_hh_bytes: usize, pass: Pass) -> usize {
    if w_hh_bytes > W_HH_STREAM_BYTES && pass == Pass::Inference {
        8
    } else {
        4
    }
}

/// The size of `w_hh` beyond which [`rows_stream_bound`] takes the row schedule to be
/// bound by streaming it: 4 MiB, an LSTM of 512 units (at H = 512 and 768 with 4 rows a
/// thread, the two schedules were within 5% of each other either way; at 1024 columns
/// won by 14%).
const W_HH_STREAM_BYTES: usize = 4 << 20;

/// What a recurrent kernel computes: an inference forward, or a training pass (a forward
/// that keeps what its backward reads, or the backward).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Inference,
    Training,
}

impl Pass {
    /// A forward's pass: training when it keeps what its backward reads.
    pub(crate) fn forward(keep_for_backward: bool) -> Self {
        match keep_for_backward {
            true => Pass::Training,
            false => Pass::Inference,
        }
    }
}

/// How many shares of units a pass of `steps` steps of a layer of `batch` rows, `hidden`
/// units and `gates` gate blocks runs in on `threads` kernel threads: 1 (the row
/// schedule) unless the row schedule leaves threads idle (`fast::splits`: the batch is
/// not split) or gives each fewer rows than [`rows_stream_bound`], and each share's work
/// pays for the schedule's meetings ([`SHARE_STEP_MULADDS`]) and start
/// ([`SHARE_CALL_MULADDS`]). Never for one step (a stream step): the schedule's gain is
/// each thread's share reused over the steps, and its start (a pool task and a second
/// thread woken, per call) would be all a single step gets.
pub(crate) fn shares(
    (steps, batch): (usize, usize),
    (hidden, gates): (usize, usize),
    pass: Pass,
    threads: usize,
) -> usize {
    let threads = if steps < 2 { 1 } else { threads };
    let parts = threads.min(hidden.div_ceil(UNIT_ALIGN)).max(1);
    let step = hidden * gates * hidden.div_ceil(parts) * batch.max(2);
    let least = match pass {
        Pass::Inference => SHARE_STEP_MULADDS[0],
        Pass::Training => SHARE_STEP_MULADDS[1],
    };
    let pays = step >= least && step * steps >= SHARE_CALL_MULADDS;
    let thin_rows = match super::fast::splits((steps, batch), hidden) {
        true => {
            let w_hh_bytes = gates * hidden * hidden * std::mem::size_of::<f32>();
            batch.div_ceil(threads.max(1)) < rows_stream_bound(w_hh_bytes, pass)
        }
        false => true,
    };
    if parts > 1 && thin_rows && pays {
        parts
    } else {
        1
    }
}

/// [`shares`] on the kernel pool's threads. A call that runs inline (a stream step of a
/// few rows: `threads::runs_inline`) has one thread and takes the row schedule: the
/// same bits, and the whole weights kept packed beside the shares (counted:
/// `kernel_memory::kept_bytes`).
pub(crate) fn shares_on_pool(rows: (usize, usize), layer: (usize, usize), pass: Pass) -> usize {
    shares(rows, layer, pass, crate::threads::kernel_threads())
}

/// The shares a kernel call runs in here ([`shares_on_pool`]), or `None` for the row
/// schedule: one share, or no second thread to run them on (a call run inline).
pub(crate) fn shares_here(
    rows: (usize, usize),
    layer: (usize, usize),
    pass: Pass,
) -> Option<usize> {
    let shares = shares_on_pool(rows, layer, pass);
    (shares > 1 && crate::threads::available() > 1).then_some(shares)
}

/// `hidden` units cut into `parts` runs, as equal as multiples of [`UNIT_ALIGN`] allow.
pub(crate) fn unit_shares(hidden: usize, parts: usize) -> Vec<Range<usize>> {
    let per = hidden.div_ceil(parts.max(1)).div_ceil(UNIT_ALIGN) * UNIT_ALIGN;
    (0..parts)
        .map(|p| (p * per).min(hidden)..((p + 1) * per).min(hidden))
        .filter(|r| !r.is_empty())
        .collect()
}

/// The columns of a `[K, G·H]` (`w_ihᵀ`, `w_hhᵀ`) that units `units` own: gate block by
/// gate block, so that a share's gates lie as a layer's do, `G` blocks of its units.
pub(crate) fn gate_columns(hidden: usize, gates: usize, units: &Range<usize>) -> Vec<usize> {
    (0..gates)
        .flat_map(|g| units.clone().map(move |u| g * hidden + u))
        .collect()
}

/// Bytes of the packed copies of a weight `[G·H, K]` kept in shares for the column
/// schedule on `threads` threads (each share's `G·w` columns padded to whole panels).
pub(crate) fn kept_share_bytes(k: usize, hidden: usize, gates: usize, threads: usize) -> u64 {
    let parts = threads.min(hidden.div_ceil(UNIT_ALIGN)).max(1);
    if parts < 2 {
        return 0;
    }
    let shares = unit_shares(hidden, parts);
    let elements = shares
        .iter()
        .map(|u| gemm_fast::packed_b_elements(k, gates * u.len()));
    (elements.sum::<usize>() * 4) as u64
}

/// Runs `step` over every share for `steps` steps of a layer of `batch` rows, on as many
/// kernel threads as there are shares (or as are available), and returns the shares.
/// What the shares exchange is `[B, width]` per step: `h_t` forward (`width` = H, the
/// first step reading `before` = `h0`), `dgates_t` backward (`width` = G·H).
///
/// Each thread starts each step with its own share, then takes any share of the step no
/// thread has taken yet, then waits for the step's shares in progress elsewhere. So no
/// thread ever waits for a share that no thread is running: a thread that starts late,
/// or is descheduled between steps, leaves its share to the others (the same sums,
/// whoever forms them), and two layers' gangs on one pool cannot wait for each other.
/// `published(share)`: the columns the share owns (runs of the `width`) and its part
/// `[B, Σ run]` of what it publishes after `step(share, t, whole of step t - 1)`.
pub(crate) fn run_shares<S: Send>(
    token: Token,
    shares: Vec<S>,
    (batch, width, steps, before): (usize, usize, usize, &[f32]),
    published: impl Fn(&S) -> (&[Range<usize>], &[f32]) + Sync,
    step: impl Fn(&mut S, usize, &[f32]) + Sync,
) -> Vec<S> {
    let n = shares.len();
    let exchange = Exchange::new(batch, width, n);
    // Each share with the step it is at.
    let shares: Vec<Mutex<(usize, S)>> = shares.into_iter().map(|s| Mutex::new((0, s))).collect();
    let worker = |first: usize| {
        let _guard = Abandon(&exchange);
        vectorize(
            Some(token),
            #[inline(always)]
            || {
                // What step `read_for` reads (step t - 1's whole).
                let (mut h_prev, mut read_for) = (before.to_vec(), 0);
                for t in 0..steps {
                    for i in (first..n).chain(0..first) {
                        let Ok(mut taken) = shares[i].try_lock() else {
                            continue;
                        };
                        let (at, share) = &mut *taken;
                        if *at != t {
                            continue;
                        }
                        // Holding a share of step t, no share is past it: step
                        // t - 1's whole is written and stays so while it is read.
                        if read_for != t {
                            exchange.read(t - 1, &mut h_prev);
                            read_for = t;
                        }
                        step(share, t, &h_prev);
                        let (columns, part) = published(share);
                        exchange.publish(t, columns, part);
                        *at = t + 1;
                        drop(taken);
                        exchange.arrived.fetch_add(1, Ordering::Release);
                    }
                    if !exchange.wait(t) {
                        return;
                    }
                }
            },
        )
    };
    let threads = n.min(crate::threads::available());
    if threads > 1 {
        rayon::scope(|s| {
            for p in 1..threads {
                let worker = &worker;
                s.spawn(move |_| worker(p));
            }
            worker(0);
        });
    } else {
        worker(0);
    }
    let shares = shares.into_iter();
    shares
        .map(|m| m.into_inner().unwrap_or_else(|p| p.into_inner()).1)
        .collect()
}

/// [`run_shares`] backwards through `steps` steps, the shares exchanging `[B, width]` gate
/// gradients: `steps + 1` meetings, step `s` as [`backward_step`] reads it.
pub(crate) fn run_backward_shares<S: Send>(
    token: Token,
    shares: Vec<S>,
    (batch, width, steps): (usize, usize, usize),
    published: impl Fn(&S) -> (&[Range<usize>], &[f32]) + Sync,
    step: impl Fn(&mut S, usize, &[f32]) + Sync,
) -> Vec<S> {
    // Step 0 reads nothing: its gradients are the final state's.
    let nothing_before = vec![0.0; batch * width];
    let rows = (batch, width, steps + 1, &nothing_before[..]);
    run_shares(token, shares, rows, published, step)
}

/// Step `s` of [`run_backward_shares`] over `steps` steps: the time whose gate gradients
/// (the whole of the step before) a share first multiplies into its `dh` — none at
/// `s = 0` — and the time whose cells it then runs backward — none at `s = steps`, which
/// only finishes the gradient at the initial state.
pub(crate) fn backward_step(steps: usize, s: usize) -> (Option<usize>, Option<usize>) {
    (
        (s > 0).then(|| steps - s),
        (s < steps).then(|| steps - 1 - s),
    )
}

/// Marks an exchange abandoned when a thread panics, so that the others stop waiting.
struct Abandon<'a>(&'a Exchange);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandoned.store(true, Ordering::Relaxed);
        }
    }
}

/// Spins before yielding the core while waiting for a step's shares.
const SPINS: u32 = 1 << 12;

/// The state the shares exchange each step: `[B, width]` (`h_t` or `dgates_t`; two
/// steps' worth, by parity: step `t + 1`'s is written while step `t`'s is read), and a
/// count of the shares done. Atomics, so the threads share it without `unsafe`; relaxed
/// loads and stores of `f32` bits cost what plain ones do, the count orders them.
struct Exchange {
    h: [Vec<AtomicU32>; 2],
    arrived: AtomicUsize,
    abandoned: AtomicBool,
    shares: usize,
    width: usize,
}

impl Exchange {
    fn new(batch: usize, width: usize, shares: usize) -> Self {
        let buf = || (0..batch * width).map(|_| AtomicU32::new(0)).collect();
        Exchange {
            h: [buf(), buf()],
            arrived: AtomicUsize::new(0),
            abandoned: AtomicBool::new(false),
            shares,
            width,
        }
    }

    /// Writes `part` `[B, Σ run]`, the `columns` of step `t`'s rows, for the others to
    /// read (each row of `part` holds its runs in turn).
    fn publish(&self, t: usize, columns: &[Range<usize>], part: &[f32]) {
        let w: usize = columns.iter().map(|c| c.len()).sum();
        let buf = &self.h[t % 2];
        for (r, row) in part.chunks_exact(w.max(1)).enumerate() {
            let mut row = row;
            for run in columns {
                let (src, rest) = row.split_at(run.len());
                let dst = &buf[r * self.width + run.start..][..run.len()];
                for (d, v) in dst.iter().zip(src) {
                    d.store(v.to_bits(), Ordering::Relaxed);
                }
                row = rest;
            }
        }
    }

    /// Waits until every share has done step `t`; false if a thread gave up (panicked).
    fn wait(&self, t: usize) -> bool {
        let everyone = self.shares * (t + 1);
        let mut spins = 0u32;
        while self.arrived.load(Ordering::Acquire) < everyone {
            if self.abandoned.load(Ordering::Relaxed) {
                return false;
            }
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Reads step `t`'s whole into `h` `[B, width]` (every share has published it).
    fn read(&self, t: usize, h: &mut [f32]) {
        for (d, s) in h.iter_mut().zip(&self.h[t % 2]) {
            *d = f32::from_bits(s.load(Ordering::Relaxed));
        }
    }
}

/// `rows` `[·, H]` cut into each share's units: `out[p][i]` is share `p`'s units of row
/// `i` (a step's row of `y`, of the final state).
pub(crate) fn split_units<'a>(
    rows: &'a mut [f32],
    hidden: usize,
    shares: &[Range<usize>],
) -> Vec<Vec<&'a mut [f32]>> {
    let mut out: Vec<Vec<&mut [f32]>> = shares.iter().map(|_| Vec::new()).collect();
    for row in rows.chunks_exact_mut(hidden.max(1)) {
        let mut rest = row;
        for (p, units) in shares.iter().enumerate() {
            let (mine, after) = rest.split_at_mut(units.len());
            out[p].push(mine);
            rest = after;
        }
    }
    out
}

/// Copies `part` `[B, G·w]` (each row `G` blocks of a share's `w` units) into step `t`'s
/// rows of `runs`: the share's units of a `[T, B, G·H]` tensor cut by [`split_units`] as
/// rows of `H` (`G` runs per row of a step).
pub(crate) fn write_blocks(
    part: &[f32],
    w: usize,
    (t, batch): (usize, usize),
    runs: &mut [&mut [f32]],
) {
    let gates = part.len() / (batch * w).max(1);
    let step = &mut runs[t * batch * gates..(t + 1) * batch * gates];
    for (dst, src) in step.iter_mut().zip(part.chunks_exact(w.max(1))) {
        dst.copy_from_slice(src);
    }
}

/// `dst` `[B, Σ run]` ← the `columns` (runs) of each row of `src` `[B, width]`, in turn.
pub(crate) fn gather_columns(src: &[f32], width: usize, columns: &[Range<usize>], dst: &mut [f32]) {
    let w: usize = columns.iter().map(|c| c.len()).sum();
    for (d, s) in dst
        .chunks_exact_mut(w.max(1))
        .zip(src.chunks_exact(width.max(1)))
    {
        let mut d = d;
        for c in columns {
            let (run, rest) = d.split_at_mut(c.len());
            run.copy_from_slice(&s[c.clone()]);
            d = rest;
        }
    }
}

/// Each row of `all` `[B, hidden]` gets a share's `units` from `mine` `[B, w]`.
pub(crate) fn put_units(mine: &[f32], units: &Range<usize>, (all, hidden): (&mut [f32], usize)) {
    let rows = all.chunks_exact_mut(hidden.max(1));
    for (dst, src) in rows.zip(mine.chunks_exact(units.len().max(1))) {
        dst[units.clone()].copy_from_slice(src);
    }
}

/// A share's runs of a layer's `G·H` gate columns: its `units` of each gate block.
pub(crate) fn gate_runs<const G: usize>(hidden: usize, units: &Range<usize>) -> [Range<usize>; G] {
    std::array::from_fn(|g| g * hidden + units.start..g * hidden + units.end)
}

/// Steps of input projection a share forms at a time, for `batch` rows of `width` gate
/// columns: as many as fit in 256 KiB (they are read again soon after, from L2), from 4
/// to 32 (each run reads the share of `w_ihᵀ` again).
pub(crate) fn projection_run(batch: usize, width: usize) -> usize {
    (65_536 / (batch * width).max(1)).clamp(4, 32)
}

/// One share's input projection, `x · w_ihᵀ + bias` over its gate columns only: its
/// columns of `w_ihᵀ` packed (dense input), or its columns of the layer's token
/// projection.
pub(crate) enum ShareProjection<'p> {
    Dense {
        w: Arc<PackedB>,
        bias: Vec<f32>,
    },
    Tokens {
        all: &'p Projection<'p>,
        columns: Vec<usize>,
        /// The layer's gate columns, `G·H`.
        layer_width: usize,
    },
}

impl<'p> ShareProjection<'p> {
    /// For the `columns` of a layer's `[G·H, I]` `w_ih` (packed through `packs`), with the
    /// whole layer's `bias`; on token input `tokens` is the layer's projection.
    pub(crate) fn new(
        (w_ih, input): (&[f32], usize),
        (packs, tokens): (&mut Packer<'_>, Option<&'p Projection<'p>>),
        bias: &[f32],
        columns: Vec<usize>,
    ) -> Self {
        if let Some(all) = tokens {
            let layer_width = bias.len();
            return ShareProjection::Tokens {
                all,
                columns,
                layer_width,
            };
        }
        let w_ih_t = MatRef::row_major(w_ih, bias.len(), input).t();
        let w = packs.pack_columns("w_ih", w_ih_t, &columns);
        let bias = columns.iter().map(|&c| bias[c]).collect();
        ShareProjection::Dense { w, bias }
    }

    /// Steps `steps` of `x` (`[T, B, ·]`, `x_row` elements per row) projected into
    /// `gates` (`[steps.len(), B, width]`), over the rows inside their sequence (every
    /// row without lengths; a row past its end is left for the cell's pass).
    pub(crate) fn project(
        &self,
        token: Token,
        (x, x_row, batch): (&[f32], usize, usize),
        (steps, lengths): (Range<usize>, RowLengths<'_>),
        live_x: &mut LiveRows,
        gates: &mut [f32],
    ) {
        let rows = steps.len() * batch;
        let x = &x[steps.start * batch * x_row..][..rows * x_row];
        let width = gates.len() / rows.max(1);
        match self {
            ShareProjection::Dense { w, bias } if lengths.0.is_none() => {
                let a = MatRef::row_major(x, rows, x_row);
                gemm_packed_serial(token, a, w, 0.0, Some(bias), gates);
            }
            ShareProjection::Dense { w, bias } => {
                let per_step = gates.chunks_exact_mut(batch * width);
                for ((t, g), x_t) in steps.zip(per_step).zip(x.chunks_exact(batch * x_row)) {
                    live_x.gemm(token, w, (x_t, g), (t, lengths), Written::Biased(bias));
                }
            }
            ShareProjection::Tokens {
                all,
                columns,
                layer_width,
            } => {
                let rows = gates.chunks_exact_mut(width.max(1)).zip(x).enumerate();
                for (i, (g, &id)) in rows {
                    let (t, r) = (steps.start + i / batch, i % batch);
                    if !lengths.past_end(t, r) {
                        token_columns(all, (id, *layer_width), columns, g);
                    }
                }
            }
        }
    }
}

/// `gates[j]` = column `columns[j]` of token `id`'s projection (with its bias), as
/// `Projection::project` forms the whole row (of `layer_width` = `G·H` columns).
fn token_columns(
    all: &Projection<'_>,
    (id, layer_width): (f32, usize),
    columns: &[usize],
    gates: &mut [f32],
) {
    match all {
        Projection::Table(table) => {
            let vocab = table.len() / layer_width.max(1);
            let v = token_index(id, vocab).unwrap_or_default();
            let row = &table[v * layer_width..(v + 1) * layer_width];
            for (g, &c) in gates.iter_mut().zip(columns) {
                *g = row[c];
            }
        }
        Projection::Columns {
            w_ih,
            columns: table,
            bias,
        } => {
            let v = token_index(id, table.vocab).unwrap_or_default();
            for (g, &c) in gates.iter_mut().zip(columns) {
                *g = w_ih[table.at(v, c)] + bias[c];
            }
        }
        Projection::Dense { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::{shares, Pass};

    /// The shapes the rule's constants were measured at (see their docs), on 2 threads.
    #[test]
    fn columns_where_rows_leave_a_thread_idle_or_thin_and_a_share_pays() {
        let (inference, training) = (Pass::Inference, Pass::Training);
        let on_two = |steps, batch, hidden, pass| shares((steps, batch), (hidden, 4), pass, 2);
        // A stream step, one thread, too few units to cut: rows.
        assert_eq!(on_two(1, 1, 1024, inference), 1);
        assert_eq!(shares((200, 1), (1024, 4), inference, 1), 1);
        assert_eq!(on_two(200, 1, 16, inference), 1);
        // Inference: a share's step of at least 3·2^16 multiply-adds, over a call of at
        // least 2^20.
        assert_eq!(on_two(200, 1, 64, inference), 1);
        assert_eq!(on_two(200, 1, 250, inference), 2);
        assert_eq!(on_two(3, 1, 250, inference), 1);
        assert_eq!(on_two(10, 1, 250, inference), 2);
        // Many rows a thread: rows.
        assert_eq!(on_two(10, 32, 64, inference), 1);
        assert_eq!(on_two(200, 100, 64, inference), 1);
        assert_eq!(on_two(200, 32, 128, inference), 1);
        // Four to seven rows a thread: columns only in inference where w_hh is beyond
        // 4 MiB; three: columns.
        assert_eq!(on_two(200, 8, 1024, inference), 2);
        assert_eq!(on_two(200, 14, 1024, inference), 2);
        assert_eq!(on_two(200, 14, 1024, training), 1);
        assert_eq!(on_two(200, 8, 250, inference), 1);
        assert_eq!(on_two(200, 8, 384, training), 1);
        assert_eq!(on_two(200, 8, 768, training), 1);
        assert_eq!(on_two(10, 8, 1024, training), 1);
        assert_eq!(on_two(200, 6, 1024, training), 2);
        assert_eq!(on_two(200, 6, 250, training), 2);
        // Training: a share's step of at least 3·2^17.
        assert_eq!(on_two(200, 4, 128, training), 1);
        assert_eq!(on_two(200, 4, 250, training), 2);
        assert_eq!(on_two(200, 2, 1024, training), 2);
    }
}

/// What the LSTM's and the GRU's column-schedule tests share (`columns/cases.rs`).
#[cfg(test)]
pub(crate) mod cases;
