//! The GRU kernels, `gru_forward` and `gru_backward`: a whole layer over a whole sequence
//! per call, PyTorch's `nn.GRU` (gate order r, z, n; `b_hn` inside the reset product),
//! organised as the LSTM kernels beside them are. This file is the readable reference
//! every GPU GRU kernel is tested against; `fast.rs` beside it is the AVX-512 fast path,
//! tested against this one and chosen where the CPU has AVX-512.
//! - **forward**: the input projection of *all* steps is one GEMM,
//!   `gates[T·B, 3H] = x · w_ihᵀ + b_ih` (when nothing is kept for the backward, one GEMM
//!   per chunk of `GruDims::gate_steps` steps, into the few steps of `gates` and
//!   `hidden` the op then holds, as the LSTM's); then per step `t`, one GEMM forms the recurrent
//!   projection `hidden[t] = h_{t-1} · w_hhᵀ + b_hh`, and one fused pass over `[B, H]`
//!   applies `r = σ(g_r + h_r)`, `z = σ(g_z + h_z)`, `n = tanh(g_n + r·h_n)`,
//!   `h_t = (1 − z)·n + z·h_{t-1}`, storing the activated r, z, n in `gates[t]`.
//! - **backward**: per step, from `t = T-1` down to 0, one fused pass turns the gradient
//!   arriving at `h_t` into the gradients at both projections (`dgates[t]`,
//!   `dhidden[t]`, equal but for the n block, which `dhidden` has times r) and leaves
//!   `dh = dh_total·z`, then one GEMM adds the rest of the gradient at `h_{t-1}`:
//!   `dh += dhidden[t] · w_hh`. The weight gradients are formed after the loop with one
//!   GEMM each over all `T·B` rows (`weight_gradients`, shared with the fast path).
//!
//! On token input (`x` `[T, B]` ids, `w_ih` `[3H, V]`) the input projection is the gather
//! of `w_ih`'s columns and `dw_ih` their scatter-add, as the LSTM's (`recurrent.rs`).
//!
//! With `lengths` (`tensorfit_core::seq_lengths`), a row past its end gets zero `y`,
//! gates and projections forward, and zero gradients with `dh` carried backward; its
//! `h_n` is gathered at its own last step.

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{args, GruDims, RecurrentDims, Result};

use super::at_lengths::gather_steps;
use super::elementwise::sum_to_shape;
use super::fastmath::{self, MulAdd, Separate};
use super::gemm::{gemm, mat, mat_mut};
use super::gemm_fast::{self, Token};
use super::lstm::check_lengths;
use super::packs::Packer;
use super::recurrent::{
    check_inputs, hidden_weight_gradient, input_gradients, zero_gradients, ForwardLoop,
    RecurrentInto, SumOver,
};

mod columns;
mod columns_backward;
mod fast;

/// The inputs of [`gru_forward`] (see [`args::GruForwardInputs`]).
pub type GruForwardInputs<'a> = args::GruForwardInputs<&'a [f32]>;
/// The outputs of [`gru_forward`] (see [`args::GruForwardOutputs`]).
pub type GruForwardOutputs<'a> = args::GruForwardOutputs<&'a mut [f32]>;
/// The inputs of [`gru_backward`] (see [`args::GruBackwardInputs`]).
pub type GruBackwardInputs<'a> = args::GruBackwardInputs<&'a [f32]>;
/// The outputs of [`gru_backward`] (see [`args::GruBackwardOutputs`]).
pub type GruBackwardOutputs<'a> = args::GruBackwardOutputs<&'a mut [f32]>;

/// Runs a GRU layer over a sequence: the fast path where the CPU has AVX-512, else the
/// reference.
/// With `keep_for_backward` false, `gates` and `hidden` hold `d.gate_steps(false)` steps.
pub fn gru_forward(
    d: GruDims,
    keep_for_backward: bool,
    inp: &GruForwardInputs<'_>,
    out: GruForwardOutputs<'_>,
) -> Result<()> {
    gru_forward_packed(d, keep_for_backward, inp, out, &mut Packer::fresh())
}

/// [`gru_forward`] with its weights packed through `packs` (which may keep them from an
/// earlier call: `packs.rs`).
pub fn gru_forward_packed(
    d: GruDims,
    keep_for_backward: bool,
    inp: &GruForwardInputs<'_>,
    out: GruForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) -> Result<()> {
    forward_on(gemm_fast::simd(), d, keep_for_backward, inp, out, packs)
}

/// The gradient of [`gru_forward`]: the fast path where the CPU has AVX-512, else the
/// reference.
pub fn gru_backward(
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    out: GruBackwardOutputs<'_>,
) -> Result<()> {
    backward_on(gemm_fast::simd(), d, inp, out)
}

/// [`gru_forward`] on the fast path of `token`, or on the reference without one.
pub fn forward_on(
    token: Option<Token>,
    d: GruDims,
    keep_for_backward: bool,
    inp: &GruForwardInputs<'_>,
    mut out: GruForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) -> Result<()> {
    let expected = out.expected(d, keep_for_backward);
    check_lengths("gru_forward", inp.expected(d), expected)?;
    check_inputs(&d, inp.x, inp.lengths)?;
    // The final state starts as the initial one, which is where it stays without steps
    // (and, with lengths, for an empty sequence).
    out.h_n.copy_from_slice(inp.h0);
    if d.is_empty() {
        return Ok(());
    }
    let held = d.gate_steps(keep_for_backward);
    match token {
        Some(token) => fast::forward(token, d, (held, keep_for_backward), inp, &mut out, packs),
        None => forward_steps(d, held, inp, &mut out)?,
    }
    // The final state: the last step's, or each row's at its own last step.
    match inp.lengths {
        Some(l) => gather_steps(d.steps - 1, l, out.y, out.h_n),
        None => out
            .h_n
            .copy_from_slice(&out.y[(d.steps - 1) * d.step_state()..]),
    }
    Ok(())
}

/// [`gru_backward`] on the fast path of `token`, or on the reference without one.
pub fn backward_on(
    token: Option<Token>,
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    mut out: GruBackwardOutputs<'_>,
) -> Result<()> {
    check_lengths("gru_backward", inp.expected(d), out.expected(d))?;
    check_inputs(&d, inp.x, inp.lengths)?;
    // dh0 holds the running gradient: on entry to step t, the one arriving at h_t.
    out.dh0.copy_from_slice(inp.dh_n);
    if d.is_empty() {
        let GruBackwardOutputs {
            dw_ih,
            dw_hh,
            db_ih,
            db_hh,
            dx,
            ..
        } = out;
        zero_gradients([dw_ih, dw_hh, db_ih, db_hh], dx);
        return Ok(());
    }
    match token {
        Some(token) => fast::backward(token, d, inp, &mut out),
        None => backward_steps(d, inp, &mut out)?,
    }
    // On the fast path with lengths, over the real steps only (the padded rows'
    // gradients are zeros).
    weight_gradients((d, SumOver::new(token, inp.lengths)), inp, out)
}

/// The previous state of step `t` of `[T, B, H]` outputs `y`, as a range of `y`, or `None`
/// for step 0 (whose previous state is `h0`).
fn previous(d: GruDims, t: usize) -> Option<std::ops::Range<usize>> {
    (t > 0).then(|| (t - 1) * d.step_state()..t * d.step_state())
}

/// The reference forward, on slices of checked lengths, for a layer that is not empty,
/// holding `held` steps of `gates` and `hidden` (step `t` in slot `t % held`).
fn forward_steps(
    d: GruDims,
    held: usize,
    inp: &GruForwardInputs<'_>,
    out: &mut GruForwardOutputs<'_>,
) -> Result<()> {
    // The inputs projected `held` steps at a time with b_ih, per step the recurrent
    // projection written to `hidden` with b_hh (`recurrent.rs`), then the fused pass.
    let frame = ForwardLoop {
        x: inp.x,
        w_ih: inp.w_ih,
        w_hh: inp.w_hh,
        h0: inp.h0,
        input_bias: inp.b_ih,
        held,
    };
    let recurrent = RecurrentInto::Own(&mut *out.hidden, inp.b_hh);
    let tensors = (&mut *out.gates, recurrent, &mut *out.y);
    super::recurrent::forward_steps(&d, &frame, tensors, |step| {
        let rows = (step.t, RowLengths(inp.lengths));
        let (gates_t, hidden_t) = (step.gates, step.recurrent);
        cell_forward::<Separate>(gates_t, hidden_t, step.h_prev, step.h, d.hidden, rows);
    })
}

/// One step's fused pass over some rows: `gates_t` `[rows, 3H]` (the input projections
/// on entry, the activated r, z, n on exit), `hidden_t` `[rows, 3H]` (the recurrent
/// projections), `h_prev` (h_{t-1}) and `h` (h_t), `[rows, H]`. `M` says whether
/// multiply-adds are fused (the fast path) or not (the reference). A row past its end at
/// step `t` gets zero gates, projections and `h`.
#[inline(always)]
fn cell_forward<M: MulAdd>(
    gates_t: &mut [f32],
    hidden_t: &mut [f32],
    h_prev: &[f32],
    h: &mut [f32],
    hidden: usize,
    (t, lengths): (usize, RowLengths<'_>),
) {
    let rows = gates_t
        .chunks_mut(3 * hidden)
        .zip(hidden_t.chunks_mut(3 * hidden));
    let states = h_prev.chunks(hidden).zip(h.chunks_mut(hidden));
    for (r, ((g, hh), (h_prev, h))) in rows.zip(states).enumerate() {
        if lengths.past_end(t, r) {
            for v in [g, hh, h] {
                v.fill(0.0);
            }
            continue;
        }
        let (g_r, rest) = g.split_at_mut(hidden);
        let (g_z, g_n) = rest.split_at_mut(hidden);
        let (h_r, rest) = hh.split_at(hidden);
        let (h_z, h_n) = rest.split_at(hidden);
        let units = g_r.iter_mut().zip(g_z.iter_mut()).zip(g_n.iter_mut());
        let recurrent = h_r.iter().zip(h_z).zip(h_n);
        let state = h_prev.iter().zip(h.iter_mut());
        for (((r, z), n), (((hr, hz), hn), (hp, h))) in units.zip(recurrent.zip(state)) {
            let reset = fastmath::sigmoid::<M>(*r + hr);
            let update = fastmath::sigmoid::<M>(*z + hz);
            let new = fastmath::tanh::<M>(M::mul_add(reset, *hn, *n));
            (*r, *z, *n) = (reset, update, new);
            // (1 − z)·n + z·h_{t-1}
            *h = M::mul_add(update, hp - new, new);
        }
    }
}

/// The reference backward, on slices of checked lengths, for a layer that is not empty:
/// fills `dgates`, `dhidden` and `dh0`.
fn backward_steps(
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    out: &mut GruBackwardOutputs<'_>,
) -> Result<()> {
    let (steps, batch, hidden, h3) = (d.steps, d.batch, d.hidden, d.gate_width());
    let (step_h, step_g) = (d.step_state(), d.step_gates());
    let w_hh = mat(inp.w_hh, h3, hidden)?;
    for t in (0..steps).rev() {
        let saved = StepSaved {
            gates: &inp.gates[t * step_g..(t + 1) * step_g],
            hidden: &inp.hidden[t * step_g..(t + 1) * step_g],
            h_prev: previous(d, t).map_or(inp.h0, |range| &inp.y[range]),
            dy: &inp.dy[t * step_h..(t + 1) * step_h],
            units: hidden,
        };
        let dgates_t = &mut out.dgates[t * step_g..(t + 1) * step_g];
        let dhidden_t = &mut out.dhidden[t * step_g..(t + 1) * step_g];
        let rows = (t, RowLengths(inp.lengths));
        cell_backward(&saved, out.dh0, dgates_t, dhidden_t, rows);
        // dh += dhidden[t] · w_hh: the rest of the gradient arriving at h_{t-1}.
        let dhidden_t = mat(dhidden_t, batch, h3)?;
        gemm(
            1.0,
            dhidden_t,
            w_hh,
            1.0,
            &mut mat_mut(out.dh0, batch, hidden)?,
        )?;
    }
    Ok(())
}

/// What one backward step reads, for some rows: the activated `gates` and the recurrent
/// projections `hidden` `[rows, 3H]`, `h_prev` (h_{t-1}) and the gradient `dy` arriving at
/// y_t from outside, `[rows, H]`.
pub(crate) struct StepSaved<'a> {
    pub gates: &'a [f32],
    pub hidden: &'a [f32],
    pub h_prev: &'a [f32],
    pub dy: &'a [f32],
    pub units: usize,
}

/// One step's fused backward pass over the rows of `s`. `dh` holds the gradient arriving
/// at h_t from step t+1 on entry, and its part that flows to h_{t-1} directly, `dh·z`, on
/// exit. With `dh_total = dy + dh`: `dn = dh_total·(1 − z)·(1 − n²)`,
/// `dz = dh_total·(h_{t-1} − n)·z·(1 − z)`, `dr = dn·h_n·r·(1 − r)`; `dgates` gets
/// (dr, dz, dn) and `dhidden` (dr, dz, dn·r). A row past its end at step `t` gets zero
/// gradients and keeps its `dh` (the step's GEMM adds nothing to it).
#[inline(always)]
fn cell_backward(
    s: &StepSaved<'_>,
    dh: &mut [f32],
    dgates_t: &mut [f32],
    dhidden_t: &mut [f32],
    (t, lengths): (usize, RowLengths<'_>),
) {
    let hidden = s.units;
    let grads = dgates_t
        .chunks_mut(3 * hidden)
        .zip(dhidden_t.chunks_mut(3 * hidden));
    for (r, (dg, dhh)) in grads.enumerate() {
        if lengths.past_end(t, r) {
            dg.fill(0.0);
            dhh.fill(0.0);
            continue;
        }
        let state = r * hidden..(r + 1) * hidden;
        let g = &s.gates[r * 3 * hidden..(r + 1) * 3 * hidden];
        let hh = &s.hidden[r * 3 * hidden..(r + 1) * 3 * hidden];
        let (h_prev, dy, dh) = (
            &s.h_prev[state.clone()],
            &s.dy[state.clone()],
            &mut dh[state],
        );
        for j in 0..hidden {
            let (jz, jn) = (hidden + j, 2 * hidden + j);
            let (reset, update, new) = (g[j], g[jz], g[jn]);
            let dh_total = dy[j] + dh[j];
            let d_new = dh_total * (1.0 - update) * (1.0 - new * new);
            let d_update = dh_total * (h_prev[j] - new) * update * (1.0 - update);
            let d_reset = d_new * hh[jn] * reset * (1.0 - reset);
            (dg[j], dg[jz], dg[jn]) = (d_reset, d_update, d_new);
            (dhh[j], dhh[jz], dhh[jn]) = (d_reset, d_update, d_new * reset);
            dh[j] = dh_total * update;
        }
    }
}

/// The weight gradients from every step's `dgates` and `dhidden` `[T, B, 3H]`, one GEMM
/// each over all `T·B` rows (`recurrent.rs`, shared with the LSTM): `dw_ih` and `dx` from
/// `dgates` (on token input `dw_ih` its scatter-add), `dw_hh` from `dhidden`; `db_ih` and `db_hh` their column sums.
fn weight_gradients(
    (d, sum): (GruDims, SumOver<'_>),
    inp: &GruBackwardInputs<'_>,
    out: GruBackwardOutputs<'_>,
) -> Result<()> {
    let operands = (&*out.dgates, inp.x, inp.w_ih);
    input_gradients(&d, sum, operands, (out.dw_ih, out.dx))?;
    hidden_weight_gradient(&d, sum, out.dhidden, (inp.h0, inp.y), out.dw_hh)?;
    sum_to_shape(out.dgates, out.db_ih)?;
    sum_to_shape(out.dhidden, out.db_hh)
}

#[cfg(test)]
mod tests;
