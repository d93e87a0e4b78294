//! The LSTM kernels, `lstm_forward` and `lstm_backward`: a whole layer over a whole
//! sequence per call, organised the way cuDNN organises it. This file is the readable
//! reference every GPU LSTM kernel is tested against; `fast.rs` beside it is the
//! AVX-512 fast path, tested against this one and chosen where the CPU has AVX-512.
//!
//! cuDNN's structure is kept visible here because it is where the speed comes from, and
//! a GPU kernel can be compared with this code step by step:
//! - **forward**: the input projection of *all* steps is one GEMM,
//!   `gates[T·B, 4H] = x[T·B, I] · w_ihᵀ`, plus both biases (when the gates are not kept
//!   for the backward, one GEMM per chunk of `LstmDims::gate_steps` steps, into the few
//!   steps of gates the op then holds); then per step `t`, one GEMM
//!   accumulates the recurrent term, `gates[t] += h_{t-1} · w_hhᵀ`, and one fused pass
//!   over `[B, 4H]` applies the nonlinearities in place (storing the *activated* gates
//!   σ(i), σ(f), tanh(g), σ(o)) and updates the cell and hidden state.
//! - **backward**: per step, from `t = T-1` down to 0, one fused pass turns the
//!   gradient arriving at `h_t` and `c_t` into the pre-activation gate gradients
//!   `dgates[t]`, and one GEMM carries the gradient to `h_{t-1}`:
//!   `dh = dgates[t] · w_hh`. The weight gradients do not depend on the order of the
//!   steps, so they are formed after the loop with one GEMM each over all `T·B` rows
//!   (`weight_gradients`, shared with the fast path).
//!
//! On token input (`d.tokens`: `x` holds `[T, B]` ids, `w_ih` is `[4H, V]`) the input
//! projection is the gather of `w_ih`'s columns and `dw_ih` the scatter-add of the gate
//! gradients into the columns of the ids seen (`recurrent.rs`, shared with the GRU).
//!
//! Gate order is PyTorch's (i, f, g, o): row `r` of `gates[t]` holds `[i | f | g | o]`,
//! each block `H` wide. The nonlinearities are `fastmath`'s (no library calls, so the
//! compiler vectorises the row loops), with separate multiplies and adds.

use rayon::prelude::*;
use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{args, LstmDims, RecurrentDims, Result};

use super::at_lengths::gather_steps;
use super::elementwise::sum_to_shape;
use super::fastmath::{self, Separate};
use super::gemm::{gemm, mat, mat_mut};
use super::gemm_fast::{self, Token};
use super::packs::Packer;
use super::recurrent::{
    check_inputs, hidden_weight_gradient, input_gradients, zero_gradients, ForwardLoop,
    RecurrentInto, SumOver,
};
use super::{check_len, PARALLEL_MIN_ELEMENTS};

mod columns;
mod columns_backward;
pub(crate) mod fast;

/// The inputs of [`lstm_forward`] (see [`args::LstmForwardInputs`]).
pub type LstmForwardInputs<'a> = args::LstmForwardInputs<&'a [f32]>;
/// The outputs of [`lstm_forward`] (see [`args::LstmForwardOutputs`]).
pub type LstmForwardOutputs<'a> = args::LstmForwardOutputs<&'a mut [f32]>;
/// The inputs of [`lstm_backward`] (see [`args::LstmBackwardInputs`]).
pub type LstmBackwardInputs<'a> = args::LstmBackwardInputs<&'a [f32]>;
/// The outputs of [`lstm_backward`] (see [`args::LstmBackwardOutputs`]).
pub type LstmBackwardOutputs<'a> = args::LstmBackwardOutputs<&'a mut [f32]>;

/// Checks every input and output slice against the length the layer needs (the GRU's
/// too).
pub(crate) fn check_lengths(
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

/// Runs an LSTM layer over a sequence: the fast path where the CPU has AVX-512, else the
/// reference.
pub fn lstm_forward(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
) -> Result<()> {
    lstm_forward_packed(d, inp, out, &mut Packer::fresh())
}

/// [`lstm_forward`] with its weights packed through `packs` (which may keep them from
/// an earlier call: `packs.rs`).
pub fn lstm_forward_packed(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) -> Result<()> {
    forward_on(gemm_fast::simd(), d, inp, out, packs)
}

/// The gradient of [`lstm_forward`] (with its cells kept): the fast path where the CPU
/// has AVX-512, else the reference.
pub fn lstm_backward(
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    backward_on(gemm_fast::simd(), d, inp, out)
}

/// [`lstm_forward`] on the fast path of `token`, or on the reference without one.
pub fn forward_on(
    token: Option<Token>,
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    mut out: LstmForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) -> Result<()> {
    check_lengths("lstm_forward", inp.expected(d), out.expected(d))?;
    check_inputs(&d, inp.x, inp.lengths)?;
    // The final state starts as the initial one (`c_n` is the running cell state when
    // the cells are not kept: on entry to step t it holds c_{t-1}); when no step runs,
    // that is all.
    out.h_n.copy_from_slice(inp.h0);
    out.c_n.copy_from_slice(inp.c0);
    if d.is_empty() {
        return Ok(());
    }
    // The input projection's bias: both of PyTorch's vectors at once.
    let bias = inp.b_ih.iter().zip(inp.b_hh).map(|(a, b)| a + b).collect();
    match token {
        Some(token) => fast::forward(token, d, (inp, packs), &mut out, bias)?,
        None => forward_steps(d, inp, &mut out, &bias)?,
    }
    forward_ends(d, inp.lengths, out);
    Ok(())
}

/// [`lstm_backward`] on the fast path of `token`, or on the reference without one.
pub fn backward_on(
    token: Option<Token>,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    check_lengths("lstm_backward", inp.expected(d), out.expected(d))?;
    check_inputs(&d, inp.x, inp.lengths)?;
    match token {
        Some(token) => fast::backward(token, d, inp, out),
        None => backward_steps(d, inp, out),
    }
}

/// What [`forward_on`] does after either path: the final state is the last step's, or with
/// `lengths` each row's at its own last step (`h0` for an empty sequence; the cells
/// carried past the end already hold it).
fn forward_ends(d: LstmDims, lengths: Option<&[f32]>, out: LstmForwardOutputs<'_>) {
    let last = (d.steps - 1) * d.step_state()..d.steps * d.step_state();
    match lengths {
        Some(l) => gather_steps(d.steps - 1, l, out.y, out.h_n),
        None => out.h_n.copy_from_slice(&out.y[last.clone()]),
    }
    if let Some(cells) = out.cells {
        out.c_n.copy_from_slice(&cells[last]);
    }
}

/// The reference forward over the steps of a layer that is not empty, on slices of checked
/// lengths, the final state started ([`forward_on`]); `bias` is the input projection's.
fn forward_steps(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: &mut LstmForwardOutputs<'_>,
    bias: &[f32],
) -> Result<()> {
    let (hidden, step_h) = (d.hidden, d.step_state());
    // Steps of gates held: all of them when kept for the backward, else a few reused in
    // turn (`LstmDims::gate_steps`); the inputs are projected that many steps at a time,
    // with both biases, and per step the recurrent GEMM adds to the gates
    // (`recurrent.rs`), then the fused pass below.
    let frame = ForwardLoop {
        x: inp.x,
        w_ih: inp.w_ih,
        w_hh: inp.w_hh,
        h0: inp.h0,
        input_bias: bias,
        held: d.gate_steps(out.cells.is_some()),
    };
    let (cells, c_n) = (&mut out.cells, &mut *out.c_n);
    let tensors = (&mut *out.gates, RecurrentInto::AddedToGates, &mut *out.y);
    super::recurrent::forward_steps(&d, &frame, tensors, |step| {
        let t = step.t;
        // The cell state: c_{t-1} on entry to the pass, c_t after it.
        let c_t: &mut [f32] = match cells.as_deref_mut() {
            Some(cells) => {
                let (c_before, c_from_t) = cells.split_at_mut(t * step_h);
                let c_t = &mut c_from_t[..step_h];
                let c_prev = if t == 0 {
                    inp.c0
                } else {
                    &c_before[(t - 1) * step_h..]
                };
                c_t.copy_from_slice(c_prev);
                c_t
            }
            None => &mut *c_n,
        };
        let rows = RowLengths(inp.lengths);
        cell_forward(step.gates, c_t, step.h, hidden, (t, rows));
    })?;

    Ok(())
}

/// One row's gates, cell state and hidden state, as the fused pass walks them.
type GatesCellHidden<'a> = ((&'a mut [f32], &'a mut [f32]), &'a mut [f32]);

/// One step's fused pass over all rows: `gates_t` `[B, 4H]` (pre-activations on entry,
/// activated gates on exit), `c` `[B, H]` (c_{t-1} on entry, c_t on exit), `h` (h_t).
/// A row past its end at step `t` keeps its cell state and gets `h = 0` and zero gates.
fn cell_forward(
    gates_t: &mut [f32],
    c: &mut [f32],
    h: &mut [f32],
    hidden: usize,
    (t, lengths): (usize, RowLengths<'_>),
) {
    let row = |(r, ((g, c), h)): (usize, GatesCellHidden<'_>)| {
        if lengths.past_end(t, r) {
            g.fill(0.0);
            h.fill(0.0);
            return;
        }
        let (i, rest) = g.split_at_mut(hidden);
        let (f, rest) = rest.split_at_mut(hidden);
        let (g, o) = rest.split_at_mut(hidden);
        for j in 0..hidden {
            (i[j], f[j], g[j], o[j]) = (sigmoid(i[j]), sigmoid(f[j]), tanh(g[j]), sigmoid(o[j]));
            c[j] = f[j] * c[j] + i[j] * g[j];
            h[j] = o[j] * tanh(c[j]);
        }
    };
    if gates_t.len() < PARALLEL_MIN_ELEMENTS || crate::threads::inline() {
        let rows = gates_t.chunks_mut(4 * hidden).zip(c.chunks_mut(hidden));
        rows.zip(h.chunks_mut(hidden)).enumerate().for_each(row);
    } else {
        let rows = gates_t
            .par_chunks_mut(4 * hidden)
            .zip(c.par_chunks_mut(hidden));
        rows.zip(h.par_chunks_mut(hidden)).enumerate().for_each(row);
    }
}

/// A backward's outputs once [`backward_begins`] has set them up.
pub(crate) struct BackwardStart<'a> {
    pub dgates: &'a mut [f32],
    /// The running gradients: on entry to step t, those arriving at h_t from step t+1
    /// (or from h_n) and at c_t from step t+1 (or from c_n). They end as dh0 and dc0.
    pub dh: &'a mut [f32],
    pub dc: &'a mut [f32],
    pub grads: WeightGrads<'a>,
}

/// What both backward paths do first: the running gradients start as those of the final
/// state. `None` when nothing flows through the layer, with the weights' gradients zero.
fn backward_begins<'a>(
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'a>,
) -> Option<BackwardStart<'a>> {
    let LstmBackwardOutputs {
        dgates,
        dh0,
        dc0,
        dw_ih,
        dw_hh,
        db,
        dx,
    } = out;
    dh0.copy_from_slice(inp.dh_n);
    dc0.copy_from_slice(inp.dc_n);
    let grads = WeightGrads {
        dw_ih,
        dw_hh,
        db,
        dx,
    };
    if d.is_empty() {
        grads.zero();
        return None;
    }
    Some(BackwardStart {
        dgates,
        dh: dh0,
        dc: dc0,
        grads,
    })
}

/// The reference backward, on slices of checked lengths.
fn backward_steps(
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    out: LstmBackwardOutputs<'_>,
) -> Result<()> {
    let Some(BackwardStart {
        dgates,
        dh,
        dc,
        grads,
    }) = backward_begins(d, inp, out)
    else {
        return Ok(());
    };
    let (steps, batch, hidden, h4) = (d.steps, d.batch, d.hidden, d.gate_width());

    // 1. Backwards through time: per step one fused pass and one GEMM.
    let w_hh = mat(inp.w_hh, h4, hidden)?;
    for t in (0..steps).rev() {
        // Step t of a `[T, B, width]` tensor.
        let at = |width: usize, t: usize| t * batch * width..(t + 1) * batch * width;
        let c_prev = if t == 0 {
            inp.c0
        } else {
            &inp.cells[at(hidden, t - 1)]
        };
        let saved = [
            &inp.gates[at(h4, t)],
            &inp.cells[at(hidden, t)],
            c_prev,
            &inp.dy[at(hidden, t)],
        ];
        let dgates_t = &mut dgates[at(h4, t)];
        let rows = RowLengths(inp.lengths);
        cell_backward(saved, dh, dc, dgates_t, hidden, (t, rows));
        // dh = dgates[t] · w_hh: the gradient arriving at h_{t-1} (added, with lengths,
        // to the dh_n that padded rows carry).
        let dgates_t = mat(dgates_t, batch, h4)?;
        let beta = hold_padded_dh(rows, t, dh, hidden);
        gemm(1.0, dgates_t, w_hh, beta, &mut mat_mut(dh, batch, hidden)?)?;
    }

    // 2. The weight gradients over all steps at once.
    weight_gradients((d, SumOver::AllRows), inp, dgates, grads)
}

/// Before step `t`'s GEMM `dh = dgates[t] · w_hh`: with lengths, zeroes the running
/// `dh` of the rows inside their sequence (read by the step already) and returns the
/// GEMM's β = 1, so that padded rows, whose `dgates` are zero, carry their `dh_n` to
/// their last step (see `tensorfit_core::seq_lengths`); β = 0 without.
pub(crate) fn hold_padded_dh(rows: RowLengths<'_>, t: usize, dh: &mut [f32], hidden: usize) -> f32 {
    if rows.0.is_none() {
        return 0.0;
    }
    for (r, dh) in dh.chunks_mut(hidden).enumerate() {
        if !rows.past_end(t, r) {
            dh.fill(0.0);
        }
    }
    1.0
}

/// One step's fused backward pass over all rows. `saved` holds the step's activated
/// `gates` `[B, 4H]`, `c_t`, `c_{t-1}` and the gradient `dy` arriving at y_t from
/// outside; `dh` is the gradient arriving at h_t from step t+1. Writes `dgates_t` and
/// replaces `dc` (the gradient at c_t on entry) by the gradient at c_{t-1}. With
/// `tc = tanh(c_t)`: `dh_total = dy + dh`, `do = dh_total·tc`,
/// `dc += dh_total·o·(1 - tc²)`, `di = dc·g`, `df = dc·c_{t-1}`, `dg = dc·i`; the
/// pre-activation gradients are those times σ' or tanh' written with the outputs;
/// finally `dc = dc·f` flows to c_{t-1}. A row past its end at step `t` gets zero
/// `dgates` and keeps its `dc`.
fn cell_backward(
    [gates, c, c_prev, dy]: [&[f32]; 4],
    dh: &[f32],
    dc: &mut [f32],
    dgates_t: &mut [f32],
    hidden: usize,
    (t, lengths): (usize, RowLengths<'_>),
) {
    let per_row = dgates_t.chunks_mut(4 * hidden).zip(dc.chunks_mut(hidden));
    for (r, (dg, dc)) in per_row.enumerate() {
        if lengths.past_end(t, r) {
            dg.fill(0.0);
            continue;
        }
        let state = r * hidden..(r + 1) * hidden;
        let (c, c_prev) = (&c[state.clone()], &c_prev[state.clone()]);
        let (dy, dh) = (&dy[state.clone()], &dh[state]);
        let g_row = &gates[r * 4 * hidden..(r + 1) * 4 * hidden];
        let (d_i, rest) = dg.split_at_mut(hidden);
        let (d_f, rest) = rest.split_at_mut(hidden);
        let (d_g, d_o) = rest.split_at_mut(hidden);
        for j in 0..hidden {
            let (i, f) = (g_row[j], g_row[hidden + j]);
            let (g, o) = (g_row[2 * hidden + j], g_row[3 * hidden + j]);
            let tc = tanh(c[j]);
            let dh_total = dy[j] + dh[j];
            let dc_t = dh_total * o * (1.0 - tc * tc) + dc[j];
            d_i[j] = dc_t * g * i * (1.0 - i);
            d_f[j] = dc_t * c_prev[j] * f * (1.0 - f);
            d_g[j] = dc_t * i * (1.0 - g * g);
            d_o[j] = dh_total * tc * o * (1.0 - o);
            dc[j] = dc_t * f;
        }
    }
}

fn sigmoid(x: f32) -> f32 {
    fastmath::sigmoid::<Separate>(x)
}

fn tanh(x: f32) -> f32 {
    fastmath::tanh::<Separate>(x)
}

/// The gradients of the layer's weights (and input) that are formed over all steps at
/// once, after the time loop.
pub(crate) struct WeightGrads<'a> {
    pub dw_ih: &'a mut [f32],
    pub dw_hh: &'a mut [f32],
    pub db: &'a mut [f32],
    pub dx: Option<&'a mut [f32]>,
}

impl WeightGrads<'_> {
    /// When nothing flows through the layer (no steps, or no units): zero gradients.
    fn zero(self) {
        zero_gradients([self.dw_ih, self.dw_hh, self.db], self.dx);
    }
}

/// The weight gradients from every step's `dgates` `[T, B, 4H]`, one GEMM each over all
/// `T·B` rows: `dw_ih = dgatesᵀ · x`, `dw_hh = Σ_t dgates[t]ᵀ · h_{t-1}`, `db` the column
/// sums of `dgates` (the gradient of `b_ih` and of `b_hh` alike), `dx = dgates · w_ih`;
/// on token input `dw_ih` is the scatter-add of `dgates` into the ids' columns.
pub(crate) fn weight_gradients(
    (d, sum): (LstmDims, SumOver<'_>),
    inp: &LstmBackwardInputs<'_>,
    dgates: &[f32],
    g: WeightGrads<'_>,
) -> Result<()> {
    input_gradients(&d, sum, (dgates, inp.x, inp.w_ih), (g.dw_ih, g.dx))?;
    hidden_weight_gradient(&d, sum, dgates, (inp.h0, inp.y), g.dw_hh)?;
    sum_to_shape(dgates, g.db)
}

#[cfg(test)]
mod tests;
