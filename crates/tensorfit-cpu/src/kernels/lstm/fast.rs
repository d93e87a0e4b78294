//! The AVX-512 fast path of the LSTM kernels, beside the reference in `mod.rs` (which
//! it is tested against, in `tests.rs`) and chosen by `lstm::lstm_forward`/`lstm_backward` when
//! the CPU has AVX-512 (`gemm_fast::simd`).
//!
//! It computes what the reference computes, with cuDNN's structure, and three changes of
//! schedule, none of which changes what is summed:
//! - the time loop runs on every thread at once, each over its own batch rows for all
//!   steps (rows of an LSTM never exchange data), so there is no barrier per step;
//! - each thread projects the inputs of its own rows itself, a run of steps at a time
//!   ([`project_ahead`]), with the packed micro-kernels of `gemm_fast/` (`w_ihᵀ` and
//!   `w_hhᵀ` are packed once per call), instead of one GEMM over all steps up front;
//! - on token input, the projection of a row is a copy of one row of `w_ihᵀ` with both
//!   biases added, formed once per call (`recurrent::fast::Projection`, the GRU's too);
//! - the gate passes run [`LANES`] units at a time through `fastmath` with fused
//!   multiply-adds, compiled for AVX-512 inside `gemm_fast::vectorize`; without cells
//!   to keep, the gates of a few steps are reused as scratch (`Op::output_is_scratch`);
//! - with lengths, each step's GEMM multiplies only the thread's rows inside their
//!   sequence (`recurrent::fast::LiveRows`), and the weight gradients sum over those
//!   rows only (`recurrent::SumOver`): a padded step costs its row's pass, not its GEMM.
//!
//! Nothing is allocated inside the time loops.

use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{LstmDims, RecurrentDims, Result};

use super::{
    backward_begins, hold_padded_dh, weight_gradients, LstmBackwardInputs, LstmBackwardOutputs,
    LstmForwardInputs, LstmForwardOutputs,
};
use crate::backend_error;
use crate::kernels::fastmath::{self, Fused, MulAdd};
use crate::kernels::gemm_fast::{self, gemm_packed_serial, vectorize, MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{self, Pass};
use crate::kernels::recurrent::fast::{
    rows_per_part, split_steps, LiveRows, PartRows, Projection, Written,
};
use crate::kernels::recurrent::SumOver;

/// The recurrent weight as the right operand of the per-step GEMM, packed once per call
/// or kept from an earlier one (see `gemm_fast/`, `packs.rs`): `w_hhᵀ` forward
/// (`h · w_hhᵀ`), `w_hh` backward (`dgates · w_hh`).
struct Recurrent {
    token: Token,
    packed: Arc<PackedB>,
}

impl Recurrent {
    fn new(
        token: Token,
        packs: &mut Packer<'_>,
        w: &[f32],
        (rows, cols): (usize, usize),
        transposed: bool,
    ) -> Self {
        let m = MatRef::row_major(w, rows, cols);
        let packed = packs.pack("w_hh", if transposed { m.t() } else { m });
        Recurrent { token, packed }
    }

    /// `c = a · w + beta · c` for `m` rows of `a` (one thread's batch rows of one step).
    fn gemm_rows(&self, a: &[f32], m: usize, beta: f32, c: &mut [f32]) -> Result<()> {
        self.check(a, m, c)?;
        let a = MatRef::row_major(a, m, self.packed.k());
        gemm_packed_serial(self.token, a, &self.packed, beta, None, c);
        Ok(())
    }

    /// `c += a · w` for the rows of `m` inside their sequence at step `t` (see
    /// `LiveRows`; a row past its end gets `c + 0`).
    fn gemm_live(
        &self,
        live: &mut LiveRows,
        (a, m, c): (&[f32], usize, &mut [f32]),
        rows: (usize, RowLengths<'_>),
    ) -> Result<()> {
        self.check(a, m, c)?;
        live.gemm(self.token, &self.packed, (a, c), rows, Written::Added);
        Ok(())
    }

    /// `a` `[m, k]` and `c` `[m, n]` fit the packed weight.
    fn check(&self, a: &[f32], m: usize, c: &[f32]) -> Result<()> {
        if a.len() != m * self.packed.k() || c.len() != m * self.packed.n() {
            return Err(backend_error("lstm: recurrent GEMM operands mismatch"));
        }
        Ok(())
    }
}

/// Steps of input projection a thread computes at a time (see [`forward`]), for its
/// `rows` batch rows, of a layer whose `w_ih` and `w_hh` are `weight_bytes` together
/// (capped by the steps of gates the op holds). The packed `w_ihᵀ` and `w_hhᵀ` do not
/// both fit in L2 at the seed network's size, so every switch between projection and
/// recurrence reloads one of them. With many rows (inference) each reload serves many
/// tiles, and short runs win: the gates they write are still in L2 when the recurrence
/// adds to them — unless the two weights no longer fit in the L3 together
/// ([`WEIGHTS_PAST_L3`]): then each run of projection pushes `w_hhᵀ` out to memory, and
/// the longest runs win. With few rows (training) the reloads dominate and projecting
/// all steps first wins. The settings were measured; see docs/cpu-performance.md.
fn project_ahead(rows: usize, steps: usize, weight_bytes: usize) -> usize {
    if rows <= 2 * gemm_fast::MR || weight_bytes > WEIGHTS_PAST_L3 {
        steps
    } else {
        4
    }
}

/// The size of `w_ih` and `w_hh` together beyond which [`project_ahead`] takes them not
/// to stay in the L3 together: 16 MiB, half the L3 of the 2-core Zen 4 it was measured
/// on (2026-12-05, inference at 50 rows a thread, runs of 16 steps over runs of 4:
/// 0.965-0.967× the time with H = 1024 (33.5 MiB), 0.999× with H = 768 (18.9 MiB),
/// 1.01-1.02× with H = 512 (8 MiB)). Training at 50 rows a thread, whose gates are kept step by step, is
/// level either way (H = 1024, B = 100, T = 10/20/50: 1.00/1.00/0.99, 5 rounds).
const WEIGHTS_PAST_L3: usize = 16 << 20;

/// The forward pass over the steps of a layer that is not empty, the final state started
/// (the lengths have been checked: see `lstm::forward_on`, which also ends it); `bias` is
/// the input projection's; `packs` packs `w_ih` and `w_hh`.
pub(crate) fn forward(
    token: Token,
    d: LstmDims,
    (inp, packs): (&LstmForwardInputs<'_>, &mut Packer<'_>),
    out: &mut LstmForwardOutputs<'_>,
    bias: Vec<f32>,
) -> Result<()> {
    // Too few rows to split: by columns (with threads to run the shares on; see
    // `recurrent/columns.rs`).
    let pass = Pass::forward(out.cells.is_some());
    if let Some(shares) = columns::shares_here((d.steps, d.batch), (d.hidden, 4), pass) {
        super::columns::forward(token, d, (inp, packs), out, bias, shares);
        return Ok(());
    }
    forward_rows(token, d, (inp, packs), out, bias)
}

/// [`forward`] by rows: each thread over its own batch rows for the whole sequence.
pub(super) fn forward_rows(
    token: Token,
    d: LstmDims,
    (inp, packs): (&LstmForwardInputs<'_>, &mut Packer<'_>),
    out: &mut LstmForwardOutputs<'_>,
    bias: Vec<f32>,
) -> Result<()> {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let (step_h, step_g) = (d.step_state(), d.step_gates());
    // Elements of `x` per batch row of a step.
    let per_row = d.x_row();

    // 1. The input projection (both biases included): each thread projects its own
    // rows, a run of `project_ahead` steps at a time, just before the recurrence reaches
    // them (the same sums, in the same order, as one GEMM over every step).
    let projection = Projection::new(&d, (inp.w_ih, &mut *packs), bias);

    // 2. The recurrence: per step one GEMM and one fused pass, each thread over its own
    // batch rows for the whole sequence. w_hhᵀ is packed once, here (or kept).
    let w_hh_t = Recurrent::new(token, packs, inp.w_hh, (4 * hidden, hidden), true);
    let part = rows_per_part((steps, batch), hidden);
    let weight_bytes = (inp.w_ih.len() + inp.w_hh.len()) * std::mem::size_of::<f32>();
    let gate_parts = split_steps(&mut *out.gates, step_g, part * 4 * hidden);
    let y_parts = split_steps(&mut *out.y, step_h, part * hidden);
    let cell_parts: Vec<Option<Vec<&mut [f32]>>> = match out.cells.as_deref_mut() {
        Some(cells) => split_steps(cells, step_h, part * hidden)
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..gate_parts.len()).map(|_| None).collect(),
    };
    let c_n_parts: Vec<&mut [f32]> = out.c_n.chunks_mut(part * hidden).collect();
    let work: Vec<_> = gate_parts
        .into_iter()
        .zip(y_parts)
        .zip(cell_parts)
        .zip(c_n_parts)
        .enumerate()
        .collect();
    crate::threads::try_for_each(work, |(p, (((mut g, mut ys), mut cs), c_run))| {
        let m = c_run.len() / hidden;
        let own = PartRows::new(batch, (p, part), m, inp.lengths);
        let (h0, c0) = (&inp.h0[own.at(hidden, 0)], &inp.c0[own.at(hidden, 0)]);
        let lengths = own.lengths;
        // Where step `u`'s gates are formed: their own step when they are kept for
        // the backward, else (scratch, see `Op::output_is_scratch`) the slots of the
        // first `ahead` steps in turn, which stay in L2 instead of streaming the whole
        // tensor out to memory (the op holds `g.len()` steps then).
        let reuse = cs.is_none();
        let ahead = project_ahead(m, steps, weight_bytes).min(g.len());
        let slot = move |u: usize| if reuse { u % ahead } else { u };
        // The rows inside their sequence at each step: a row past its end is not
        // multiplied (its gates are overwritten with zeros).
        let mut live = LiveRows::new(lengths, m, (hidden, 4 * hidden));
        let mut live_x = LiveRows::new(lengths, m, (per_row, 4 * hidden));
        vectorize(
            Some(token),
            #[inline(always)]
            || -> Result<()> {
                for t in 0..steps {
                    let (y_before, y_from_t) = ys.split_at_mut(t);
                    let h_prev: &[f32] = if t == 0 { h0 } else { y_before[t - 1] };
                    let h_t = &mut *y_from_t[0];
                    if t % ahead == 0 {
                        for u in t..steps.min(t + ahead) {
                            let x_u = &inp.x[own.at(per_row, u)];
                            let rows = (x_u, m, &mut *g[slot(u)]);
                            projection.project_live(token, rows, &mut live_x, (u, lengths));
                        }
                    }
                    let gates_t = &mut *g[slot(t)];
                    // gates[t] += h_{t-1} · w_hhᵀ
                    w_hh_t.gemm_live(&mut live, (h_prev, m, gates_t), (t, lengths))?;
                    // The cell state slice holds c_{t-1} on entry to the fused pass and
                    // c_t after it.
                    let c_t: &mut [f32] = match cs.as_mut() {
                        Some(cs) => {
                            let (c_before, c_from_t) = cs.split_at_mut(t);
                            let c_t = &mut *c_from_t[0];
                            c_t.copy_from_slice(if t == 0 { c0 } else { c_before[t - 1] });
                            c_t
                        }
                        None => &mut *c_run,
                    };
                    cell_forward(gates_t, c_t, h_t, hidden, (t, lengths));
                }
                Ok(())
            },
        )
    })?;
    Ok(())
}

/// One step's fused pass over one thread's rows: `gates_t` `[rows, 4H]` (pre-activations
/// on entry, activated gates on exit), `c` `[rows, H]` (c_{t-1} on entry, c_t on exit)
/// and `h` `[rows, H]` (h_t). A row past its end at step `t` keeps its cell state and
/// gets `h = 0` and zero gates.
#[inline(always)]
pub(super) fn cell_forward(
    gates_t: &mut [f32],
    c: &mut [f32],
    h: &mut [f32],
    hidden: usize,
    (t, lengths): (usize, RowLengths<'_>),
) {
    let states = c.chunks_mut(hidden).zip(h.chunks_mut(hidden));
    for (r, (g, (c, h))) in gates_t.chunks_mut(4 * hidden).zip(states).enumerate() {
        if lengths.past_end(t, r) {
            g.fill(0.0);
            h.fill(0.0);
        } else {
            cell_forward_row(g, c, h, hidden);
        }
    }
}

/// Units the gate passes handle at a time: one AVX-512 vector. Each row is cut into
/// blocks of this many units; the last, shorter block goes through the same code in
/// padded copies (left to the compiler, a remainder such as the 10 units of H = 250 runs
/// as 4-lane and scalar code).
const LANES: usize = 16;

/// Splits a row of gates `[i | f | g | o]` (each `hidden` wide) into its four blocks.
macro_rules! gate_blocks {
    ($row:expr, $hidden:expr, $split:ident) => {{
        let (i, rest) = $row.$split($hidden);
        let (f, rest) = rest.$split($hidden);
        let (g, o) = rest.$split($hidden);
        (i, f, g, o)
    }};
}

/// One batch row of [`cell_forward`], [`LANES`] units at a time.
#[inline(always)]
fn cell_forward_row(g: &mut [f32], c: &mut [f32], h: &mut [f32], hidden: usize) {
    let (gi, gf, gg, go) = gate_blocks!(g, hidden, split_at_mut);
    let full = hidden - hidden % LANES;
    for j in (0..full).step_by(LANES) {
        let u = j..j + LANES;
        let gates = [
            &mut gi[u.clone()],
            &mut gf[u.clone()],
            &mut gg[u.clone()],
            &mut go[u.clone()],
        ];
        cell_forward_units(gates, &mut c[u.clone()], &mut h[u]);
    }
    if full < hidden {
        let n = hidden - full;
        let mut pad = [[0.0f32; LANES]; 6];
        for (p, src) in pad.iter_mut().zip([&*gi, &*gf, &*gg, &*go, &*c]) {
            p[..n].copy_from_slice(&src[full..]);
        }
        let [pi, pf, pg, po, pc, ph] = &mut pad;
        cell_forward_units([pi, pf, pg, po], pc, ph);
        for (dst, p) in [gi, gf, gg, go, c, h].into_iter().zip(&pad) {
            dst[full..].copy_from_slice(&p[..n]);
        }
    }
}

/// [`LANES`] units of one row: `c = σ(f)·c + σ(i)·tanh(g)`, `h = σ(o)·tanh(c)`, the
/// gates replaced by their activations. A loop of a fixed length over the call-free
/// functions of `fastmath.rs`, so it compiles to straight vector code; the
/// nonlinearities are paired so that a unit costs three divisions, not five.
#[allow(clippy::needless_range_loop)] // why: six slices indexed by unit `j`
#[inline(always)]
fn cell_forward_units(gates: [&mut [f32]; 4], c: &mut [f32], h: &mut [f32]) {
    let [gi, gf, gg, go] = gates;
    let (gi, gf, gg, go) = (
        &mut gi[..LANES],
        &mut gf[..LANES],
        &mut gg[..LANES],
        &mut go[..LANES],
    );
    let (c, h) = (&mut c[..LANES], &mut h[..LANES]);
    for j in 0..LANES {
        let (i, g) = fastmath::sigmoid_and_tanh::<Fused>(gi[j], gg[j]);
        let f = fastmath::sigmoid::<Fused>(gf[j]);
        c[j] = Fused::mul_add(f, c[j], i * g);
        let (o, tc) = fastmath::sigmoid_and_tanh::<Fused>(go[j], c[j]);
        (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
        h[j] = o * tc;
    }
}

/// The backward pass (the lengths have been checked by `lstm::lstm_backward`).
pub(crate) fn backward(
    token: Token,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    let Some(start) = backward_begins(d, inp, out) else {
        return Ok(());
    };
    // 1. Backwards through time: by rows, or, with too few rows to split, by columns
    // (the forward's schedule: `recurrent/columns.rs`).
    let running = (&mut *start.dgates, &mut *start.dh, &mut *start.dc);
    let layer = (d.hidden, 4);
    match columns::shares_here((d.steps, d.batch), layer, Pass::Training) {
        Some(shares) => super::columns_backward::backward(token, d, inp, running, shares),
        None => backward_rows(token, d, inp, running)?,
    }
    // 2. The weight gradients over all steps at once (with lengths, over the real steps
    // only: the padded rows' gradients are zeros).
    let sum = SumOver::new(Some(token), inp.lengths);
    weight_gradients((d, sum), inp, start.dgates, start.grads)
}

/// [`backward`]'s loop through time by rows: per step one fused pass and one GEMM, each
/// thread over its own batch rows for the whole sequence; fills `dgates` and turns `dh`,
/// `dc` (the gradients at h_n, c_n on entry) into those at h0, c0.
pub(super) fn backward_rows(
    token: Token,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    (dgates, dh, dc): (&mut [f32], &mut [f32], &mut [f32]),
) -> Result<()> {
    let (steps, batch, hidden, step_g) = (d.steps, d.batch, d.hidden, d.step_gates());
    // w_hh is packed once, here.
    let fresh = &mut Packer::fresh();
    let w_hh = Recurrent::new(token, fresh, inp.w_hh, (4 * hidden, hidden), false);
    let part = rows_per_part((steps, batch), hidden);
    let dgate_parts = split_steps(dgates, step_g, part * 4 * hidden);
    let work: Vec<_> = dgate_parts
        .into_iter()
        .zip(
            dh.chunks_mut(part * hidden)
                .zip(dc.chunks_mut(part * hidden)),
        )
        .enumerate()
        .collect();
    crate::threads::try_for_each(work, |(p, (mut dg, (dh, dc)))| {
        let m = dh.len() / hidden;
        let own = PartRows::new(batch, (p, part), m, inp.lengths);
        let lengths = own.lengths;
        let mut live = LiveRows::new(lengths, m, (4 * hidden, hidden));
        vectorize(
            Some(token),
            #[inline(always)]
            || -> Result<()> {
                for t in (0..steps).rev() {
                    let saved = StepSaved {
                        gates: &inp.gates[own.at(4 * hidden, t)],
                        c: &inp.cells[own.at(hidden, t)],
                        c_prev: own.before(hidden, t, (inp.c0, inp.cells)),
                        dy: &inp.dy[own.at(hidden, t)],
                        dh: &*dh,
                        hidden,
                    };
                    let dgates_t = &mut *dg[t];
                    cell_backward(&saved, dc, dgates_t, (t, lengths));
                    // dh = dgates[t] · w_hh: the gradient arriving at h_{t-1} (added,
                    // with lengths, to the dh_n that padded rows carry).
                    // A row past its end is not multiplied: its dgates are zeros.
                    match hold_padded_dh(lengths, t, dh, hidden) {
                        0.0 => w_hh.gemm_rows(dgates_t, m, 0.0, dh)?,
                        _ => w_hh.gemm_live(&mut live, (dgates_t, m, dh), (t, lengths))?,
                    }
                }
                Ok(())
            },
        )
    })
}

/// What one backward step reads for one thread's rows, each `[rows, ·]`: the activated
/// `gates`, the cell states `c` (c_t) and `c_prev` (c_{t-1}), the gradient `dy` arriving
/// at y_t from outside and `dh` arriving at h_t from step t+1.
pub(super) struct StepSaved<'a> {
    pub gates: &'a [f32],
    pub c: &'a [f32],
    pub c_prev: &'a [f32],
    pub dy: &'a [f32],
    pub dh: &'a [f32],
    pub hidden: usize,
}

/// One step's fused backward pass over one thread's rows: writes `dgates_t`
/// `[rows, 4H]` and replaces `dc` (the gradient at c_t on entry) by the gradient at
/// c_{t-1}. A row past its end at step `t` gets zero `dgates` and keeps its `dc`.
#[inline(always)]
pub(super) fn cell_backward(
    s: &StepSaved<'_>,
    dc: &mut [f32],
    dgates_t: &mut [f32],
    (t, lengths): (usize, RowLengths<'_>),
) {
    let h = s.hidden;
    for (r, (dg, dc)) in dgates_t.chunks_mut(4 * h).zip(dc.chunks_mut(h)).enumerate() {
        if lengths.past_end(t, r) {
            dg.fill(0.0);
        } else {
            cell_backward_row(s, r, dc, dg);
        }
    }
}

/// Row `r` of [`cell_backward`], [`LANES`] units at a time (see [`cell_forward_row`]).
#[inline(always)]
fn cell_backward_row(s: &StepSaved<'_>, r: usize, dc: &mut [f32], dgates: &mut [f32]) {
    let hidden = s.hidden;
    let state = r * hidden..(r + 1) * hidden;
    let (c, c_prev) = (&s.c[state.clone()], &s.c_prev[state.clone()]);
    let (dy, dh) = (&s.dy[state.clone()], &s.dh[state]);
    let g_row = &s.gates[r * 4 * hidden..(r + 1) * 4 * hidden];
    let (gi, gf, gg, go) = gate_blocks!(g_row, hidden, split_at);
    let (d_i, d_f, d_g, d_o) = gate_blocks!(dgates, hidden, split_at_mut);
    let full = hidden - hidden % LANES;
    for j in (0..full).step_by(LANES) {
        let u = j..j + LANES;
        let read = [
            &gi[u.clone()],
            &gf[u.clone()],
            &gg[u.clone()],
            &go[u.clone()],
            &c[u.clone()],
            &c_prev[u.clone()],
            &dy[u.clone()],
            &dh[u.clone()],
        ];
        let grads = [
            &mut d_i[u.clone()],
            &mut d_f[u.clone()],
            &mut d_g[u.clone()],
            &mut d_o[u.clone()],
        ];
        cell_backward_units(read, &mut dc[u], grads);
    }
    if full < hidden {
        let n = hidden - full;
        let mut read = [[0.0f32; LANES]; 8];
        for (p, src) in read.iter_mut().zip([gi, gf, gg, go, c, c_prev, dy, dh]) {
            p[..n].copy_from_slice(&src[full..]);
        }
        let mut written = [[0.0f32; LANES]; 5];
        written[4][..n].copy_from_slice(&dc[full..]);
        let [wi, wf, wg, wo, wc] = &mut written;
        cell_backward_units(read.each_ref().map(|p| &p[..]), wc, [wi, wf, wg, wo]);
        for (dst, p) in [d_i, d_f, d_g, d_o, dc].into_iter().zip(&written) {
            dst[full..].copy_from_slice(&p[..n]);
        }
    }
}

/// [`LANES`] units of one row of [`cell_backward`]. `read` holds the activated gates
/// i, f, g, o, then c_t, c_{t-1}, dy and dh. With `tc = tanh(c_t)`:
/// `dh_total = dy + dh`, `do = dh_total·tc`, `dc += dh_total·o·(1 - tc²)`,
/// `di = dc·g`, `df = dc·c_{t-1}`, `dg = dc·i`; the pre-activation gradients are those
/// times σ' or tanh' written with the outputs; finally `dc = dc·f` flows to c_{t-1}.
#[allow(clippy::needless_range_loop)] // why: thirteen slices indexed by unit `j`
#[inline(always)]
fn cell_backward_units(read: [&[f32]; 8], dc: &mut [f32], grads: [&mut [f32]; 4]) {
    let [gi, gf, gg, go, c, c_prev, dy, dh] = read.map(|s| &s[..LANES]);
    let [d_i, d_f, d_g, d_o] = grads.map(|s| &mut s[..LANES]);
    let dc = &mut dc[..LANES];
    for j in 0..LANES {
        let (i, f, g, o) = (gi[j], gf[j], gg[j], go[j]);
        let tc = fastmath::tanh::<Fused>(c[j]);
        let dh_total = dy[j] + dh[j];
        let dc_t = Fused::mul_add(dh_total * o, Fused::mul_add(-tc, tc, 1.0), dc[j]);
        d_i[j] = dc_t * g * i * (1.0 - i);
        d_f[j] = dc_t * c_prev[j] * f * (1.0 - f);
        d_g[j] = dc_t * i * (1.0 - g * g);
        d_o[j] = dh_total * tc * o * (1.0 - o);
        dc[j] = dc_t * f;
    }
}
