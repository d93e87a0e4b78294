//! The GRU kernels, `gru_forward` and `gru_backward`: a whole layer over a whole sequence
//! per op, organised exactly as tensorfit-cpu's kernels/gru/mod.rs, with the fused
//! per-step passes in shaders/gru.wgsl:
//! - **forward**: the input projection of all steps is one GEMM,
//!   `gates[T·B, 3H] = x · w_ihᵀ` (one per chunk of `GruDims::gate_steps` steps when
//!   nothing is kept for the backward: the op then holds only that many steps of `gates`
//!   and `hidden`); then per step `t`, one GEMM forms the recurrent
//!   projection, `hidden[t] = h_{t-1} · w_hhᵀ`, and one `gru_forward_cell` launch adds both
//!   biases, applies the nonlinearities and writes h_t;
//! - **backward**: per step, from `t = T-1` down to 0, one `gru_backward_cell` launch
//!   forms `dgates[t]` and `dhidden[t]` and leaves `dh = dh_total·z`, and one GEMM adds
//!   the rest of the hidden gradient, `dh += dhidden[t] · w_hh`; the weight gradients are
//!   GEMMs over all `T·B` rows after the loop, and the bias gradients column sums.
//!
//! On token input the input projection is the gather of `w_ih`'s columns and `dw_ih`
//! their scatter-add, as the LSTM's (`recurrent.rs`).
//!
//! With `lengths` the fused passes skip the rows past their end (as the LSTM's, see
//! `tensorfit_core::seq_lengths`), and the forward's writes each row's `h_n` at its own
//! last step.
//!
//! All of it is recorded into one command stream. A step's fused pass is cut into blocks
//! of batch rows only when a step is larger than one binding holds.

use std::ops::Range;

use tensorfit_core::{args, GruDims, RecurrentDims, Result};

use super::elementwise::copy_range;
use super::recurrent::{
    backward_steps, check_lengths, forward_steps, weight_gradients, zero_gradients, ForwardLoop,
    StepBlock,
};
use super::Launches;
use crate::shaders::{GRU_BACKWARD_CELL, GRU_FORWARD_CELL};
use crate::window::{Operand, Region};

/// The op's tensors by name (see `tensorfit_core::args`), as regions of buffers.
type ForwardInputs = args::GruForwardInputs<Region>;
type ForwardOutputs = args::GruForwardOutputs<Region>;
type BackwardInputs = args::GruBackwardInputs<Region>;
type BackwardOutputs = args::GruBackwardOutputs<Region>;

/// Where h_{t-1} of block `at` of step `t` is: `h0` for step 0, else `y` at step t-1.
fn previous(t: usize, at: &StepBlock, h0: Region, y: Region) -> (Region, Range<usize>) {
    match t {
        0 => (h0, at.state.clone()),
        _ => (y, at.prev_seq.clone()),
    }
}

/// Runs a GRU layer over a sequence (see the module documentation); with
/// `keep_for_backward` false, `gates` and `hidden` hold `d.gate_steps(false)` steps.
pub(crate) fn gru_forward(
    l: &mut Launches,
    d: GruDims,
    keep_for_backward: bool,
    inp: &ForwardInputs,
    out: &ForwardOutputs,
) -> Result<()> {
    const K: &str = "gru_forward";
    check_lengths(K, inp.expected(d))?;
    check_lengths(K, out.expected(d, keep_for_backward))?;
    let (steps, step_h) = (d.steps, d.step_state());
    // Without steps, and with lengths for an empty sequence, h_n is h0.
    if d.is_empty() || inp.lengths.is_some() {
        copy_range(l, inp.h0, 0, out.h_n);
    }
    if d.is_empty() {
        return Ok(());
    }
    // Steps of gates and projections held: all when kept for the backward, else a few in
    // turn. Per step the recurrent GEMM writes `hidden[t]` (`recurrent.rs`), then the
    // fused pass below.
    let inputs = [inp.x, inp.w_ih, inp.w_hh, inp.h0];
    let frame = ForwardLoop::new(
        inputs,
        [out.y, out.gates],
        d.gate_steps(keep_for_backward),
        (out.hidden, false),
    );
    forward_steps(l, (K, &d), &frame, |l, (t, slot), b| {
        let at = StepBlock::new(&d, (t, slot), b, inp.lengths);
        let (prev, prev_at) = previous(t, &at, inp.h0, out.y);
        let own = [prev_at.start, at.seq.start];
        let ops = vec![
            Operand::part(out.gates, at.gates.clone()),
            Operand::part(out.hidden, at.gates.clone()),
            Operand::part(prev, prev_at),
            Operand::part(out.y, at.seq.clone()),
            Operand::whole(inp.b_ih),
            Operand::whole(inp.b_hh),
            at.lengths(inp.b_ih),
            Operand::part(out.h_n, at.state.clone()),
        ];
        at.push_forward(l, &GRU_FORWARD_CELL, ops, &own);
    })?;

    // 3. The final state (with lengths, written by each row's last step already).
    if inp.lengths.is_none() {
        copy_range(l, out.y, (steps - 1) * step_h, out.h_n);
    }
    Ok(())
}

/// The gradient of [`gru_forward`]; see the module documentation.
pub(crate) fn gru_backward(
    l: &mut Launches,
    d: GruDims,
    inp: &BackwardInputs,
    out: &BackwardOutputs,
) -> Result<()> {
    const K: &str = "gru_backward";
    check_lengths(K, inp.expected(d))?;
    check_lengths(K, out.expected(d))?;

    // dh0 holds the running gradient: on entry to step t, the one arriving at h_t.
    copy_range(l, inp.dh_n, 0, out.dh0);
    if d.is_empty() {
        let grads = [out.dw_ih, out.dw_hh, out.db_ih, out.db_hh];
        zero_gradients(l, &grads, out.dx);
        return Ok(());
    }
    // 1. Backwards through time: one fused pass and one GEMM per step, dh += dhidden[t] ·
    // w_hh, the rest of the gradient arriving at h_{t-1}.
    let carry = (out.dhidden, inp.w_hh, out.dh0);
    backward_steps(l, (K, &d), carry, true, |l, t, b| {
        let at = StepBlock::new(&d, (t, t), b, inp.lengths);
        let (prev, prev_at) = previous(t, &at, inp.h0, inp.y);
        let own = [prev_at.start, at.seq.start, at.state.start];
        let ops = vec![
            Operand::part(inp.gates, at.gates.clone()),
            Operand::part(inp.hidden, at.gates.clone()),
            Operand::part(prev, prev_at),
            Operand::part(inp.dy, at.seq.clone()),
            Operand::part(out.dh0, at.state.clone()),
            Operand::part(out.dgates, at.gates.clone()),
            Operand::part(out.dhidden, at.gates.clone()),
            at.lengths(inp.gates),
        ];
        at.push_backward(l, &GRU_BACKWARD_CELL, ops, &own);
    })?;

    // 2. Weight gradients over all steps at once (`recurrent.rs`): dw_ih and dx from
    // dgates, dw_hh from dhidden, the bias gradients their column sums.
    let forward = [inp.x, inp.w_ih, inp.h0, inp.y];
    let grads = (out.dw_ih, out.dw_hh, out.dx);
    let biases = [(out.dgates, out.db_ih), (out.dhidden, out.db_hh)];
    weight_gradients(l, &d, forward, (out.dgates, out.dhidden), grads, &biases)
}
