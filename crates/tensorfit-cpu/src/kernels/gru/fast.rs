//! The AVX-512 fast path of the GRU kernels, beside the reference in `mod.rs` (which it
//! is tested against, in `tests.rs`) and chosen by `gru::gru_forward`/`gru_backward` when
//! the CPU has AVX-512 (`gemm_fast::simd`).
//!
//! It computes what the reference computes, with the same structure, and the schedule of
//! the LSTM's fast path (`lstm/fast.rs`):
//! - each thread projects the inputs of its own rows with the packed micro-kernels of
//!   `gemm_fast/` (`w_ihᵀ` packed once per call; on token input a copy of one row of a
//!   table of `w_ihᵀ + b_ih`, `recurrent::fast::Projection`), all steps up front when the
//!   gates are kept for the backward, else the held steps at a time as they are reached;
//! - the time loop runs on every thread at once, each over its own batch rows for all
//!   steps (rows of a GRU never exchange data), so there is no barrier per step: per
//!   step one serial packed GEMM (`w_hhᵀ` forward, `w_hh` backward, packed once per call)
//!   and one fused pass, compiled for AVX-512 inside `gemm_fast::vectorize` with fused
//!   multiply-adds; with lengths, the GEMM multiplies only the rows inside their
//!   sequence (`recurrent::fast::LiveRows`) and the weight gradients sum over those
//!   rows only (`recurrent::SumOver`).
//!
//! Nothing is allocated inside the time loops.

use tensorfit_core::{GruDims, RecurrentDims};

use super::{
    cell_backward, cell_forward, GruBackwardInputs, GruBackwardOutputs, GruForwardInputs,
    GruForwardOutputs, StepSaved,
};
use crate::kernels::fastmath::Fused;
use crate::kernels::gemm_fast::{vectorize, MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{self, Pass};
use crate::kernels::recurrent::fast::{
    rows_per_part, split_steps, LiveRows, PartRows, Projection, Written,
};

/// The forward pass, for a layer that is not empty, holding `held` steps of `gates` and
/// `hidden` (step `t` in slot `t % held`; the lengths have been checked by
/// `gru::forward_on`); by columns where the batch is too small to split by rows
/// (`gru/columns.rs`).
pub(super) fn forward(
    token: Token,
    d: GruDims,
    (held, keep_for_backward): (usize, bool),
    inp: &GruForwardInputs<'_>,
    out: &mut GruForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) {
    // Too few rows to split: by columns (with threads to run the shares on; see
    // `recurrent/columns.rs`).
    let pass = Pass::forward(keep_for_backward);
    if let Some(shares) = columns::shares_here((d.steps, d.batch), (d.hidden, 3), pass) {
        let columns = (inp, packs, keep_for_backward);
        return super::columns::forward(token, d, columns, out, shares);
    }
    forward_rows(token, d, held, inp, out, packs);
}

/// [`forward`] by rows: each thread over its own batch rows for the whole sequence.
pub(super) fn forward_rows(
    token: Token,
    d: GruDims,
    held: usize,
    inp: &GruForwardInputs<'_>,
    out: &mut GruForwardOutputs<'_>,
    packs: &mut Packer<'_>,
) {
    let (steps, batch, hidden, x_row) = (d.steps, d.batch, d.hidden, d.x_row());
    let (h3, step_h, step_g) = (d.gate_width(), d.step_state(), d.step_gates());
    let projection = Projection::new(&d, (inp.w_ih, &mut *packs), inp.b_ih.to_vec());
    let w_hh_t = packs.pack("w_hh", MatRef::row_major(inp.w_hh, h3, hidden).t());

    // Each thread over its own batch rows for the whole sequence: per run of `held`
    // steps the input projection with b_ih, then per step the recurrence.
    let part = rows_per_part((steps, batch), hidden);
    let gate_parts = split_steps(out.gates, step_g, part * h3);
    let hidden_parts = split_steps(out.hidden, step_g, part * h3);
    let y_parts = split_steps(out.y, step_h, part * hidden);
    let work: Vec<_> = gate_parts
        .into_iter()
        .zip(hidden_parts)
        .zip(y_parts)
        .enumerate()
        .collect();
    crate::threads::for_each(work, |(p, ((mut g, mut hh), mut ys))| {
        let m = ys[0].len() / hidden;
        let own = PartRows::new(batch, (p, part), m, inp.lengths);
        let (h0, lengths) = (&inp.h0[own.at(hidden, 0)], own.lengths);
        // The rows inside their sequence at each step: a row past its end is not
        // multiplied (its projections are overwritten with zeros).
        let mut live = LiveRows::new(lengths, m, (hidden, h3));
        let mut live_x = LiveRows::new(lengths, m, (x_row, h3));
        vectorize(
            Some(token),
            #[inline(always)]
            || {
                for t in 0..steps {
                    let slot = t % held;
                    if slot == 0 {
                        for u in t..steps.min(t + held) {
                            let x_u = &inp.x[own.at(x_row, u)];
                            let rows = (x_u, m, &mut *g[u - t]);
                            projection.project_live(token, rows, &mut live_x, (u, lengths));
                        }
                    }
                    let (y_before, y_from_t) = ys.split_at_mut(t);
                    let h_prev: &[f32] = if t == 0 { h0 } else { y_before[t - 1] };
                    // hidden[t] = h_{t-1} · w_hhᵀ + b_hh
                    let hh_t = &mut *hh[slot];
                    let into = Written::Biased(inp.b_hh);
                    live.gemm(token, &w_hh_t, (h_prev, hh_t), (t, lengths), into);
                    let rows = (t, lengths);
                    cell_forward::<Fused>(g[slot], hh_t, h_prev, y_from_t[0], hidden, rows);
                }
            },
        )
    });
}

/// The backward pass through time, for a layer that is not empty: fills `dgates`,
/// `dhidden` and `dh0` (the lengths have been checked by `gru::backward_on`); by columns
/// where the batch is too small to split by rows (the forward's schedule,
/// `gru/columns_backward.rs`).
pub(super) fn backward(
    token: Token,
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    out: &mut GruBackwardOutputs<'_>,
) {
    let layer = (d.hidden, 3);
    match columns::shares_here((d.steps, d.batch), layer, Pass::Training) {
        Some(shares) => super::columns_backward::backward(token, d, inp, out, shares),
        None => backward_rows(token, d, inp, out),
    }
}

/// [`backward`] by rows: each thread over its own batch rows for the whole sequence.
pub(super) fn backward_rows(
    token: Token,
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    out: &mut GruBackwardOutputs<'_>,
) {
    let (steps, batch, hidden, h3) = (d.steps, d.batch, d.hidden, d.gate_width());
    let step_g = d.step_gates();
    let w_hh = PackedB::new(MatRef::row_major(inp.w_hh, h3, hidden));
    let part = rows_per_part((steps, batch), hidden);
    let dgate_parts = split_steps(out.dgates, step_g, part * h3);
    let dhidden_parts = split_steps(out.dhidden, step_g, part * h3);
    let work: Vec<_> = dgate_parts
        .into_iter()
        .zip(dhidden_parts)
        .zip(out.dh0.chunks_mut(part * hidden))
        .enumerate()
        .collect();
    crate::threads::for_each(work, |(p, ((mut dg, mut dhh), dh))| {
        let m = dh.len() / hidden;
        let own = PartRows::new(batch, (p, part), m, inp.lengths);
        let mut live = LiveRows::new(own.lengths, m, (h3, hidden));
        vectorize(
            Some(token),
            #[inline(always)]
            || {
                for t in (0..steps).rev() {
                    let saved = StepSaved {
                        gates: &inp.gates[own.at(h3, t)],
                        hidden: &inp.hidden[own.at(h3, t)],
                        h_prev: own.before(hidden, t, (inp.h0, inp.y)),
                        dy: &inp.dy[own.at(hidden, t)],
                        units: hidden,
                    };
                    cell_backward(&saved, dh, dg[t], dhh[t], (t, own.lengths));
                    // dh += dhidden[t] · w_hh (a row past its end is not
                    // multiplied: its dhidden are zeros)
                    let rows = (t, own.lengths);
                    live.gemm(token, &w_hh, (dhh[t], dh), rows, Written::Added);
                }
            },
        )
    });
}
