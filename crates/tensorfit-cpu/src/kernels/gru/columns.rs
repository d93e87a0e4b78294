//! The GRU's inference forward in the column schedule (`recurrent/columns.rs`): each
//! share of the hidden units, on its own thread, projects its units' three gate blocks
//! (with `b_ih`), forms their recurrent projections `h_{t-1} · w_hhᵀ + b_hh` over its
//! columns, runs its units' cells and writes their `h_t`; the shares meet once per step.
//! For a backward it keeps every step's activated gates and recurrent projections of
//! its units. Chosen by `fast::forward` for a batch too small to split by rows; the same
//! bits as the row schedule (tested below). The backward is `columns_backward.rs`.

use std::ops::Range;
use std::sync::Arc;

use tensorfit_core::seq_lengths::RowLengths;
use tensorfit_core::{GruDims, RecurrentDims};

use super::{cell_forward, GruForwardInputs, GruForwardOutputs};
use crate::kernels::fastmath::Fused;
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
    b_hh: Vec<f32>,
    projection: ShareProjection<'a>,
    /// Steps of `gates` projected at a time.
    run: usize,
    /// `[run, B, 3w]`: the share's input projections of the run's steps.
    gates: Vec<f32>,
    /// `[B, 3w]`: the share's recurrent projections of the step.
    hidden: Vec<f32>,
    /// `[B, w]`: the share's units of h_{t-1}, then h_t.
    h_prev: Vec<f32>,
    h: Vec<f32>,
    live: LiveRows,
    live_x: LiveRows,
    /// The share's units of each row of `y` (`T·B` of them).
    y: Vec<&'a mut [f32]>,
    /// For a backward: the share's units of every step's blocks of `gates` and `hidden`
    /// (`T·B·3` runs each: the layer's `[T, B, 3H]` as rows of `H`).
    kept: Option<[Vec<&'a mut [f32]>; 2]>,
}

impl Share<'_> {
    /// Step `t` of the share's units, reading `h_prev` (`h_{t-1}` whole, `[B, H]`).
    #[inline(always)]
    fn step(
        &mut self,
        token: Token,
        (d, inp): (GruDims, &GruForwardInputs<'_>),
        t: usize,
        h_prev: &[f32],
    ) {
        let (batch, w) = (d.batch, self.units.len());
        let width = 3 * w;
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
        // hidden[t] = h_{t-1} · w_hhᵀ + b_hh, over the share's columns
        let into = Written::Biased(&self.b_hh);
        let hh = &mut self.hidden;
        self.live
            .gemm(token, &self.w_hh, (h_prev, hh), (t, lengths), into);
        let rows = self
            .h_prev
            .chunks_exact_mut(w)
            .zip(h_prev.chunks_exact(d.hidden));
        for (dst, src) in rows {
            dst.copy_from_slice(&src[self.units.clone()]);
        }
        cell_forward::<Fused>(g, hh, &self.h_prev, &mut self.h, w, (t, lengths));
        let rows = self.y[t * batch..(t + 1) * batch].iter_mut();
        for (dst, src) in rows.zip(self.h.chunks_exact(w)) {
            dst.copy_from_slice(src);
        }
        if let Some([gates, hidden]) = &mut self.kept {
            write_blocks(g, w, (t, batch), gates);
            write_blocks(hh, w, (t, batch), hidden);
        }
    }
}

/// The forward pass of a layer that is not empty, in `shares` shares of units
/// (`columns::shares_on_pool`); `packs` packs each share's columns of `w_ih` and `w_hh`.
/// With `keep_for_backward`, `out.gates` and `out.hidden` hold every step, else they
/// are not used.
pub(super) fn forward(
    token: Token,
    d: GruDims,
    (inp, packs, keep_for_backward): (&GruForwardInputs<'_>, &mut Packer<'_>, bool),
    out: &mut GruForwardOutputs<'_>,
    shares: usize,
) {
    let (steps, batch, hidden) = (d.steps, d.batch, d.hidden);
    let (input, tokens) = d.input();
    let units = unit_shares(hidden, shares);
    // On token input the layer's projection, whose columns each share reads.
    let all = tokens.then(|| Projection::new(&d, (inp.w_ih, &mut *packs), inp.b_ih.to_vec()));
    let w_hh_t = MatRef::row_major(inp.w_hh, 3 * hidden, hidden).t();
    let y = split_units(out.y, hidden, &units);
    let kept: Vec<Option<[Vec<&mut [f32]>; 2]>> = match keep_for_backward {
        true => {
            let gates = split_units(out.gates, hidden, &units);
            let both = gates
                .into_iter()
                .zip(split_units(out.hidden, hidden, &units));
            both.map(|(g, h)| Some([g, h])).collect()
        }
        false => units.iter().map(|_| None).collect(),
    };
    let mut parts: Vec<Share<'_>> = Vec::with_capacity(units.len());
    for ((u, y), kept) in units.iter().zip(y).zip(kept) {
        let (columns, w) = (gate_columns(hidden, 3, u), u.len());
        let w_hh = packs.pack_columns("w_hh", w_hh_t, &columns);
        let b_hh = columns.iter().map(|&c| inp.b_hh[c]).collect();
        let projection =
            ShareProjection::new((inp.w_ih, input), (packs, all.as_ref()), inp.b_ih, columns);
        let run = projection_run(batch, 3 * w).min(steps);
        let lengths = RowLengths(inp.lengths);
        parts.push(Share {
            units: u.clone(),
            w_hh,
            b_hh,
            projection,
            run,
            gates: vec![0.0; run * batch * 3 * w],
            hidden: vec![0.0; batch * 3 * w],
            h_prev: vec![0.0; batch * w],
            h: vec![0.0; batch * w],
            live: LiveRows::new(lengths, batch, (hidden, 3 * w)),
            live_x: LiveRows::new(lengths, batch, (d.x_row(), 3 * w)),
            y,
            kept,
        });
    }
    run_shares(
        token,
        parts,
        (batch, hidden, steps, inp.h0),
        |share| (std::slice::from_ref(&share.units), &share.h),
        #[inline(always)]
        |share, t, h_prev| share.step(token, (d, inp), t, h_prev),
    );
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::kernels::gemm_fast::simd;
    use crate::kernels::recurrent::columns::cases::{inputs, same_bits, Inputs, BY, SHAPES, STEPS};
    use tensorfit_testing::Rng;

    /// `y` of a forward by rows, or by columns in `shares` shares (run at once, or
    /// `serial`: in turn on one thread); with `keep` (for a backward), then every step's
    /// gates and recurrent projections.
    pub(in super::super) fn run(
        d: GruDims,
        inp: &GruForwardInputs<'_>,
        by: Option<(usize, bool)>,
        keep: bool,
    ) -> Vec<Vec<f32>> {
        let token = simd().unwrap();
        let mut y = vec![f32::NAN; d.rows() * d.hidden];
        let mut h_n = inp.h0.to_vec();
        let held = d.gate_steps(keep);
        let [mut gates, mut hidden] = [0, 1].map(|_| vec![f32::NAN; d.gates(keep).numel()]);
        let mut out = GruForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            gates: &mut gates,
            hidden: &mut hidden,
        };
        let packs = &mut Packer::fresh();
        match by {
            None => super::super::fast::forward_rows(token, d, held, inp, &mut out, packs),
            Some((shares, false)) => forward(token, d, (inp, packs, keep), &mut out, shares),
            Some((shares, true)) => crate::threads::run_inline(|| {
                forward(token, d, (inp, packs, keep), &mut out, shares)
            }),
        }
        match keep {
            true => vec![y, gates, hidden],
            false => vec![y],
        }
    }

    /// A case of [`SHAPES`]: its dims and random inputs.
    pub(in super::super) fn case(
        rng: &mut Rng,
        (batch, hidden, input, tokens): (usize, usize, usize, bool),
    ) -> (GruDims, Inputs) {
        let d = GruDims {
            steps: STEPS,
            batch,
            input,
            hidden,
            tokens,
        };
        (d, inputs(rng, 3, (batch, hidden, input, tokens)))
    }

    /// The forward's inputs of a case.
    pub(in super::super) fn forward_inputs(i: &Inputs, padded: bool) -> GruForwardInputs<'_> {
        GruForwardInputs {
            x: &i.x,
            h0: &i.h0,
            w_ih: &i.w_ih,
            w_hh: &i.w_hh,
            b_ih: &i.b_ih,
            b_hh: &i.b_hh,
            lengths: padded.then_some(&i.lengths[..]),
        }
    }

    #[test]
    fn the_column_schedule_gives_the_row_schedules_bits() {
        let Some(_) = simd() else {
            eprintln!("skipped: no AVX-512 on this CPU");
            return;
        };
        let mut rng = Rng::new(34);
        for (batch, hidden, input, tokens, padded) in SHAPES {
            let (d, i) = case(&mut rng, (batch, hidden, input, tokens));
            let inp = forward_inputs(&i, padded);
            for keep in [false, true] {
                let want = run(d, &inp, None, keep);
                for by in BY {
                    let got = run(d, &inp, Some(by), keep);
                    let names = ["y", "gates", "hidden"];
                    for (name, (g, w)) in names.iter().zip(got.iter().zip(&want)) {
                        let case = format!("B {batch} H {hidden} tokens {tokens} padded {padded}");
                        assert!(same_bits(g, w), "{case} {by:?} keep {keep}: {name} differs");
                    }
                }
            }
        }
    }
}
