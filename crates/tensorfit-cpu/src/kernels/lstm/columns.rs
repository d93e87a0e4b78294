//! The LSTM's inference forward in the column schedule (`recurrent/columns.rs`): each
//! share of the hidden units, on its own thread, projects its units' four gate blocks,
//! adds `h_{t-1} · w_hhᵀ` over its columns, runs its units' cells and writes their
//! `h_t` (and, at the end, `c_n`); the shares meet once per step. Chosen by
//! `fast::forward` for a forward that keeps no cells; the same bits as the row schedule
//! (tested below).

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{LstmDims, RecurrentDims};

use super::fast::cell_forward;
use super::{LstmForwardInputs, LstmForwardOutputs};
use crate::kernels::gemm_fast::{MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{
    gate_columns, projection_run, run_shares, split_units, unit_shares, ShareProjection,
};
use crate::kernels::recurrent::fast::{LiveRows, Projection, Written};

/// One share's weights, running state and outputs.
struct Share<'a> {
    units: Range<usize>,
    w_hh: Arc<PackedB>,
    projection: ShareProjection<'a>,
    /// Steps of `gates` projected at a time.
    run: usize,
    /// `[run, B, 4w]`: the share's gates of the run's steps.
    gates: Vec<f32>,
    /// `[B, w]`: c_{t-1} on entry to step `t`, c_t after it.
    c: Vec<f32>,
    /// `[B, w]`: h_t.
    h: Vec<f32>,
    live: LiveRows,
    live_x: LiveRows,
    /// The share's units of each row of `y` (`T·B` of them) and of `c_n`.
    y: Vec<&'a mut [f32]>,
    c_n: Vec<&'a mut [f32]>,
}

impl Share<'_> {
    /// Step `t` of the share's units, reading `h_prev` (`h_{t-1}` whole, `[B, H]`).
    #[inline(always)]
    fn step(
        &mut self,
        token: Token,
        (d, inp): (LstmDims, &LstmForwardInputs<'_>),
        t: usize,
        h_prev: &[f32],
    ) {
        let (batch, w) = (d.batch, self.units.len());
        let width = 4 * w;
        let lengths = RowLengths(inp.lengths);
        let slot = t % self.run;
        if slot == 0 {
            let steps = t..d.steps.min(t + self.run);
            let g = &mut self.gates[..steps.len() * batch * width];
            let x = (inp.x, d.x_row(), batch);
            self.projection
                .project(token, x, (steps, lengths), &mut self.live_x, g);
        }
        let g = &mut self.gates[slot * batch * width..][..batch * width];
        // gates[t] += h_{t-1} · w_hhᵀ, over the share's columns
        let into = Written::Added;
        self.live
            .gemm(token, &self.w_hh, (h_prev, g), (t, lengths), into);
        cell_forward(g, &mut self.c, &mut self.h, w, (t, lengths));
        let rows = self.y[t * batch..(t + 1) * batch].iter_mut();
        for (dst, src) in rows.zip(self.h.chunks_exact(w)) {
            dst.copy_from_slice(src);
        }
    }

    /// Writes the final cell state.
    fn finish(self) {
        for (dst, src) in self
            .c_n
            .into_iter()
            .zip(self.c.chunks_exact(self.units.len()))
        {
            dst.copy_from_slice(src);
        }
    }
}

/// The forward pass of a layer that is not empty and keeps no cells, in `shares` shares
/// of units (`columns::shares_on_pool`); `bias` is the input projection's, `packs` packs
/// each share's columns of `w_ih` and `w_hh`.
pub(super) fn forward(
    token: Token,
    d: LstmDims,
    (inp, packs): (&LstmForwardInputs<'_>, &mut Packer<'_>),
    out: &mut LstmForwardOutputs<'_>,
    bias: Vec<f32>,
    shares: usize,
) {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let (input, tokens) = d.input();
    let units = unit_shares(hidden, shares);
    // On token input the layer's projection, whose columns each share reads.
    let all = tokens.then(|| Projection::new(&d, (inp.w_ih, &mut *packs), bias.clone()));
    let w_hh_t = MatRef::row_major(inp.w_hh, 4 * hidden, hidden).t();
    let y = split_units(out.y, hidden, &units);
    let c_n = split_units(out.c_n, hidden, &units);
    let mut parts: Vec<Share<'_>> = Vec::with_capacity(units.len());
    for ((u, y), c_n) in units.iter().zip(y).zip(c_n) {
        let (columns, w) = (gate_columns(hidden, 4, u), u.len());
        let w_hh = packs.pack_columns("w_hh", w_hh_t, &columns);
        let projection =
            ShareProjection::new((inp.w_ih, input), (packs, all.as_ref()), &bias, columns);
        let run = projection_run(batch, 4 * w).min(steps);
        let lengths = RowLengths(inp.lengths);
        let c = (0..batch)
            .flat_map(|r| &inp.c0[r * hidden + u.start..r * hidden + u.end])
            .copied()
            .collect();
        parts.push(Share {
            units: u.clone(),
            w_hh,
            projection,
            run,
            gates: vec![0.0; run * batch * 4 * w],
            c,
            h: vec![0.0; batch * w],
            live: LiveRows::new(lengths, batch, (hidden, 4 * w)),
            live_x: LiveRows::new(lengths, batch, (d.x_row(), 4 * w)),
            y,
            c_n,
        });
    }
    let parts = run_shares(
        token,
        parts,
        (batch, hidden, steps, inp.h0),
        |share| (&share.units, &share.h),
        #[inline(always)]
        |share, t, h_prev| share.step(token, (d, inp), t, h_prev),
    );
    for share in parts {
        share.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm_fast::simd;
    use crate::kernels::recurrent::columns::cases::{inputs, same_bits, BY, SHAPES, STEPS};
    use tensorfit_testing::{Rng, TestRng};

    /// (y, c_n) of an inference forward by rows, or by columns in `shares` shares (run at
    /// once, or `serial`: in turn on one thread).
    fn run(d: LstmDims, inp: &LstmForwardInputs<'_>, by: Option<(usize, bool)>) -> [Vec<f32>; 2] {
        let token = simd().unwrap();
        let (mut y, mut h_n, mut c_n) = (
            vec![f32::NAN; d.rows() * d.hidden],
            inp.h0.to_vec(),
            inp.c0.to_vec(),
        );
        let mut gates = vec![f32::NAN; d.gates(false).numel()];
        let mut out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            c_n: &mut c_n,
            gates: &mut gates,
            cells: None,
        };
        let bias = inp.b_ih.iter().zip(inp.b_hh).map(|(a, b)| a + b).collect();
        let packs = &mut Packer::fresh();
        match by {
            None => {
                super::super::fast::forward_rows(token, d, (inp, packs), &mut out, bias).unwrap()
            }
            Some((shares, false)) => forward(token, d, (inp, packs), &mut out, bias, shares),
            Some((shares, true)) => crate::threads::run_inline(|| {
                forward(token, d, (inp, packs), &mut out, bias, shares)
            }),
        }
        [y, c_n]
    }

    #[test]
    fn the_column_schedule_gives_the_row_schedules_bits() {
        let Some(_) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(33);
        for (batch, hidden, input, tokens, padded) in SHAPES {
            let d = LstmDims {
                steps: STEPS,
                batch,
                input,
                hidden,
                tokens,
            };
            let i = inputs(&mut rng, 4, (batch, hidden, input, tokens));
            let c0 = rng.signed_vec(batch * hidden);
            let inp = LstmForwardInputs {
                x: &i.x,
                h0: &i.h0,
                c0: &c0,
                w_ih: &i.w_ih,
                w_hh: &i.w_hh,
                b_ih: &i.b_ih,
                b_hh: &i.b_hh,
                lengths: padded.then_some(&i.lengths[..]),
            };
            let want = run(d, &inp, None);
            for by in BY {
                let got = run(d, &inp, Some(by));
                for (name, (g, w)) in ["y", "c_n"].iter().zip(got.iter().zip(&want)) {
                    let case = format!("B {batch} H {hidden} tokens {tokens} padded {padded}");
                    assert!(same_bits(g, w), "{case} {by:?}: {name} differs");
                }
            }
        }
    }
}
