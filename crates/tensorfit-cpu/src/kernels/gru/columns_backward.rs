//! The GRU's backward through time in the column schedule (`recurrent/columns.rs`), for
//! a batch too small to split by rows (training at a few rows, after the forward of
//! `columns.rs`): each share of the hidden units, on its own thread, carries the gradient
//! at its units' `h_t`, runs its units' cells backward into their three blocks of
//! `dgates_t` and `dhidden_t`, and publishes `dhidden_t`; once every share has, each adds
//! its units' rest of the gradient at `h_{t-1}`, `dhidden_t · w_hh` over its columns of
//! `w_hh`. The shares meet once per step, as the LSTM's (`lstm/columns_backward.rs`).
//!
//! The same bits as the row schedule (`fast::backward_rows`; tested below): each element
//! of `dh` is `dh·z` plus the same sum over the `3H` columns in the same blocks of `KC`,
//! and the cells' pass is per unit.

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::GruDims;

use super::{cell_backward, GruBackwardInputs, GruBackwardOutputs, StepSaved};
use crate::kernels::gemm_fast::{MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{
    backward_step, gate_runs, gather_columns, put_units, run_backward_shares, split_units,
    unit_shares, write_blocks,
};
use crate::kernels::recurrent::fast::{LiveRows, Written};

/// One share's weights, running gradient, the step's saved values and outputs.
struct Share<'a> {
    units: Range<usize>,
    /// The share's runs of the layer's `3H` gate columns: its units of r, z and n.
    columns: [Range<usize>; 3],
    /// `w_hh`'s columns of the share's units, `[3H, w]`, packed.
    w_hh: Arc<PackedB>,
    /// `[B, w]`: the gradient arriving at the share's units of h_t.
    dh: Vec<f32>,
    /// Step t's saved values of the share's units: `[B, 3w]` activated gates and
    /// recurrent projections, `[B, w]` h_{t-1} and dy_t.
    gates: Vec<f32>,
    hidden: Vec<f32>,
    h_prev: Vec<f32>,
    dy: Vec<f32>,
    /// `[B, 3w]`: the share's gradients of step t at both projections.
    dgates: Vec<f32>,
    dhidden: Vec<f32>,
    live: LiveRows,
    /// The share's units of every step's blocks of `dgates` and `dhidden` (`T·B·3` runs
    /// each: the layer's `[T, B, 3H]` as rows of `H`).
    out: [Vec<&'a mut [f32]>; 2],
}

impl Share<'_> {
    /// Step `s` of the backward (`columns::backward_step`). `next` is the whole `dhidden`
    /// `[B, 3H]` of the time it multiplies first (at `s = 0`, none: `dh` is `dh_n`).
    #[inline(always)]
    fn step(
        &mut self,
        token: Token,
        (d, inp): (GruDims, &GruBackwardInputs<'_>),
        s: usize,
        next: &[f32],
    ) {
        let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
        let w = self.units.len();
        let lengths = RowLengths(inp.lengths);
        let (after, t) = backward_step(steps, s);
        if let Some(after) = after {
            // dh += dhidden[t + 1] · w_hh over the share's units, as the row schedule
            // adds it after step t + 1 (a row past its end is not multiplied).
            let rows = (after, lengths);
            let dh = &mut self.dh;
            self.live
                .gemm(token, &self.w_hh, (next, dh), rows, Written::Added);
        }
        let Some(t) = t else {
            return;
        };
        let step = |width: usize, t: usize| t * batch * width..(t + 1) * batch * width;
        let (h3, units) = (3 * hidden, std::slice::from_ref(&self.units));
        gather_columns(&inp.gates[step(h3, t)], h3, &self.columns, &mut self.gates);
        gather_columns(
            &inp.hidden[step(h3, t)],
            h3,
            &self.columns,
            &mut self.hidden,
        );
        let h_prev = match t {
            0 => inp.h0,
            _ => &inp.y[step(hidden, t - 1)],
        };
        gather_columns(h_prev, hidden, units, &mut self.h_prev);
        gather_columns(&inp.dy[step(hidden, t)], hidden, units, &mut self.dy);
        let saved = StepSaved {
            gates: &self.gates,
            hidden: &self.hidden,
            h_prev: &self.h_prev,
            dy: &self.dy,
            units: w,
        };
        let grads = (&mut self.dgates, &mut self.dhidden);
        cell_backward(&saved, &mut self.dh, grads.0, grads.1, (t, lengths));
        let [dgates, dhidden] = &mut self.out;
        write_blocks(&self.dgates, w, (t, batch), dgates);
        write_blocks(&self.dhidden, w, (t, batch), dhidden);
    }
}

/// Backwards through time for a layer that is not empty, in `shares` shares of units
/// (`columns::shares_on_pool`): fills `dgates`, `dhidden` and turns `dh0` (the gradient
/// at h_n on entry) into the gradient at h0, as `fast::backward_rows` does.
pub(super) fn backward(
    token: Token,
    d: GruDims,
    inp: &GruBackwardInputs<'_>,
    out: &mut GruBackwardOutputs<'_>,
    shares: usize,
) {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let units = unit_shares(hidden, shares);
    let w_hh = MatRef::row_major(inp.w_hh, 3 * hidden, hidden);
    let packs = &mut Packer::fresh();
    let dgates = split_units(out.dgates, hidden, &units);
    let dhidden = split_units(out.dhidden, hidden, &units);
    let mut parts: Vec<Share<'_>> = Vec::with_capacity(units.len());
    for ((u, dgates), dhidden) in units.iter().zip(dgates).zip(dhidden) {
        let w = u.len();
        let own: Vec<usize> = u.clone().collect();
        let mut dh = vec![0.0; batch * w];
        gather_columns(out.dh0, hidden, std::slice::from_ref(u), &mut dh);
        let lengths = RowLengths(inp.lengths);
        parts.push(Share {
            units: u.clone(),
            columns: gate_runs(hidden, u),
            w_hh: packs.pack_columns("w_hh", w_hh, &own),
            dh,
            gates: vec![0.0; batch * 3 * w],
            hidden: vec![0.0; batch * 3 * w],
            h_prev: vec![0.0; batch * w],
            dy: vec![0.0; batch * w],
            dgates: vec![0.0; batch * 3 * w],
            dhidden: vec![0.0; batch * 3 * w],
            live: LiveRows::new(lengths, batch, (3 * hidden, w)),
            out: [dgates, dhidden],
        });
    }
    let parts = run_backward_shares(
        token,
        parts,
        (batch, 3 * hidden, steps),
        |share| (&share.columns[..], &share.dhidden),
        #[inline(always)]
        |share, s, next| share.step(token, (d, inp), s, next),
    );
    for share in &parts {
        put_units(&share.dh, &share.units, (&mut *out.dh0, hidden));
    }
}

#[cfg(test)]
mod tests {
    use super::super::columns::tests::{case, forward_inputs, run as forward};
    use super::*;
    use crate::kernels::gemm_fast::simd;
    use crate::kernels::recurrent::columns::cases::{same_bits, BY, SHAPES};
    use tensorfit_core::RecurrentDims;
    use tensorfit_testing::{Rng, TestRng};

    /// `dgates`, `dhidden` and dh0 of the loop through time by rows, or by columns in
    /// `shares` shares (run at once, or `serial`: in turn on one thread).
    fn run(d: GruDims, inp: &GruBackwardInputs<'_>, by: Option<(usize, bool)>) -> [Vec<f32>; 3] {
        let token = simd().unwrap();
        let n = d.rows() * 3 * d.hidden;
        let [mut dgates, mut dhidden] = [0, 1].map(|_| vec![f32::NAN; n]);
        let mut dh0 = inp.dh_n.to_vec();
        let mut unused = [0, 1, 2, 3].map(|_| Vec::new());
        let [dw_ih, dw_hh, db_ih, db_hh] = &mut unused;
        let mut out = GruBackwardOutputs {
            dgates: &mut dgates,
            dhidden: &mut dhidden,
            dh0: &mut dh0,
            dw_ih,
            dw_hh,
            db_ih,
            db_hh,
            dx: None,
        };
        match by {
            None => super::super::fast::backward_rows(token, d, inp, &mut out),
            Some((shares, false)) => backward(token, d, inp, &mut out, shares),
            Some((shares, true)) => {
                crate::threads::run_inline(|| backward(token, d, inp, &mut out, shares))
            }
        }
        [dgates, dhidden, dh0]
    }

    #[test]
    fn the_column_schedule_gives_the_row_schedules_bits() {
        let Some(_) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(36);
        for (batch, hidden, input, tokens, padded) in SHAPES {
            let (d, i) = case(&mut rng, (batch, hidden, input, tokens));
            let fwd = forward_inputs(&i, padded);
            let [y, gates, kept_hidden] = &forward(d, &fwd, None, true)[..] else {
                unreachable!("a kept forward gives three tensors")
            };
            let (dy, dh_n) = (
                rng.signed_vec(d.rows() * hidden),
                rng.signed_vec(batch * hidden),
            );
            let inp = GruBackwardInputs {
                x: fwd.x,
                h0: fwd.h0,
                w_ih: fwd.w_ih,
                w_hh: fwd.w_hh,
                y,
                gates,
                hidden: kept_hidden,
                dy: &dy,
                dh_n: &dh_n,
                lengths: fwd.lengths,
            };
            let want = run(d, &inp, None);
            for by in BY {
                let got = run(d, &inp, Some(by));
                let names = ["dgates", "dhidden", "dh0"];
                for (name, (g, w)) in names.iter().zip(got.iter().zip(&want)) {
                    let case = format!("B {batch} H {hidden} tokens {tokens} padded {padded}");
                    assert!(same_bits(g, w), "{case} {by:?}: {name} differs");
                }
            }
        }
    }
}
