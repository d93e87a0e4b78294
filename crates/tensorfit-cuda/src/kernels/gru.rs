//! The GRU launchers, `gru_forward` and `gru_backward`: a whole layer over a whole
//! sequence per call, step for step like the CPU reference
//! (`tensorfit-cpu/src/kernels/gru/mod.rs`), which is what they are tested against:
//! - **forward**: one cuBLAS GEMM projects the input of *all* steps,
//!   `gates[T·B, 3H] = x · w_ihᵀ` (one per chunk of `GruDims::gate_steps` steps when
//!   nothing is kept for the backward: the op then holds only that many steps of `gates`
//!   and `hidden`); then per step `t` one GEMM forms the recurrent
//!   projection `hidden[t] = h_{t-1} · w_hhᵀ`, and one fused kernel, `gru_forward_cell`,
//!   adds both biases, applies the nonlinearities and writes h_t.
//! - **backward**: per step, from `t = T-1` down to 0, one fused kernel,
//!   `gru_backward_cell`, forms `dgates[t]`, `dhidden[t]` and `dh = dh_total·z`, and one
//!   GEMM adds the rest of the gradient at `h_{t-1}`: `dh += dhidden[t] · w_hh`. Then each
//!   weight gradient is one GEMM over all `T·B` rows, and each bias gradient a column sum.
//!
//! On token input the input projection is the gather of `w_ih`'s columns and `dw_ih`
//! their scatter-add, as the LSTM's (`recurrent.rs`).
//!
//! With `lengths` the fused kernels skip the rows past their end (see
//! `tensorfit_core::seq_lengths`) and `h_n` is gathered at each row's own last step.
//!
//! Nothing crosses to the host inside the time loops; the running gradient lives in the
//! op's own output `dh0`.

use tensorfit_core::{args, GruDims, RecurrentDims, Result};

use super::gather::steps_at_lengths;
use super::recurrent::{
    backward_steps, forward_steps, weight_gradients, zero_gradients, CellKernel, ForwardLoop,
};
use super::Gpu;
use super::{GATHER_STEPS, GRU_BACKWARD_CELL, GRU_FORWARD_CELL};
use crate::driver::DevPtr;

/// The op's tensors by name (see `tensorfit_core::args`), as device addresses.
type GruForwardInputs = args::GruForwardInputs<DevPtr>;
type GruForwardOutputs = args::GruForwardOutputs<DevPtr>;
type GruBackwardInputs = args::GruBackwardInputs<DevPtr>;
type GruBackwardOutputs = args::GruBackwardOutputs<DevPtr>;

/// Runs a GRU layer over a sequence (see the module documentation for the structure);
/// with `keep_for_backward` false, `gates` and `hidden` hold `d.gate_steps(false)` steps.
pub fn gru_forward(
    g: &Gpu<'_>,
    d: GruDims,
    keep_for_backward: bool,
    inp: &GruForwardInputs,
    out: &GruForwardOutputs,
) -> Result<()> {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let (step_h, step_g) = (d.step_state(), d.step_gates());
    if d.is_empty() {
        return g.copy(out.h_n, inp.h0, step_h);
    }
    // Steps of gates and projections held: all when kept for the backward, else a few in
    // turn.
    let held = d.gate_steps(keep_for_backward);

    let cell = CellKernel::new(g, GRU_FORWARD_CELL, &d, inp.lengths)?;
    // Per step the recurrent GEMM writes `hidden[t]` (`recurrent.rs`), then the fused
    // kernel below.
    let inputs = [inp.x, inp.w_ih, inp.w_hh, inp.h0];
    let frame = ForwardLoop::new(inputs, [out.y, out.gates], held, (out.hidden, false));
    forward_steps(g, &d, &frame, |t, slot, h_prev| {
        let (gates, hidden_t) = (out.gates.add(slot * step_g), out.hidden.add(slot * step_g));
        let y = out.y.add(t * step_h);
        cell.launch(g, t, &[gates, hidden_t, inp.b_ih, inp.b_hh, h_prev, y])
    })?;

    // 3. The final state: with lengths, each row's at its own last step (h0 for an
    // empty sequence).
    match inp.lengths {
        Some(l) => {
            g.copy(out.h_n, inp.h0, step_h)?;
            let dims = (steps - 1, steps, batch, hidden);
            steps_at_lengths(g, GATHER_STEPS, [l, out.y, out.h_n], dims)
        }
        None => g.copy(out.h_n, out.y.add((steps - 1) * step_h), step_h),
    }
}

/// The gradient of [`gru_forward`]; see the module documentation.
pub fn gru_backward(
    g: &Gpu<'_>,
    d: GruDims,
    inp: &GruBackwardInputs,
    out: &GruBackwardOutputs,
) -> Result<()> {
    let (input, hidden) = (d.input, d.hidden);
    let (rows, h3, step_h, step_g) = (d.rows(), d.gate_width(), d.step_state(), d.step_gates());

    // dh0 holds the running gradient: on entry to step t, the one arriving at h_t.
    let dh = out.dh0;
    g.copy(dh, inp.dh_n, step_h)?;
    if d.is_empty() {
        let (w_ih, w_hh) = ((out.dw_ih, h3 * input), (out.dw_hh, h3 * hidden));
        let grads = [w_ih, w_hh, (out.db_ih, h3), (out.db_hh, h3)];
        return zero_gradients(g, &grads, out.dx.map(|dx| (dx, rows * input)));
    }
    // 1. Backwards through time: one fused kernel and one GEMM per step.
    let cell = CellKernel::new(g, GRU_BACKWARD_CELL, &d, inp.lengths)?;
    // dh += dhidden[t] · w_hh after each step's kernel: the rest of the gradient arriving
    // at h_{t-1}.
    backward_steps(g, &d, (out.dhidden, inp.w_hh, dh), 1.0, |t| {
        let h_prev = match t {
            0 => inp.h0,
            _ => inp.y.add((t - 1) * step_h),
        };
        let (gates, hidden_t) = (inp.gates.add(t * step_g), inp.hidden.add(t * step_g));
        let (dgates, dhidden) = (out.dgates.add(t * step_g), out.dhidden.add(t * step_g));
        let dy = inp.dy.add(t * step_h);
        cell.launch(g, t, &[gates, hidden_t, h_prev, dy, dh, dgates, dhidden])
    })?;

    // 2. Weight gradients over all steps at once (`recurrent.rs`): dw_ih and dx from
    // dgates, dw_hh from dhidden, the bias gradients their column sums.
    let forward = [inp.x, inp.w_ih, inp.h0, inp.y];
    let grads = (out.dw_ih, out.dw_hh, out.dx);
    let biases = [(out.dgates, out.db_ih), (out.dhidden, out.db_hh)];
    weight_gradients(g, &d, forward, (out.dgates, out.dhidden), grads, &biases)
}
