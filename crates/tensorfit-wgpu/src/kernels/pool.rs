//! Global pooling over time, each sequence over its own steps: `mean_time`, `max_time`
//! and their gradients `mean_time_backward`, `max_time_backward` (shaders/pool.wgsl), as
//! the CPU's `kernels/pool.rs` computes them.
//!
//! Every op reads or writes a `[T, B, F]` sequence and a few `[B, F]` (or `[B]`) tensors.
//! The `[B, F]` rows are cut in blocks that fit one binding (whole rows, or parts of one
//! row, [`rects`]), and each block's steps in windows whose elements of the sequence fit
//! one too ([`parts`]): one window when the sequence fits (the usual case). The forwards
//! launch a block's windows in step order, each carrying the running sum, or maximum and
//! its step, on in the outputs; each window loops over at most [`LOOP_BUDGET`] steps.

use std::ops::Range;

use tensorfit_core::args::*;
use tensorfit_core::{PoolKernels, Result, Shape};

use super::elementwise::check_len;
use super::{word, Launches};
use crate::shaders::{MAX_TIME, MAX_TIME_BACKWARD, MEAN_TIME, MEAN_TIME_BACKWARD};
use crate::window::{chunks, rects, Operand, Rect, Region, LOOP_BUDGET};

/// `(T, B, F)`: the steps, batch rows and features of a pooled sequence.
type Dims = (usize, usize, usize);

/// What one launch covers: steps `ts` of the block `block` of the `[B, F]` rows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    ts: Range<usize>,
    block: Rect,
}

impl Part {
    /// The elements of the `[T, B, F]` sequence the part touches.
    fn touched(&self, (batch, width): (usize, usize)) -> Range<usize> {
        let rows = self.block.touched(width);
        if self.ts.is_empty() || rows.is_empty() {
            return 0..0;
        }
        let step = batch * width;
        self.ts.start * step + rows.start..(self.ts.end - 1) * step + rows.end
    }

    /// The parameters every pooling kernel starts with: first step and step count, first
    /// row and row count, first feature and feature count, features, batch rows.
    fn values(&self, (batch, width): (usize, usize)) -> Vec<u32> {
        vec![
            word(self.ts.start),
            word(self.ts.len()),
            word(self.block.rows.start),
            word(self.block.rows.len()),
            word(self.block.cols.start),
            word(self.block.cols.len()),
            word(width),
            word(batch),
        ]
    }
}

/// The parts of a `[T, B, F]` sequence (`dims`), block by block and each block's windows
/// in step order, none touching more than `span` elements of the sequence nor covering
/// more than `max_steps` steps. A sequence of no steps gets one empty window per block,
/// in which the forwards still write their outputs.
fn parts((steps, batch, width): Dims, span: usize, max_steps: usize) -> Vec<Part> {
    let step = batch * width;
    let mut list = Vec::new();
    for block in rects(batch, width, span, usize::MAX) {
        // A window of k steps touches (k - 1) whole steps and the block's share of one.
        let one = block.touched(width).len();
        let per = (1 + span.saturating_sub(one) / step.max(1)).min(max_steps.max(1));
        let windows: Vec<Range<usize>> = match steps {
            0 => std::iter::once(0..0).collect(),
            _ => chunks(steps, per).collect(),
        };
        list.extend(windows.into_iter().map(|ts| Part {
            ts,
            block: block.clone(),
        }));
    }
    list
}

/// Each sequence's mean over its own steps: `out[b] = (1 / L_b) Σ_{t < L_b} x[t, b]`,
/// 0 for `L_b = 0`, with `x` `[T, B, F]` (`dims`), `out` `[B, F]`, `L_b` from `lengths`
/// if given, else `T`.
pub(crate) fn mean_time(
    l: &mut Launches,
    dims @ (steps, batch, width): Dims,
    [x, out]: [Region; 2],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "mean_time";
    check_len(K, "x", x, steps * batch * width)?;
    check_len(K, "out", out, batch * width)?;
    check_lengths(K, lengths, batch)?;
    for part in parts(dims, l.span(), LOOP_BUDGET) {
        let ops = vec![
            Operand::part(x, part.touched((batch, width))),
            lengths_operand(lengths, &part, x),
            Operand::part(out, part.block.touched(width)),
        ];
        let mut values = part.values((batch, width));
        values.extend([
            word(steps),
            u32::from(lengths.is_some()),
            u32::from(part.ts.start == 0),
            u32::from(part.ts.end == steps),
        ]);
        l.push(&MEAN_TIME, ops, values, part.block.len());
    }
    Ok(())
}

/// Each sequence's maximum over its own steps, `out` `[B, F]`, and the first step
/// holding it, `at` `[B, F]`; 0 and -1 for a row of no steps.
pub(crate) fn max_time(
    l: &mut Launches,
    dims @ (steps, batch, width): Dims,
    [x, out, at]: [Region; 3],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "max_time";
    check_len(K, "x", x, steps * batch * width)?;
    check_len(K, "out", out, batch * width)?;
    check_len(K, "at", at, batch * width)?;
    check_lengths(K, lengths, batch)?;
    for part in parts(dims, l.span(), LOOP_BUDGET) {
        let rows = part.block.touched(width);
        let ops = vec![
            Operand::part(x, part.touched((batch, width))),
            lengths_operand(lengths, &part, x),
            Operand::part(out, rows.clone()),
            Operand::part(at, rows),
        ];
        let mut values = part.values((batch, width));
        values.extend([
            word(steps),
            u32::from(lengths.is_some()),
            u32::from(part.ts.start == 0),
        ]);
        l.push(&MAX_TIME, ops, values, part.block.len());
    }
    Ok(())
}

/// The gradient of [`mean_time`]: `dx[t, b] = dout[b] / L_b` for `t < L_b`, else 0, with
/// `dout` `[B, F]` and `dx` `[T, B, F]` (`dims`).
pub(crate) fn mean_time_backward(
    l: &mut Launches,
    dims @ (steps, batch, width): Dims,
    [dout, dx]: [Region; 2],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "mean_time_backward";
    check_len(K, "dout", dout, batch * width)?;
    check_len(K, "dx", dx, steps * batch * width)?;
    check_lengths(K, lengths, batch)?;
    for part in parts(dims, l.span(), usize::MAX) {
        let ops = vec![
            Operand::part(dout, part.block.touched(width)),
            lengths_operand(lengths, &part, dout),
            Operand::part(dx, part.touched((batch, width))),
        ];
        let mut values = part.values((batch, width));
        values.extend([word(steps), u32::from(lengths.is_some())]);
        l.push(
            &MEAN_TIME_BACKWARD,
            ops,
            values,
            part.ts.len() * part.block.len(),
        );
    }
    Ok(())
}

/// The gradient of [`max_time`]: `dx` `[T, B, F]` (`dims`) zero except
/// `dx[at[b, f], b, f] = dout[b, f]`; an `at` outside `0..T` places nothing.
pub(crate) fn max_time_backward(
    l: &mut Launches,
    dims @ (steps, batch, width): Dims,
    [dout, at, dx]: [Region; 3],
) -> Result<()> {
    const K: &str = "max_time_backward";
    check_len(K, "dout", dout, batch * width)?;
    check_len(K, "at", at, batch * width)?;
    check_len(K, "dx", dx, steps * batch * width)?;
    for part in parts(dims, l.span(), usize::MAX) {
        let rows = part.block.touched(width);
        let ops = vec![
            Operand::part(dout, rows.clone()),
            Operand::part(at, rows),
            Operand::part(dx, part.touched((batch, width))),
        ];
        let values = part.values((batch, width));
        l.push(
            &MAX_TIME_BACKWARD,
            ops,
            values,
            part.ts.len() * part.block.len(),
        );
    }
    Ok(())
}

/// Checks that `lengths`, if given, has one length per batch row.
fn check_lengths(kernel: &str, lengths: Option<Region>, batch: usize) -> Result<()> {
    lengths.map_or(Ok(()), |r| check_len(kernel, "lengths", r, batch))
}

/// The lengths of the part's rows, or (without lengths: the kernel reads none, but every
/// binding needs a buffer) the first element of `other`.
fn lengths_operand(lengths: Option<Region>, part: &Part, other: Region) -> Operand {
    match lengths {
        Some(lengths) => Operand::part(lengths, part.block.rows.clone()),
        None => Operand::part(other, 0..1),
    }
}

impl PoolKernels for Launches {
    fn mean_time(
        &mut self,
        s: MeanTimeInputs<&Shape>,
        i: MeanTimeInputs<Region>,
        o: MeanTimeOutputs<Region>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        mean_time(self, dims, [i.x, o.out], i.lengths)
    }

    fn mean_time_backward(
        &mut self,
        steps: usize,
        s: MeanTimeBackwardInputs<&Shape>,
        i: MeanTimeBackwardInputs<Region>,
        o: MeanTimeBackwardOutputs<Region>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        mean_time_backward(self, dims, [i.dout, o.dx], i.lengths)
    }

    fn max_time(
        &mut self,
        s: MaxTimeInputs<&Shape>,
        i: MaxTimeInputs<Region>,
        o: MaxTimeOutputs<Region>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        max_time(self, dims, [i.x, o.out, o.at], i.lengths)
    }

    fn max_time_backward(
        &mut self,
        steps: usize,
        s: MaxTimeBackwardInputs<&Shape>,
        i: MaxTimeBackwardInputs<Region>,
        o: MaxTimeBackwardOutputs<Region>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        max_time_backward(self, dims, [i.dout, i.at, o.dx])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (step, row, feature) of `dims` is covered once, each block's windows run in
    /// step order, and no part touches more than `span` elements of the sequence or of
    /// the rows.
    fn covers(dims @ (steps, batch, width): Dims, span: usize, max_steps: usize) -> usize {
        let list = parts(dims, span, max_steps);
        let mut seen = vec![0; steps * batch * width];
        for (k, p) in list.iter().enumerate() {
            assert!(p.touched((batch, width)).len() <= span, "{p:?}");
            assert!(p.block.touched(width).len() <= span, "{p:?}");
            assert!(p.ts.len() <= max_steps, "{p:?}");
            if p.ts.start > 0 {
                let before = &list[k - 1];
                assert_eq!((&before.block, before.ts.end), (&p.block, p.ts.start));
            }
            for t in p.ts.clone() {
                for b in p.block.rows.clone() {
                    for f in p.block.cols.clone() {
                        seen[(t * batch + b) * width + f] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{dims:?} in spans of {span}");
        list.len()
    }

    #[test]
    fn a_sequence_is_cut_in_windows_of_steps_of_blocks_of_rows_that_fit() {
        // Everything at once; windows of whole steps; one step in blocks of rows; a row
        // in parts; windows limited by the loop budget.
        assert_eq!(covers((5, 4, 3), 1000, usize::MAX), 1);
        assert_eq!(covers((40, 9, 7), 250, usize::MAX), 14);
        assert_eq!(covers((6, 50, 7), 250, usize::MAX), 12);
        assert_eq!(covers((3, 2, 300), 250, usize::MAX), 12);
        assert_eq!(covers((10, 1, 1), 1000, 4), 3);
        // No steps: one empty window, where the forwards write their rows.
        let list = parts((0, 3, 2), 250, usize::MAX);
        assert_eq!(list.len(), 1);
        assert!(list[0].ts.is_empty() && list[0].touched((3, 2)).is_empty());
        assert!(parts((4, 0, 3), 250, usize::MAX).is_empty());
    }
}
