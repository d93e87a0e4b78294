//! The LSTM kernels, `lstm_forward` and `lstm_backward`: a whole layer over a whole
//! sequence per op, organised exactly as tensorfit-cpu's kernels/lstm/mod.rs (cuDNN's
//! structure), with the fused per-step passes in shaders/lstm.wgsl:
//! - **forward**: the input projection of all steps is one GEMM,
//!   `gates[T·B, 4H] = x · w_ihᵀ` (one per chunk of `LstmDims::gate_steps` steps when the
//!   gates are not kept for the backward: the op then holds only that many); then per step `t`, one GEMM accumulates the recurrent
//!   term, `gates[t] += h_{t-1} · w_hhᵀ`, and one `lstm_forward_cell` launch adds both
//!   biases, applies the nonlinearities in place and updates the cell and hidden state;
//! - **backward**: per step, from `t = T-1` down to 0, one `lstm_backward_cell` launch
//!   forms `dgates[t]` and carries the cell gradient, and one GEMM carries the hidden
//!   gradient, `dh = dgates[t] · w_hh`; the weight gradients are GEMMs over all `T·B`
//!   rows after the loop, and the bias gradient their column sums.
//!
//! On token input (`d.tokens`) the input projection is the gather of `w_ih`'s columns
//! and `dw_ih` their scatter-add (`recurrent.rs`, shared with the GRU).
//!
//! All of it is recorded into one command stream: no step waits for the host. A step's
//! fused pass is cut into blocks of batch rows only when a step is larger than one
//! binding holds.

use tensorfit_core::{args, LstmDims, RecurrentDims, Result};

use super::elementwise::copy_range;
use super::recurrent::{
    backward_steps, check_lengths, forward_steps, weight_gradients, zero_gradients, ForwardLoop,
    StepBlock,
};
use super::Launches;
use crate::shaders::{LSTM_BACKWARD_CELL, LSTM_FORWARD_CELL};
use crate::window::{Operand, Region};

/// The op's tensors by name (see `tensorfit_core::args`), as regions of buffers.
type ForwardInputs = args::LstmForwardInputs<Region>;
type ForwardOutputs = args::LstmForwardOutputs<Region>;
type BackwardInputs = args::LstmBackwardInputs<Region>;
type BackwardOutputs = args::LstmBackwardOutputs<Region>;

/// Runs an LSTM layer over a sequence (see the module documentation).
pub(crate) fn lstm_forward(
    l: &mut Launches,
    d: LstmDims,
    inp: &ForwardInputs,
    out: &ForwardOutputs,
) -> Result<()> {
    const K: &str = "lstm_forward";
    check_lengths(K, inp.expected(d))?;
    check_lengths(K, out.expected(d))?;
    let (steps, step_h) = (d.steps, d.step_state());
    if d.is_empty() {
        copy_range(l, inp.h0, 0, out.h_n);
        copy_range(l, inp.c0, 0, out.c_n);
        return Ok(());
    }
    // With lengths, a row's h_n is written at its own last step (h0 if it has none).
    if inp.lengths.is_some() {
        copy_range(l, inp.h0, 0, out.h_n);
    }
    // Steps of gates held: all when kept for the backward, else a few in turn. Per step
    // the recurrent GEMM adds to the gates (`recurrent.rs`), then the fused pass below.
    let inputs = [inp.x, inp.w_ih, inp.w_hh, inp.h0];
    let frame = ForwardLoop::new(
        inputs,
        [out.y, out.gates],
        d.gate_steps(out.cells.is_some()),
        (out.gates, true),
    );
    forward_steps(l, (K, &d), &frame, |l, (t, slot), b| {
        let at = StepBlock::new(&d, (t, slot), b, inp.lengths);
        // Where c_{t-1} is read and c_t written: c0 then the kept cells, or the running
        // state c_n, updated in place (and c_prev unread), when the cells are not kept.
        let (c_prev, c_prev_at, prev_in_c) = match (t, out.cells) {
            (0, _) => (inp.c0, at.state.clone(), 0),
            (_, Some(cells)) => (cells, at.prev_seq.clone(), 0),
            (_, None) => (inp.c0, 0..0, 1),
        };
        let (c, c_at) = match out.cells {
            Some(cells) => (cells, at.seq.clone()),
            None => (out.c_n, at.state.clone()),
        };
        let own = [c_prev_at.start, c_at.start, at.seq.start, prev_in_c];
        let ops = vec![
            Operand::part(out.gates, at.gates.clone()),
            Operand::part(c_prev, c_prev_at),
            Operand::part(c, c_at),
            Operand::part(out.y, at.seq.clone()),
            Operand::whole(inp.b_ih),
            Operand::whole(inp.b_hh),
            at.lengths(inp.b_ih),
            Operand::part(out.h_n, at.state.clone()),
        ];
        at.push_forward(l, &LSTM_FORWARD_CELL, ops, &own);
    })?;

    // 3. The final state (with lengths, h_n is written already; the cells carried past
    // each sequence's end hold its c_n).
    let last = (steps - 1) * step_h;
    if inp.lengths.is_none() {
        copy_range(l, out.y, last, out.h_n);
    }
    if let Some(cells) = out.cells {
        copy_range(l, cells, last, out.c_n);
    }
    Ok(())
}

/// The gradient of [`lstm_forward`] (with its cells kept); see the module documentation.
pub(crate) fn lstm_backward(
    l: &mut Launches,
    d: LstmDims,
    inp: &BackwardInputs,
    out: &BackwardOutputs,
) -> Result<()> {
    const K: &str = "lstm_backward";
    check_lengths(K, inp.expected(d))?;
    check_lengths(K, out.expected(d))?;

    // dh0 and dc0 hold the running gradients: on entry to step t, those arriving at h_t
    // from step t+1 (or from h_n) and at c_t from step t+1 (or from c_n).
    copy_range(l, inp.dh_n, 0, out.dh0);
    copy_range(l, inp.dc_n, 0, out.dc0);
    if d.is_empty() {
        zero_gradients(l, &[out.dw_ih, out.dw_hh, out.db], out.dx);
        return Ok(());
    }
    // 1. Backwards through time: one fused pass and one GEMM per step, dh = dgates[t] ·
    // w_hh, the gradient arriving at h_{t-1} (with lengths, added to the dh_n that padded
    // rows carry; see the kernel).
    let carry = (out.dgates, inp.w_hh, out.dh0);
    backward_steps(l, (K, &d), carry, inp.lengths.is_some(), |l, t, b| {
        let at = StepBlock::new(&d, (t, t), b, inp.lengths);
        let (c_prev, c_prev_at) = if t == 0 {
            (inp.c0, at.state.clone())
        } else {
            (inp.cells, at.prev_seq.clone())
        };
        let own = [at.seq.start, c_prev_at.start, at.state.start];
        let ops = vec![
            Operand::part(inp.gates, at.gates.clone()),
            Operand::part(inp.cells, at.seq.clone()),
            Operand::part(c_prev, c_prev_at),
            Operand::part(inp.dy, at.seq.clone()),
            Operand::part(out.dh0, at.state.clone()),
            Operand::part(out.dc0, at.state.clone()),
            Operand::part(out.dgates, at.gates.clone()),
            at.lengths(inp.gates),
        ];
        at.push_backward(l, &LSTM_BACKWARD_CELL, ops, &own);
    })?;

    // 2. Weight gradients over all steps at once (`recurrent.rs`): dw_ih = dgatesᵀ · x
    // and dx = dgates · w_ih (on token input, the scatter-add of dgates into the columns
    // of the ids), dw_hh = Σ_t dgates[t]ᵀ · h_{t-1}, db = column sums of dgates (the
    // gradient of b_ih and of b_hh alike).
    let forward = [inp.x, inp.w_ih, inp.h0, inp.y];
    let grads = (out.dw_ih, out.dw_hh, out.dx);
    let biases = [(out.dgates, out.db)];
    weight_gradients(l, &d, forward, (out.dgates, out.dgates), grads, &biases)
}
