//! The LSTM's forward in the column schedule (`recurrent/columns.rs`): each share of
//! the hidden units, on its own thread, projects its units' four gate blocks, adds
//! `h_{t-1} · w_hhᵀ` over its columns, runs its units' cells and writes their `h_t` (and,
//! at the end, `c_n`; for a backward, every step's activated gates and cells of its
//! units); the shares meet once per step. Chosen by `fast::forward` for a batch too
//! small to split by rows; the same bits as the row schedule (tested below). The
//! backward is `columns_backward.rs`.

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{LstmDims, RecurrentDims};

use super::fast::cell_forward;
use super::{LstmForwardInputs, LstmForwardOutputs};
use crate::kernels::gemm_fast::{MatRef, PackedB, Token};
use crate::kernels::packs::Packer;
use crate::kernels::recurrent::columns::{
    gate_columns, projection_run, run_shares, split_units, unit_shares, write_blocks,
    ShareProjection,
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
    /// For a backward: the share's units of every step's gate blocks (`T·B·4` runs, the
    /// layer's `[T, B, 4H]` gates as rows of `H`) and cells (`T·B`).
    kept: Option<Kept<'a>>,
}

/// What a forward for a backward keeps of one share's units.
struct Kept<'a> {
    gates: Vec<&'a mut [f32]>,
    cells: Vec<&'a mut [f32]>,
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
        if let Some(kept) = &mut self.kept {
            write_blocks(g, w, (t, batch), &mut kept.gates);
            write_blocks(&self.c, w, (t, batch), &mut kept.cells);
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

/// The forward pass of a layer that is not empty, in `shares` shares of units
/// (`columns::shares_on_pool`); `bias` is the input projection's, `packs` packs each
/// share's columns of `w_ih` and `w_hh`. With `out.cells`, `out.gates` holds every step
/// (for the backward), else it is not used.
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
    let kept: Vec<Option<Kept<'_>>> = match out.cells.as_deref_mut() {
        Some(cells) => {
            let gates = split_units(out.gates, hidden, &units);
            let cells = split_units(cells, hidden, &units);
            let both = gates.into_iter().zip(cells);
            both.map(|(gates, cells)| Some(Kept { gates, cells }))
                .collect()
        }
        None => units.iter().map(|_| None).collect(),
    };
    let mut parts: Vec<Share<'_>> = Vec::with_capacity(units.len());
    for (((u, y), c_n), kept) in units.iter().zip(y).zip(c_n).zip(kept) {
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
            kept,
        });
    }
    let parts = run_shares(
        token,
        parts,
        (batch, hidden, steps, inp.h0),
        |share| (std::slice::from_ref(&share.units), &share.h),
        #[inline(always)]
        |share, t, h_prev| share.step(token, (d, inp), t, h_prev),
    );
    for share in parts {
        share.finish();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::kernels::gemm_fast::simd;
    use crate::kernels::recurrent::columns::cases::{inputs, same_bits, BY, SHAPES, STEPS};
    use tensorfit_testing::{Rng, TestRng};

    /// y and c_n of a forward by rows, or by columns in `shares` shares (run at once, or
    /// `serial`: in turn on one thread); with `keep` (for a backward), y and every step's
    /// gates and cells.
    fn run(
        d: LstmDims,
        inp: &LstmForwardInputs<'_>,
        by: Option<(usize, bool)>,
        keep: bool,
    ) -> Vec<Vec<f32>> {
        let token = simd().unwrap();
        let (mut y, mut h_n, mut c_n) = (
            vec![f32::NAN; d.rows() * d.hidden],
            inp.h0.to_vec(),
            inp.c0.to_vec(),
        );
        let mut gates = vec![f32::NAN; d.gates(keep).numel()];
        let mut cells = vec![f32::NAN; d.rows() * d.hidden];
        let mut out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            c_n: &mut c_n,
            gates: &mut gates,
            cells: keep.then_some(&mut cells[..]),
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
        // (With the cells kept, `c_n` is the last step's cells, which `lstm::forward_on`
        // copies after either schedule.)
        match keep {
            true => vec![y, gates, cells],
            false => vec![y, c_n],
        }
    }

    /// A case of [`SHAPES`]: its dims and random inputs (`c0` apart).
    pub(in super::super) fn case(
        rng: &mut Rng,
        (batch, hidden, input, tokens): (usize, usize, usize, bool),
    ) -> (
        LstmDims,
        crate::kernels::recurrent::columns::cases::Inputs,
        Vec<f32>,
    ) {
        let d = LstmDims {
            steps: STEPS,
            batch,
            input,
            hidden,
            tokens,
        };
        let i = inputs(rng, 4, (batch, hidden, input, tokens));
        let c0 = rng.signed_vec(batch * hidden);
        (d, i, c0)
    }

    /// The forward's inputs of a case.
    pub(in super::super) fn forward_inputs<'a>(
        i: &'a crate::kernels::recurrent::columns::cases::Inputs,
        c0: &'a [f32],
        padded: bool,
    ) -> LstmForwardInputs<'a> {
        LstmForwardInputs {
            x: &i.x,
            h0: &i.h0,
            c0,
            w_ih: &i.w_ih,
            w_hh: &i.w_hh,
            b_ih: &i.b_ih,
            b_hh: &i.b_hh,
            lengths: padded.then_some(&i.lengths[..]),
        }
    }

    /// The forward by rows, keeping what a backward reads: `[y, gates, cells]`.
    pub(in super::super) fn kept_by_rows(
        d: LstmDims,
        inp: &LstmForwardInputs<'_>,
    ) -> Vec<Vec<f32>> {
        run(d, inp, None, true)
    }

    #[test]
    fn the_column_schedule_gives_the_row_schedules_bits() {
        let Some(_) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(33);
        for (batch, hidden, input, tokens, padded) in SHAPES {
            let (d, i, c0) = case(&mut rng, (batch, hidden, input, tokens));
            let inp = forward_inputs(&i, &c0, padded);
            for keep in [false, true] {
                let want = run(d, &inp, None, keep);
                for by in BY {
                    let got = run(d, &inp, Some(by), keep);
                    let names = match keep {
                        true => ["y", "gates", "cells"],
                        false => ["y", "c_n", ""],
                    };
                    for (name, (g, w)) in names.iter().zip(got.iter().zip(&want)) {
                        let case = format!("B {batch} H {hidden} tokens {tokens} padded {padded}");
                        assert!(same_bits(g, w), "{case} {by:?} keep {keep}: {name} differs");
                    }
                }
            }
        }
    }
}
