//! The LSTM kernels, `lstm_forward` and `lstm_backward`: a whole layer over a whole
//! sequence per call, organised the way cuDNN organises it.
//!
//! This file is the reference every GPU LSTM kernel is tested against, so it keeps
//! cuDNN's structure visible, because that structure is where the speed comes from:
//! - **forward**: the input projection of *all* steps is one GEMM,
//!   `gates[T·B, 4H] = x[T·B, I] · w_ihᵀ`, plus both biases; then per step `t`, one GEMM
//!   accumulates the recurrent term, `gates[t] += h_{t-1} · w_hhᵀ`, and one fused pass
//!   over `[B, 4H]` applies the nonlinearities in place (storing the *activated* gates
//!   σ(i), σ(f), tanh(g), σ(o)) and updates the cell and hidden state.
//! - **backward**: per step, from `t = T-1` down to 0, one fused pass turns the
//!   gradient arriving at `h_t` and `c_t` into the pre-activation gate gradients
//!   `dgates[t]`, and one GEMM carries the gradient to `h_{t-1}`:
//!   `dh = dgates[t] · w_hh`. The weight gradients do not depend on the order of the
//!   steps, so they are formed after the loop with one GEMM each over all `T·B` rows.
//!
//! The AVX-512 fast path keeps this structure with one change of schedule: each thread
//! projects the inputs of its own batch rows itself, a run of steps at a time
//! (`project_ahead`), instead of one GEMM over all steps up front (the same sums, in
//! the same order).
//!
//! Gate order is PyTorch's (i, f, g, o): row `r` of `gates[t]` holds `[i | f | g | o]`,
//! each block `H` wide. Nothing is allocated inside the time loops (the forward keeps
//! one `4H` vector, the summed biases, per call).

use rayon::prelude::*;
use tensorfit_core::{args, LstmDims, Result};

use super::elementwise::sum_to_shape;
use super::fastmath::{self, Fused, MulAdd, Separate};
use super::gemm::{gemm, mat, mat_mut};
use super::gemm_fast::{self, gemm_packed_serial, vectorize, MatRef, PackedB, Token};
use super::{check_len, PARALLEL_MIN_ELEMENTS};
use crate::backend_error;

/// The inputs of [`lstm_forward`] (see [`args::LstmForwardInputs`]).
pub type LstmForwardInputs<'a> = args::LstmForwardInputs<&'a [f32]>;
/// The outputs of [`lstm_forward`] (see [`args::LstmForwardOutputs`]).
pub type LstmForwardOutputs<'a> = args::LstmForwardOutputs<&'a mut [f32]>;
/// The inputs of [`lstm_backward`] (see [`args::LstmBackwardInputs`]).
pub type LstmBackwardInputs<'a> = args::LstmBackwardInputs<&'a [f32]>;
/// The outputs of [`lstm_backward`] (see [`args::LstmBackwardOutputs`]).
pub type LstmBackwardOutputs<'a> = args::LstmBackwardOutputs<&'a mut [f32]>;

/// The recurrent weight as the right operand of the per-step GEMM: packed once per
/// call for the fast path (see `gemm_fast.rs`), or a plain matrix view for the portable
/// path. `transposed` uses `w_hhᵀ` (forward: `h · w_hhᵀ`), else `w_hh` (backward:
/// `dgates · w_hh`).
enum Recurrent<'a> {
    Packed(Token, PackedB),
    Plain(&'a [f32], usize, usize, bool),
}

impl<'a> Recurrent<'a> {
    fn new(token: Option<Token>, w: &'a [f32], rows: usize, cols: usize, transposed: bool) -> Self {
        match token {
            Some(token) => {
                let m = MatRef::row_major(w, rows, cols);
                Recurrent::Packed(token, PackedB::new(if transposed { m.t() } else { m }))
            }
            None => Recurrent::Plain(w, rows, cols, transposed),
        }
    }

    /// `c = a · w + beta · c` for `m` rows of `a` (one thread's batch rows of one step).
    fn gemm_rows(&self, a: &[f32], m: usize, beta: f32, c: &mut [f32]) -> Result<()> {
        match self {
            Recurrent::Packed(token, b) => {
                let k = b.k();
                if a.len() != m * k || c.len() != m * b.n() {
                    return Err(backend_error("lstm: recurrent GEMM operands mismatch"));
                }
                gemm_packed_serial(*token, MatRef::row_major(a, m, k), b, beta, None, c);
                Ok(())
            }
            &Recurrent::Plain(w, rows, cols, transposed) => {
                let w = mat(w, rows, cols)?;
                let w = if transposed { w.reversed_axes() } else { w };
                let (k, n) = w.dim();
                gemm(1.0, mat(a, m, k)?, w, beta, &mut mat_mut(c, m, n)?)
            }
        }
    }
}

/// Steps of input projection a thread of the fast path computes at a time (see
/// [`lstm_forward`]), for its `rows` batch rows. The packed `w_ihᵀ` and `w_hhᵀ` (1 MiB
/// each at H = 250) do not both fit in L2, so every switch between projection and
/// recurrence reloads one of them. With many rows (inference, 50 per thread) each
/// reload serves many tiles, and short runs win: the gates they write are still in L2
/// when the recurrence adds to them (forward per layer, batch 100, length 200: 81.1 ms
/// with runs of 4 steps, 81.8 with 2, 82.3 with 8, 87.4 with 16). With few rows
/// (training, 16) the reloads dominate and projecting all steps first wins (batch 32,
/// length 50: 6.73 ms, against 6.78 with runs of 16 and 7.43 with 4). Measured
/// interleaved in one process.
fn project_ahead(rows: usize, steps: usize) -> usize {
    if rows <= 2 * gemm_fast::MR {
        steps
    } else {
        4
    }
}

/// Batch rows per thread: the time loop runs on every thread at once, each over its own
/// rows for all steps (rows of an LSTM never exchange data), so there is no barrier per
/// step. One part when the layer is too small to be worth splitting.
fn rows_per_part(batch: usize, hidden: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    if batch * 4 * hidden < PARALLEL_MIN_ELEMENTS {
        batch.max(1)
    } else {
        batch.div_ceil(threads).max(1)
    }
}

/// `buf` `[T, B, width]` split into parts of `rows` batch rows: `out[p][t]` is part
/// `p`'s rows of step `t`.
fn split_steps(buf: &mut [f32], step: usize, part: usize) -> Vec<Vec<&mut [f32]>> {
    let parts = step.div_ceil(part.max(1));
    let mut out: Vec<Vec<&mut [f32]>> = (0..parts).map(|_| Vec::new()).collect();
    for step_slice in buf.chunks_mut(step.max(1)) {
        for (p, piece) in step_slice.chunks_mut(part.max(1)).enumerate() {
            out[p].push(piece);
        }
    }
    out
}

/// Checks every input and output slice against the length the layer needs.
fn check_lengths(
    kernel: &str,
    inputs: args::Expected<'_, &[f32]>,
    outputs: args::Expected<'_, &mut [f32]>,
) -> Result<()> {
    let inputs = inputs.into_iter().map(|(what, s, want)| (what, &**s, want));
    let outputs = outputs
        .into_iter()
        .map(|(what, s, want)| (what, &**s, want));
    for (what, slice, want) in inputs.chain(outputs) {
        check_len(kernel, what, slice, want)?;
    }
    Ok(())
}

/// Runs an LSTM layer over a sequence (see the module documentation for the structure).
pub fn lstm_forward(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
) -> Result<()> {
    check_lengths("lstm_forward", inp.expected(d), out.expected(d))?;
    let LstmDims {
        steps,
        batch,
        input,
        hidden,
    } = d;
    let LstmForwardOutputs {
        y,
        h_n,
        c_n,
        gates,
        mut cells,
    } = out;
    // Rows of all steps together, elements of one step's state and one step's gates.
    let rows = steps * batch;
    let step_h = batch * hidden;
    let step_g = batch * 4 * hidden;

    // c_n is the running cell state when the cells are not kept: on entry to step t it
    // holds c_{t-1}.
    h_n.copy_from_slice(inp.h0);
    c_n.copy_from_slice(inp.c0);
    if steps == 0 || step_h == 0 {
        return Ok(());
    }
    let token = gemm_fast::simd();

    // 1. The input projection (both biases included): on the portable path one GEMM
    // over every step, here; on the fast path each thread projects its own rows, a run
    // of `project_ahead` steps at a time, just before the recurrence reaches them.
    let bias: Vec<f32> = inp.b_ih.iter().zip(inp.b_hh).map(|(a, b)| a + b).collect();
    let chunked = match token {
        Some(token) => {
            let w_ih = MatRef::row_major(inp.w_ih, 4 * hidden, input);
            Some((token, PackedB::new(w_ih.t())))
        }
        None => {
            let (x, w_ih) = (mat(inp.x, rows, input)?, mat(inp.w_ih, 4 * hidden, input)?);
            gemm(
                1.0,
                x,
                w_ih.reversed_axes(),
                0.0,
                &mut mat_mut(gates, rows, 4 * hidden)?,
            )?;
            for row in gates.chunks_exact_mut(4 * hidden) {
                for (g, b) in row.iter_mut().zip(&bias) {
                    *g += b;
                }
            }
            None
        }
    };

    // 2. The recurrence: per step one GEMM and one fused pass, each thread over its own
    // batch rows for the whole sequence. w_hhᵀ is packed once, here.
    let w_hh_t = Recurrent::new(token, inp.w_hh, 4 * hidden, hidden, true);
    let part = rows_per_part(batch, hidden);
    let gate_parts = split_steps(gates, step_g, part * 4 * hidden);
    let y_parts = split_steps(y, step_h, part * hidden);
    let cell_parts: Vec<Option<Vec<&mut [f32]>>> = match cells.as_deref_mut() {
        Some(cells) => split_steps(cells, step_h, part * hidden)
            .into_iter()
            .map(Some)
            .collect(),
        None => (0..gate_parts.len()).map(|_| None).collect(),
    };
    let c_n_parts: Vec<&mut [f32]> = c_n.chunks_mut(part * hidden).collect();
    let work: Vec<_> = gate_parts
        .into_iter()
        .zip(y_parts)
        .zip(cell_parts)
        .zip(c_n_parts)
        .enumerate()
        .collect();
    work.into_par_iter()
        .try_for_each(|(p, (((mut g, mut ys), mut cs), c_run))| {
            let state = p * part * hidden..(p * part * hidden + c_run.len());
            let (h0, c0) = (&inp.h0[state.clone()], &inp.c0[state]);
            let m = c_run.len() / hidden;
            let ahead = project_ahead(m, steps);
            // Where step `u`'s gates are formed: their own step when they are kept for
            // the backward (or were projected up front), else (scratch, see
            // `Op::output_is_scratch`) the slots of the first `ahead` steps in turn,
            // which stay in L2 instead of streaming the whole tensor out to memory
            // (inference 4-5% faster).
            let reuse = chunked.is_some() && cs.is_none();
            let slot = move |u: usize| if reuse { u % ahead } else { u };
            vectorize(
                token,
                #[inline(always)]
                || -> Result<()> {
                    for t in 0..steps {
                        let (y_before, y_from_t) = ys.split_at_mut(t);
                        let h_prev: &[f32] = if t == 0 { h0 } else { y_before[t - 1] };
                        let h_t = &mut *y_from_t[0];
                        if let (Some((token, w_ih_t)), 0) = (&chunked, t % ahead) {
                            let r0 = p * part;
                            for u in t..steps.min(t + ahead) {
                                let x_u =
                                    &inp.x[(u * batch + r0) * input..(u * batch + r0 + m) * input];
                                let x_u = MatRef::row_major(x_u, m, input);
                                let g_u = &mut *g[slot(u)];
                                gemm_packed_serial(*token, x_u, w_ih_t, 0.0, Some(&bias), g_u);
                            }
                        }
                        let gates_t = &mut *g[slot(t)];
                        // gates[t] += h_{t-1} · w_hhᵀ
                        w_hh_t.gemm_rows(h_prev, m, 1.0, gates_t)?;
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
                        if token.is_some() {
                            cell_forward::<Fused>(gates_t, c_t, h_t, hidden);
                        } else {
                            cell_forward::<Separate>(gates_t, c_t, h_t, hidden);
                        }
                    }
                    Ok(())
                },
            )
        })?;

    // 3. The final state.
    let last = (steps - 1) * step_h..steps * step_h;
    h_n.copy_from_slice(&y[last.clone()]);
    if let Some(cells) = cells {
        c_n.copy_from_slice(&cells[last]);
    }
    Ok(())
}

/// One step's fused pass over one thread's rows: `gates_t` `[rows, 4H]` (pre-activations
/// on entry, activated gates on exit), `c` `[rows, H]` (c_{t-1} on entry, c_t on exit)
/// and `h` `[rows, H]` (h_t).
#[inline(always)]
fn cell_forward<M: MulAdd>(gates_t: &mut [f32], c: &mut [f32], h: &mut [f32], hidden: usize) {
    let states = c.chunks_mut(hidden).zip(h.chunks_mut(hidden));
    for (g, (c, h)) in gates_t.chunks_mut(4 * hidden).zip(states) {
        cell_forward_row::<M>(g, c, h, hidden);
    }
}

/// Units the gate passes handle at a time: one AVX-512 vector. Each row is cut into
/// blocks of this many units; the last, shorter block goes through the same code in
/// padded copies. (Left to the compiler, the 10 units left over from H = 250 ran as
/// 4-lane and scalar code, a fifth of the pass.)
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
fn cell_forward_row<M: MulAdd>(g: &mut [f32], c: &mut [f32], h: &mut [f32], hidden: usize) {
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
        cell_forward_units::<M>(gates, &mut c[u.clone()], &mut h[u]);
    }
    if full < hidden {
        let n = hidden - full;
        let mut pad = [[0.0f32; LANES]; 6];
        for (p, src) in pad.iter_mut().zip([&*gi, &*gf, &*gg, &*go, &*c]) {
            p[..n].copy_from_slice(&src[full..]);
        }
        let [pi, pf, pg, po, pc, ph] = &mut pad;
        cell_forward_units::<M>([pi, pf, pg, po], pc, ph);
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
fn cell_forward_units<M: MulAdd>(gates: [&mut [f32]; 4], c: &mut [f32], h: &mut [f32]) {
    let [gi, gf, gg, go] = gates;
    let (gi, gf, gg, go) = (
        &mut gi[..LANES],
        &mut gf[..LANES],
        &mut gg[..LANES],
        &mut go[..LANES],
    );
    let (c, h) = (&mut c[..LANES], &mut h[..LANES]);
    for j in 0..LANES {
        let (i, g) = fastmath::sigmoid_and_tanh::<M>(gi[j], gg[j]);
        let f = fastmath::sigmoid::<M>(gf[j]);
        c[j] = M::mul_add(f, c[j], i * g);
        let (o, tc) = fastmath::sigmoid_and_tanh::<M>(go[j], c[j]);
        (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
        h[j] = o * tc;
    }
}

/// The gradient of [`lstm_forward`] (with its cells kept); see the module documentation.
pub fn lstm_backward(
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    check_lengths("lstm_backward", inp.expected(d), out.expected(d))?;
    let LstmDims {
        steps,
        batch,
        input,
        hidden,
    } = d;
    let LstmBackwardOutputs {
        dgates,
        dh0,
        dc0,
        dw_ih,
        dw_hh,
        db,
        dx,
    } = out;
    let rows = steps * batch;
    let step_h = batch * hidden;
    let step_g = batch * 4 * hidden;

    // dh0 and dc0 hold the running gradients: on entry to step t, those arriving at h_t
    // from step t+1 (or from h_n) and at c_t from step t+1 (or from c_n).
    let (dh, dc) = (dh0, dc0);
    dh.copy_from_slice(inp.dh_n);
    dc.copy_from_slice(inp.dc_n);
    if steps == 0 || step_h == 0 {
        // Nothing flows through the layer: the weights get no gradient.
        for g in [dw_ih, dw_hh, db] {
            g.fill(0.0);
        }
        if let Some(dx) = dx {
            dx.fill(0.0);
        }
        return Ok(());
    }
    let token = gemm_fast::simd();

    // 1. Backwards through time: per step one fused pass and one GEMM, each thread over
    // its own batch rows for the whole sequence. w_hh is packed once, here.
    let w_hh = Recurrent::new(token, inp.w_hh, 4 * hidden, hidden, false);
    let part = rows_per_part(batch, hidden);
    let dgate_parts = split_steps(dgates, step_g, part * 4 * hidden);
    let work: Vec<_> = dgate_parts
        .into_iter()
        .zip(
            dh.chunks_mut(part * hidden)
                .zip(dc.chunks_mut(part * hidden)),
        )
        .enumerate()
        .collect();
    work.into_par_iter()
        .try_for_each(|(p, (mut dg, (dh, dc)))| {
            let m = dh.len() / hidden;
            let (r0, r1) = (p * part, p * part + m);
            vectorize(
                token,
                #[inline(always)]
                || -> Result<()> {
                    for t in (0..steps).rev() {
                        // This part's rows of step t (and t-1) in a `[T, B, width]` tensor.
                        let at = |width: usize, t: usize| {
                            (t * batch + r0) * width..(t * batch + r1) * width
                        };
                        let saved = StepSaved {
                            gates: &inp.gates[at(4 * hidden, t)],
                            c: &inp.cells[at(hidden, t)],
                            c_prev: if t == 0 {
                                &inp.c0[r0 * hidden..r1 * hidden]
                            } else {
                                &inp.cells[at(hidden, t - 1)]
                            },
                            dy: &inp.dy[at(hidden, t)],
                            dh: &*dh,
                            hidden,
                        };
                        let dgates_t = &mut *dg[t];
                        if token.is_some() {
                            cell_backward::<Fused>(&saved, dc, dgates_t);
                        } else {
                            cell_backward::<Separate>(&saved, dc, dgates_t);
                        }
                        // dh = dgates[t] · w_hh: the gradient arriving at h_{t-1}.
                        w_hh.gemm_rows(dgates_t, m, 0.0, dh)?;
                    }
                    Ok(())
                },
            )
        })?;
    // 2. Weight gradients over all steps at once.
    // dw_ih = dgatesᵀ · x over all T·B rows.
    let dgates_all_t = mat(dgates, rows, 4 * hidden)?.reversed_axes();
    gemm(
        1.0,
        dgates_all_t,
        mat(inp.x, rows, input)?,
        0.0,
        &mut mat_mut(dw_ih, 4 * hidden, input)?,
    )?;
    // dw_hh = Σ_t dgates[t]ᵀ · h_{t-1}: step 0 against h0, steps 1.. against y[0..T-1].
    let mut dw_hh = mat_mut(dw_hh, 4 * hidden, hidden)?;
    let dgates_0_t = mat(&dgates[..step_g], batch, 4 * hidden)?.reversed_axes();
    gemm(
        1.0,
        dgates_0_t,
        mat(inp.h0, batch, hidden)?,
        0.0,
        &mut dw_hh,
    )?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let dgates_rest_t = mat(&dgates[step_g..], later, 4 * hidden)?.reversed_axes();
        let h_prev = mat(&inp.y[..later * hidden], later, hidden)?;
        gemm(1.0, dgates_rest_t, h_prev, 1.0, &mut dw_hh)?;
    }
    // db = column sums of dgates (the gradient of b_ih and of b_hh alike).
    sum_to_shape(dgates, db)?;
    // dx = dgates · w_ih over all T·B rows.
    if let Some(dx) = dx {
        let w_ih = mat(inp.w_ih, 4 * hidden, input)?;
        gemm(
            1.0,
            mat(dgates, rows, 4 * hidden)?,
            w_ih,
            0.0,
            &mut mat_mut(dx, rows, input)?,
        )?;
    }
    Ok(())
}

/// What one backward step reads for one thread's rows, each `[rows, ·]`: the activated
/// `gates`, the cell states `c` (c_t) and `c_prev` (c_{t-1}), the gradient `dy` arriving
/// at y_t from outside and `dh` arriving at h_t from step t+1.
struct StepSaved<'a> {
    gates: &'a [f32],
    c: &'a [f32],
    c_prev: &'a [f32],
    dy: &'a [f32],
    dh: &'a [f32],
    hidden: usize,
}

/// One step's fused backward pass over one thread's rows: writes `dgates_t`
/// `[rows, 4H]` and replaces `dc` (the gradient at c_t on entry) by the gradient at
/// c_{t-1}.
#[inline(always)]
fn cell_backward<M: MulAdd>(s: &StepSaved<'_>, dc: &mut [f32], dgates_t: &mut [f32]) {
    let h = s.hidden;
    for (r, (dg, dc)) in dgates_t.chunks_mut(4 * h).zip(dc.chunks_mut(h)).enumerate() {
        cell_backward_row::<M>(s, r, dc, dg);
    }
}

/// Row `r` of [`cell_backward`], [`LANES`] units at a time (see [`cell_forward_row`]).
#[inline(always)]
fn cell_backward_row<M: MulAdd>(s: &StepSaved<'_>, r: usize, dc: &mut [f32], dgates: &mut [f32]) {
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
        cell_backward_units::<M>(read, &mut dc[u], grads);
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
        cell_backward_units::<M>(read.each_ref().map(|p| &p[..]), wc, [wi, wf, wg, wo]);
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
fn cell_backward_units<M: MulAdd>(read: [&[f32]; 8], dc: &mut [f32], grads: [&mut [f32]; 4]) {
    let [gi, gf, gg, go, c, c_prev, dy, dh] = read.map(|s| &s[..LANES]);
    let [d_i, d_f, d_g, d_o] = grads.map(|s| &mut s[..LANES]);
    let dc = &mut dc[..LANES];
    for j in 0..LANES {
        let (i, f, g, o) = (gi[j], gf[j], gg[j], go[j]);
        let tc = fastmath::tanh::<M>(c[j]);
        let dh_total = dy[j] + dh[j];
        let dc_t = M::mul_add(dh_total * o, M::mul_add(-tc, tc, 1.0), dc[j]);
        d_i[j] = dc_t * g * i * (1.0 - i);
        d_f[j] = dc_t * c_prev[j] * f * (1.0 - f);
        d_g[j] = dc_t * i * (1.0 - g * g);
        d_o[j] = dh_total * tc * o * (1.0 - o);
        dc[j] = dc_t * f;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_util::{assert_close, Rng};

    fn sigmoid64(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// The LSTM equations one element at a time, in f64, with no GEMM and no fusion:
    /// returns (y, h_n, c_n, activated gates, cells).
    #[allow(clippy::type_complexity)]
    fn naive_forward(
        d: LstmDims,
        p: &LstmForwardInputs<'_>,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let (tt, b, n_in, h) = (d.steps, d.batch, d.input, d.hidden);
        let mut hs: Vec<f64> = p.h0.iter().map(|&v| v as f64).collect();
        let mut cs: Vec<f64> = p.c0.iter().map(|&v| v as f64).collect();
        let (mut y, mut gates, mut cells) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..tt {
            let mut h_new = vec![0.0; b * h];
            let mut c_new = vec![0.0; b * h];
            for r in 0..b {
                // pre[k] for the 4H gate units of row r.
                let pre: Vec<f64> = (0..4 * h)
                    .map(|k| {
                        let mut s = p.b_ih[k] as f64 + p.b_hh[k] as f64;
                        for q in 0..n_in {
                            s += p.x[(t * b + r) * n_in + q] as f64 * p.w_ih[k * n_in + q] as f64;
                        }
                        for q in 0..h {
                            s += hs[r * h + q] * p.w_hh[k * h + q] as f64;
                        }
                        s
                    })
                    .collect();
                let act: Vec<f64> = (0..4 * h)
                    .map(|k| {
                        if k / h == 2 {
                            pre[k].tanh()
                        } else {
                            sigmoid64(pre[k])
                        }
                    })
                    .collect();
                for j in 0..h {
                    let (i, f, g, o) = (act[j], act[h + j], act[2 * h + j], act[3 * h + j]);
                    c_new[r * h + j] = f * cs[r * h + j] + i * g;
                    h_new[r * h + j] = o * c_new[r * h + j].tanh();
                }
                gates.extend(act);
            }
            y.extend(&h_new);
            cells.extend(&c_new);
            (hs, cs) = (h_new, c_new);
        }
        (y, hs, cs, gates, cells)
    }

    #[test]
    fn forward_matches_naive_per_element_lstm() {
        let mut rng = Rng(11);
        for round in 0..8 {
            let d = LstmDims {
                steps: rng.range(1, 5),
                batch: rng.range(1, 4),
                input: if round == 0 { 0 } else { rng.range(1, 6) },
                hidden: rng.range(1, 40), // blocks of LANES units and a padded rest
            };
            let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
            let x = rng.vec(rows * d.input);
            let (h0, c0) = (rng.vec(bh), rng.vec(bh));
            let (w_ih, w_hh) = (rng.vec(h4 * d.input), rng.vec(h4 * d.hidden));
            let (b_ih, b_hh) = (rng.vec(h4), rng.vec(h4));
            let inp = LstmForwardInputs {
                x: &x,
                h0: &h0,
                c0: &c0,
                w_ih: &w_ih,
                w_hh: &w_hh,
                b_ih: &b_ih,
                b_hh: &b_hh,
            };
            let (y0, hn0, cn0, g0, cells0) = naive_forward(d, &inp);
            for keep in [true, false] {
                let mut y = vec![f32::NAN; rows * d.hidden];
                let (mut h_n, mut c_n) = (vec![f32::NAN; bh], vec![f32::NAN; bh]);
                let mut gates = vec![f32::NAN; rows * h4];
                let mut cells = vec![f32::NAN; rows * d.hidden];
                let out = LstmForwardOutputs {
                    y: &mut y,
                    h_n: &mut h_n,
                    c_n: &mut c_n,
                    gates: &mut gates,
                    cells: keep.then_some(&mut cells[..]),
                };
                lstm_forward(d, &inp, out).unwrap();
                let what = |t: &str| format!("round {round} {d:?} keep {keep}: {t}");
                let (atol, rtol) = (1e-5, 1e-4);
                assert_close(&what("y"), &y, &y0, atol, rtol);
                assert_close(&what("h_n"), &h_n, &hn0, atol, rtol);
                assert_close(&what("c_n"), &c_n, &cn0, atol, rtol);
                if keep {
                    // (Without `keep`, the gates are scratch: `Op::output_is_scratch`.)
                    assert_close(&what("gates"), &gates, &g0, atol, rtol);
                    assert_close(&what("cells"), &cells, &cells0, atol, rtol);
                }
            }
        }
    }

    #[test]
    fn wide_steps_take_the_parallel_path_and_agree() {
        // B·4H = 16·4·256 ≥ PARALLEL_MIN_ELEMENTS: the fused passes run on rayon.
        let mut rng = Rng(5);
        let d = LstmDims {
            steps: 2,
            batch: 16,
            input: 3,
            hidden: 256,
        };
        assert!(d.batch * 4 * d.hidden >= PARALLEL_MIN_ELEMENTS);
        let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
        let x = rng.vec(rows * d.input);
        let (h0, c0) = (rng.vec(bh), rng.vec(bh));
        let w_ih = rng.vec(h4 * d.input);
        let w_hh: Vec<f32> = rng.vec(h4 * d.hidden).iter().map(|v| v * 0.1).collect();
        let (b_ih, b_hh) = (rng.vec(h4), rng.vec(h4));
        let inp = LstmForwardInputs {
            x: &x,
            h0: &h0,
            c0: &c0,
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: &b_ih,
            b_hh: &b_hh,
        };
        let (y0, ..) = naive_forward(d, &inp);
        let mut y = vec![0.0; rows * d.hidden];
        let (mut h_n, mut c_n) = (vec![0.0; bh], vec![0.0; bh]);
        let mut gates = vec![0.0; rows * h4];
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            c_n: &mut c_n,
            gates: &mut gates,
            cells: None,
        };
        lstm_forward(d, &inp, out).unwrap();
        assert_close("y", &y, &y0, 1e-5, 1e-4);
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let d = LstmDims {
            steps: 2,
            batch: 1,
            input: 1,
            hidden: 1,
        };
        let v = [0.0f32; 8];
        let inp = LstmForwardInputs {
            x: &v[..1], // should be 2
            h0: &v[..1],
            c0: &v[..1],
            w_ih: &v[..4],
            w_hh: &v[..4],
            b_ih: &v[..4],
            b_hh: &v[..4],
        };
        let (mut y, mut hn, mut cn, mut g) = ([0.0; 2], [0.0], [0.0], [0.0; 8]);
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut hn,
            c_n: &mut cn,
            gates: &mut g,
            cells: None,
        };
        assert!(lstm_forward(d, &inp, out).is_err());
    }
}
