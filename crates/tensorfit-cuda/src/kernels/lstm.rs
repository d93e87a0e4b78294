//! The LSTM launchers, `lstm_forward` and `lstm_backward`: a whole layer over a whole
//! sequence per call, organised the way cuDNN organises it, step for step like the CPU
//! reference (`tensorfit-cpu/src/kernels/lstm/mod.rs`), which is what they are tested against:
//! - **forward**: one cuBLAS GEMM projects the input of *all* steps,
//!   `gates[T·B, 4H] = x[T·B, I] · w_ihᵀ` (one per chunk of `LstmDims::gate_steps` steps
//!   when the gates are not kept for the backward: the op then holds only that many); then per step `t` one GEMM accumulates the
//!   recurrent term, `gates[t] += h_{t-1} · w_hhᵀ` (beta = 1), and one fused kernel,
//!   `lstm_forward_cell`, adds both biases, applies the nonlinearities in place and updates
//!   the cell and hidden state. (The CPU adds the biases to every row after the projection;
//!   folding them into the fused pass saves a pass over the whole sequence.)
//! - **backward**: per step, from `t = T-1` down to 0, one fused kernel,
//!   `lstm_backward_cell`, turns the gradients at `h_t` and `c_t` into `dgates[t]`, and one
//!   GEMM carries the gradient to `h_{t-1}`: `dh = dgates[t] · w_hh`. Then each weight
//!   gradient is one GEMM over all `T·B` rows, and the bias gradient one column sum.
//!
//! Nothing crosses to the host inside the time loops: every step's state stays on the
//! device, and the launches are queued on one stream. The running state lives in the op's
//! own outputs (`c_n` forward when cells are not kept; `dh0` and `dc0` backward), so the
//! layer needs no workspace of its own.

use tensorfit_core::{args, LstmDims, RecurrentDims, Result};

use super::gather::steps_at_lengths;
use super::recurrent::{
    backward_steps, forward_steps, weight_gradients, zero_gradients, CellKernel, ForwardLoop,
};
use super::Gpu;
use super::{GATHER_STEPS, LSTM_BACKWARD_CELL, LSTM_FORWARD_CELL};
use crate::driver::DevPtr;

/// The op's tensors by name (see `tensorfit_core::args`), as device addresses.
type LstmForwardInputs = args::LstmForwardInputs<DevPtr>;
type LstmForwardOutputs = args::LstmForwardOutputs<DevPtr>;
type LstmBackwardInputs = args::LstmBackwardInputs<DevPtr>;
type LstmBackwardOutputs = args::LstmBackwardOutputs<DevPtr>;

/// Runs an LSTM layer over a sequence (see the module documentation for the structure).
pub fn lstm_forward(
    g: &Gpu<'_>,
    d: LstmDims,
    inp: &LstmForwardInputs,
    out: &LstmForwardOutputs,
) -> Result<()> {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let (step_h, step_g) = (d.step_state(), d.step_gates());
    if d.is_empty() {
        g.copy(out.h_n, inp.h0, step_h)?;
        return g.copy(out.c_n, inp.c0, step_h);
    }
    // Steps of gates held: all when kept for the backward, else a few in turn.
    let chunk = d.gate_steps(out.cells.is_some());

    let cell = CellKernel::new(g, LSTM_FORWARD_CELL, &d, inp.lengths)?;
    // Per step the recurrent GEMM adds to the gates (`recurrent.rs`), then the fused
    // kernel below.
    let inputs = [inp.x, inp.w_ih, inp.w_hh, inp.h0];
    let frame = ForwardLoop::new(inputs, [out.y, out.gates], chunk, (out.gates, true));
    forward_steps(g, &d, &frame, |t, slot, _| {
        // The cell state: c_{t-1} in, c_t out; the same slot (c_n) when cells are not kept.
        let (c_prev, c_t) = match out.cells {
            Some(cells) => (
                if t == 0 {
                    inp.c0
                } else {
                    cells.add((t - 1) * step_h)
                },
                cells.add(t * step_h),
            ),
            None => (if t == 0 { inp.c0 } else { out.c_n }, out.c_n),
        };
        let gates = out.gates.add(slot * step_g);
        let y = out.y.add(t * step_h);
        cell.launch(g, t, &[gates, inp.b_ih, inp.b_hh, c_prev, c_t, y])
    })?;

    // 3. The final state: with lengths, each row's at its own last step (h0 for an
    // empty sequence); the cells carried past the end already hold c_n.
    let last = (steps - 1) * step_h;
    match inp.lengths {
        Some(l) => {
            g.copy(out.h_n, inp.h0, step_h)?;
            let dims = (steps - 1, steps, batch, hidden);
            steps_at_lengths(g, GATHER_STEPS, [l, out.y, out.h_n], dims)?;
        }
        None => g.copy(out.h_n, out.y.add(last), step_h)?,
    }
    if let Some(cells) = out.cells {
        g.copy(out.c_n, cells.add(last), step_h)?;
    }
    Ok(())
}

/// The gradient of [`lstm_forward`] (with its cells kept); see the module documentation.
pub fn lstm_backward(
    g: &Gpu<'_>,
    d: LstmDims,
    inp: &LstmBackwardInputs,
    out: &LstmBackwardOutputs,
) -> Result<()> {
    let (input, hidden) = (d.input, d.hidden);
    let (rows, step_h, step_g) = (d.rows(), d.step_state(), d.step_gates());
    let h4 = d.gate_width();

    // dh0 and dc0 hold the running gradients: on entry to step t, those arriving at h_t
    // and c_t from step t+1 (or from h_n and c_n).
    let (dh, dc) = (out.dh0, out.dc0);
    g.copy(dh, inp.dh_n, step_h)?;
    g.copy(dc, inp.dc_n, step_h)?;
    if d.is_empty() {
        let (w_ih, w_hh) = ((out.dw_ih, h4 * input), (out.dw_hh, h4 * hidden));
        let grads = [w_ih, w_hh, (out.db, h4)];
        return zero_gradients(g, &grads, out.dx.map(|dx| (dx, rows * input)));
    }
    // 1. Backwards through time: one fused kernel and one GEMM per step.
    let cell = CellKernel::new(g, LSTM_BACKWARD_CELL, &d, inp.lengths)?;
    // With lengths the GEMM adds to the dh that padded rows carry (see the kernel).
    let beta = if inp.lengths.is_some() { 1.0 } else { 0.0 };
    // dh = dgates[t] · w_hh after each step's kernel: the gradient arriving at h_{t-1}.
    backward_steps(g, &d, (out.dgates, inp.w_hh, dh), beta, |t| {
        let c_prev = if t == 0 {
            inp.c0
        } else {
            inp.cells.add((t - 1) * step_h)
        };
        let (gates, dgates) = (inp.gates.add(t * step_g), out.dgates.add(t * step_g));
        let (c_t, dy) = (inp.cells.add(t * step_h), inp.dy.add(t * step_h));
        cell.launch(g, t, &[gates, c_t, c_prev, dy, dh, dc, dgates])
    })?;

    // 2. Weight gradients over all steps at once (`recurrent.rs`): dw_ih = dgatesᵀ · x
    // and dx = dgates · w_ih (on token input, the scatter-add of dgates into the columns
    // of the ids), dw_hh = Σ_t dgates[t]ᵀ · h_{t-1}, db = column sums of dgates (the
    // gradient of b_ih and of b_hh alike).
    let forward = [inp.x, inp.w_ih, inp.h0, inp.y];
    let grads = (out.dw_ih, out.dw_hh, out.dx);
    let biases = [(out.dgates, out.db)];
    weight_gradients(g, &d, forward, (out.dgates, out.dgates), grads, &biases)
}
