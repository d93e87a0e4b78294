//! The GRU kernels, `gru_forward` and `gru_backward`: a whole layer over a whole sequence
//! per op, organised exactly as tensorfit-cpu's kernels/gru/mod.rs, with the fused
//! per-step passes in shaders/gru.wgsl:
//! - **forward**: the input projection of all steps is one GEMM,
//!   `gates[T·B, 3H] = x · w_ihᵀ`; then per step `t`, one GEMM forms the recurrent
//!   projection, `hidden[t] = h_{t-1} · w_hhᵀ`, and one `gru_forward_cell` launch adds both
//!   biases, applies the nonlinearities and writes h_t;
//! - **backward**: per step, from `t = T-1` down to 0, one `gru_backward_cell` launch
//!   forms `dgates[t]` and `dhidden[t]` and leaves `dh = dh_total·z`, and one GEMM adds
//!   the rest of the hidden gradient, `dh += dhidden[t] · w_hh`; the weight gradients are
//!   GEMMs over all `T·B` rows after the loop, and the bias gradients column sums.
//!
//! All of it is recorded into one command stream. A step's fused pass is cut into blocks
//! of batch rows only when a step is larger than one binding holds.

use std::ops::Range;

use tensorfit_core::{args, GruDims, Result};

use super::elementwise::{copy_range, fill, sum_rows};
use super::gemm::{gemm, Mat};
use super::lstm::check_lengths;
use super::{word, Launches};
use crate::shaders::{GRU_BACKWARD_CELL, GRU_FORWARD_CELL};
use crate::window::{row_chunks, Operand, Region};

/// The op's tensors by name (see `tensorfit_core::args`), as regions of buffers.
type ForwardInputs = args::GruForwardInputs<Region>;
type ForwardOutputs = args::GruForwardOutputs<Region>;
type BackwardInputs = args::GruBackwardInputs<Region>;
type BackwardOutputs = args::GruBackwardOutputs<Region>;

/// What one launch of a fused pass covers, batch rows `rows` of step `t`, as element
/// ranges (region-relative) of each kind of tensor.
struct StepBlock {
    /// Of a `[B, H]` state (h0, dh0).
    state: Range<usize>,
    /// Of a `[T, B, H]` sequence (y, dy) at step `t`.
    seq: Range<usize>,
    /// Where h_{t-1} of these rows is: `h0` at `state` for step 0, else `y` at step t-1.
    prev: (Region, Range<usize>),
    /// Of the `[T, B, 3H]` gates (hidden, dgates, dhidden) at step `t`.
    gates: Range<usize>,
}

impl StepBlock {
    fn new(d: GruDims, t: usize, rows: &Range<usize>, h0: Region, y: Region) -> Self {
        let h = d.hidden;
        let state = rows.start * h..rows.end * h;
        let at_step = |t: usize| {
            let step = t * d.step_state();
            step + state.start..step + state.end
        };
        let first_row = t * d.batch + rows.start;
        let prev = match t {
            0 => (h0, state.clone()),
            _ => (y, at_step(t - 1)),
        };
        StepBlock {
            seq: at_step(t),
            prev,
            gates: first_row * 3 * h..(first_row + rows.len()) * 3 * h,
            state,
        }
    }
}

/// Runs a GRU layer over a sequence (see the module documentation).
pub(crate) fn gru_forward(
    l: &mut Launches,
    d: GruDims,
    inp: &ForwardInputs,
    out: &ForwardOutputs,
) -> Result<()> {
    const K: &str = "gru_forward";
    check_lengths(K, inp.expected(d))?;
    check_lengths(K, out.expected(d))?;
    let (steps, batch, input, hidden) = (d.steps, d.batch, d.input, d.hidden);
    let (rows, h3, step_h) = (d.rows(), d.gate_width(), d.step_state());
    if d.is_empty() {
        copy_range(l, inp.h0, 0, out.h_n);
        return Ok(());
    }
    let blocks = row_chunks(batch, h3, l.span(), K)?;
    let w_hh = Mat::new(inp.w_hh, h3, hidden);
    let recurrent = Mat::new(out.hidden, rows, h3);

    // 1. The input projection of every step at once (the biases join in the fused pass).
    let x = Mat::new(inp.x, rows, input);
    let w_ih = Mat::new(inp.w_ih, h3, input);
    gemm(
        l,
        (x, false),
        (w_ih, true),
        Mat::new(out.gates, rows, h3),
        false,
    )?;

    // 2. The recurrence: one GEMM and one fused pass per step.
    for t in 0..steps {
        let h_prev = if t == 0 {
            Mat::new(inp.h0, batch, hidden)
        } else {
            Mat::new(out.y, rows, hidden).rows((t - 1) * batch, batch)
        };
        let hidden_t = recurrent.rows(t * batch, batch);
        gemm(l, (h_prev, false), (w_hh, true), hidden_t, false)?;
        for b in &blocks {
            let at = StepBlock::new(d, t, b, inp.h0, out.y);
            let (prev, prev_at) = at.prev;
            let values = vec![
                word(b.len()),
                word(hidden),
                word(at.gates.start),
                word(prev_at.start),
                word(at.seq.start),
            ];
            let ops = vec![
                Operand::part(out.gates, at.gates.clone()),
                Operand::part(out.hidden, at.gates),
                Operand::part(prev, prev_at),
                Operand::part(out.y, at.seq),
                Operand::whole(inp.b_ih),
                Operand::whole(inp.b_hh),
            ];
            l.push(&GRU_FORWARD_CELL, ops, values, b.len() * hidden);
        }
    }

    // 3. The final state.
    copy_range(l, out.y, (steps - 1) * step_h, out.h_n);
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
    let (steps, batch, input, hidden) = (d.steps, d.batch, d.input, d.hidden);
    let (rows, h3) = (d.rows(), d.gate_width());

    // dh0 holds the running gradient: on entry to step t, the one arriving at h_t.
    copy_range(l, inp.dh_n, 0, out.dh0);
    if d.is_empty() {
        // Nothing flows through the layer: the weights get no gradient.
        for g in [out.dw_ih, out.dw_hh, out.db_ih, out.db_hh] {
            fill(l, 0.0, g);
        }
        if let Some(dx) = out.dx {
            fill(l, 0.0, dx);
        }
        return Ok(());
    }
    let blocks = row_chunks(batch, h3, l.span(), K)?;
    let dgates = Mat::new(out.dgates, rows, h3);
    let dhidden = Mat::new(out.dhidden, rows, h3);
    let w_hh = Mat::new(inp.w_hh, h3, hidden);
    let dh = Mat::new(out.dh0, batch, hidden);

    // 1. Backwards through time: one fused pass and one GEMM per step.
    for t in (0..steps).rev() {
        for b in &blocks {
            let at = StepBlock::new(d, t, b, inp.h0, inp.y);
            let (prev, prev_at) = at.prev;
            let values = vec![
                word(b.len()),
                word(hidden),
                word(at.gates.start),
                word(prev_at.start),
                word(at.seq.start),
                word(at.state.start),
            ];
            let ops = vec![
                Operand::part(inp.gates, at.gates.clone()),
                Operand::part(inp.hidden, at.gates.clone()),
                Operand::part(prev, prev_at),
                Operand::part(inp.dy, at.seq),
                Operand::part(out.dh0, at.state),
                Operand::part(out.dgates, at.gates.clone()),
                Operand::part(out.dhidden, at.gates),
            ];
            l.push(&GRU_BACKWARD_CELL, ops, values, b.len() * hidden);
        }
        // dh += dhidden[t] · w_hh: the rest of the gradient arriving at h_{t-1}.
        let dhidden_t = dhidden.rows(t * batch, batch);
        gemm(l, (dhidden_t, false), (w_hh, false), dh, true)?;
    }

    // 2. Weight gradients over all steps at once.
    let x = Mat::new(inp.x, rows, input);
    gemm(
        l,
        (dgates, true),
        (x, false),
        Mat::new(out.dw_ih, h3, input),
        false,
    )?;
    // dw_hh = Σ_t dhidden[t]ᵀ · h_{t-1}: step 0 against h0, steps 1.. against y[0..T-1].
    let dw_hh = Mat::new(out.dw_hh, h3, hidden);
    let h0 = Mat::new(inp.h0, batch, hidden);
    gemm(l, (dhidden.rows(0, batch), true), (h0, false), dw_hh, false)?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let h_prev = Mat::new(inp.y, rows, hidden).rows(0, later);
        gemm(
            l,
            (dhidden.rows(batch, later), true),
            (h_prev, false),
            dw_hh,
            true,
        )?;
    }
    sum_rows(l, out.dgates, rows, h3, out.db_ih, 1.0);
    sum_rows(l, out.dhidden, rows, h3, out.db_hh, 1.0);
    // dx = dgates · w_ih over all T·B rows.
    if let Some(dx) = out.dx {
        let w_ih = Mat::new(inp.w_ih, h3, input);
        gemm(
            l,
            (dgates, false),
            (w_ih, false),
            Mat::new(dx, rows, input),
            false,
        )?;
    }
    Ok(())
}
