//! The LSTM's backward through time in the column schedule (`recurrent/columns.rs`), for
//! a batch too small to split by rows (training at a few rows, after the forward of
//! `columns.rs`): each share of the hidden units, on its own thread, carries the
//! gradients at its units' `h_t` and `c_t`, runs its units' cells backward into their
//! four blocks of `dgates_t`, and publishes them; once every share has, each forms its
//! units' gradient at `h_{t-1}`, `dgates_t · w_hh` over its columns of `w_hh` (the
//! whole `dgates_t` is every unit's sum). So the shares exchange `dgates` where the
//! forward exchanges `h`, and meet once per step.
//!
//! The same bits as the row schedule (`fast::backward`; tested below): each element of
//! `dh` is the same sum over the `4H` gate columns in the same blocks of `KC`, whatever
//! columns of `w_hh` are packed beside it, and the cells' pass is per unit.

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::LstmDims;

use super::fast::{cell_backward, StepSaved};
use super::{hold_padded_dh, LstmBackwardInputs};
use crate::kernels::gemm_fast::{gemm_packed_serial, MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{
    backward_step, gate_runs, gather_columns, put_units, run_backward_shares, split_units,
    unit_shares, write_blocks,
};
use crate::kernels::recurrent::fast::{LiveRows, Written};

/// One share's weights, running gradients, the step's saved values and outputs.
struct Share<'a> {
    units: Range<usize>,
    /// The share's runs of the layer's `4H` gate columns: its units of i, f, g and o.
    columns: [Range<usize>; 4],
    /// `w_hh`'s columns of the share's units, `[4H, w]`, packed.
    w_hh: Arc<PackedB>,
    /// `[B, w]`: the gradients arriving at the share's units of h_t and c_t.
    dh: Vec<f32>,
    dc: Vec<f32>,
    /// Step t's saved values of the share's units: `[B, 4w]` activated gates, `[B, w]`
    /// c_t, c_{t-1} and dy_t.
    gates: Vec<f32>,
    c: Vec<f32>,
    c_prev: Vec<f32>,
    dy: Vec<f32>,
    /// `[B, 4w]`: the share's gate gradients of step t.
    dgates: Vec<f32>,
    live: LiveRows,
    /// The share's units of every step's blocks of `dgates` (`T·B·4` runs: the layer's
    /// `[T, B, 4H]` as rows of `H`).
    dgates_out: Vec<&'a mut [f32]>,
}

impl Share<'_> {
    /// Step `s` of the backward (`columns::backward_step`). `next` is the whole `dgates`
    /// `[B, 4H]` of the time it multiplies first (at `s = 0`, none: `dh` is `dh_n`).
    #[inline(always)]
    fn step(
        &mut self,
        token: Token,
        (d, inp): (LstmDims, &LstmBackwardInputs<'_>),
        s: usize,
        next: &[f32],
    ) {
        let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
        let w = self.units.len();
        let lengths = RowLengths(inp.lengths);
        let (after, t) = backward_step(steps, s);
        if let Some(after) = after {
            // dh = dgates[t + 1] · w_hh over the share's units, as the row schedule forms
            // it after step t + 1 (added, with lengths, to what padded rows carry).
            match hold_padded_dh(lengths, after, &mut self.dh, w) {
                0.0 => {
                    let a = MatRef::row_major(next, batch, 4 * hidden);
                    gemm_packed_serial(token, a, &self.w_hh, 0.0, None, &mut self.dh);
                }
                _ => {
                    let into = Written::Added;
                    let (dh, rows) = (&mut self.dh, (after, lengths));
                    self.live.gemm(token, &self.w_hh, (next, dh), rows, into);
                }
            }
        }
        let Some(t) = t else {
            return;
        };
        let step = |width: usize, t: usize| t * batch * width..(t + 1) * batch * width;
        let (h4, units) = (4 * hidden, std::slice::from_ref(&self.units));
        gather_columns(&inp.gates[step(h4, t)], h4, &self.columns, &mut self.gates);
        gather_columns(&inp.cells[step(hidden, t)], hidden, units, &mut self.c);
        let c_prev = match t {
            0 => inp.c0,
            _ => &inp.cells[step(hidden, t - 1)],
        };
        gather_columns(c_prev, hidden, units, &mut self.c_prev);
        gather_columns(&inp.dy[step(hidden, t)], hidden, units, &mut self.dy);
        let saved = StepSaved {
            gates: &self.gates,
            c: &self.c,
            c_prev: &self.c_prev,
            dy: &self.dy,
            dh: &self.dh,
            hidden: w,
        };
        cell_backward(&saved, &mut self.dc, &mut self.dgates, (t, lengths));
        write_blocks(&self.dgates, w, (t, batch), &mut self.dgates_out);
    }
}

/// Backwards through time for a layer that is not empty, in `shares` shares of units
/// (`columns::shares_on_pool`): fills `dgates` `[T, B, 4H]` and turns `dh`, `dc` (the
/// gradients at h_n and c_n on entry) into those at h0 and c0, as
/// `fast::backward_rows` does.
pub(super) fn backward(
    token: Token,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    (dgates, dh, dc): (&mut [f32], &mut [f32], &mut [f32]),
    shares: usize,
) {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let units = unit_shares(hidden, shares);
    let w_hh = MatRef::row_major(inp.w_hh, 4 * hidden, hidden);
    let packs = &mut Packer::fresh();
    let dgates_out = split_units(dgates, hidden, &units);
    let mut parts: Vec<Share<'_>> = Vec::with_capacity(units.len());
    for (u, dgates_out) in units.iter().zip(dgates_out) {
        let w = u.len();
        let own: Vec<usize> = u.clone().collect();
        let state = |all: &[f32]| {
            let mut mine = vec![0.0; batch * w];
            gather_columns(all, hidden, std::slice::from_ref(u), &mut mine);
            mine
        };
        let lengths = RowLengths(inp.lengths);
        parts.push(Share {
            units: u.clone(),
            columns: gate_runs(hidden, u),
            w_hh: packs.pack_columns("w_hh", w_hh, &own),
            dh: state(dh),
            dc: state(dc),
            gates: vec![0.0; batch * 4 * w],
            c: vec![0.0; batch * w],
            c_prev: vec![0.0; batch * w],
            dy: vec![0.0; batch * w],
            dgates: vec![0.0; batch * 4 * w],
            live: LiveRows::new(lengths, batch, (4 * hidden, w)),
            dgates_out,
        });
    }
    let parts = run_backward_shares(
        token,
        parts,
        (batch, 4 * hidden, steps),
        |share| (&share.columns[..], &share.dgates),
        #[inline(always)]
        |share, s, next| share.step(token, (d, inp), s, next),
    );
    for share in &parts {
        put_units(&share.dh, &share.units, (&mut *dh, hidden));
        put_units(&share.dc, &share.units, (&mut *dc, hidden));
    }
}

#[cfg(test)]
mod tests {
    use super::super::columns::tests::{case, forward_inputs, kept_by_rows};
    use super::*;
    use crate::kernels::gemm_fast::simd;
    use crate::kernels::recurrent::columns::cases::{same_bits, BY, SHAPES};
    use tensorfit_core::RecurrentDims;
    use tensorfit_testing::{Rng, TestRng};

    /// `dgates`, dh0 and dc0 of the loop through time by rows, or by columns in `shares`
    /// shares (run at once, or `serial`: in turn on one thread).
    fn run(d: LstmDims, inp: &LstmBackwardInputs<'_>, by: Option<(usize, bool)>) -> [Vec<f32>; 3] {
        let token = simd().unwrap();
        let mut dgates = vec![f32::NAN; d.rows() * 4 * d.hidden];
        let (mut dh, mut dc) = (inp.dh_n.to_vec(), inp.dc_n.to_vec());
        let running = (&mut dgates[..], &mut dh[..], &mut dc[..]);
        match by {
            None => super::super::fast::backward_rows(token, d, inp, running).unwrap(),
            Some((shares, false)) => backward(token, d, inp, running, shares),
            Some((shares, true)) => {
                crate::threads::run_inline(|| backward(token, d, inp, running, shares))
            }
        }
        [dgates, dh, dc]
    }

    #[test]
    fn the_column_schedule_gives_the_row_schedules_bits() {
        let Some(_) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(35);
        for (batch, hidden, input, tokens, padded) in SHAPES {
            let (d, i, c0) = case(&mut rng, (batch, hidden, input, tokens));
            let fwd = forward_inputs(&i, &c0, padded);
            let [y, gates, cells] = &kept_by_rows(d, &fwd)[..] else {
                unreachable!("a kept forward gives three tensors")
            };
            let (dy, dh_n, dc_n) = (
                rng.signed_vec(d.rows() * hidden),
                rng.signed_vec(batch * hidden),
                rng.signed_vec(batch * hidden),
            );
            let inp = LstmBackwardInputs {
                x: fwd.x,
                h0: fwd.h0,
                c0: fwd.c0,
                w_ih: fwd.w_ih,
                w_hh: fwd.w_hh,
                y,
                gates,
                cells,
                dy: &dy,
                dh_n: &dh_n,
                dc_n: &dc_n,
                lengths: fwd.lengths,
            };
            let want = run(d, &inp, None);
            for by in BY {
                let got = run(d, &inp, Some(by));
                for (name, (g, w)) in ["dgates", "dh0", "dc0"].iter().zip(got.iter().zip(&want)) {
                    let case = format!("B {batch} H {hidden} tokens {tokens} padded {padded}");
                    assert!(same_bits(g, w), "{case} {by:?}: {name} differs");
                }
            }
        }
    }
}
