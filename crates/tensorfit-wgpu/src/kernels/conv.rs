//! The ops a 1-D convolution over time is built from: `unfold_time`, its gradient
//! `fold_time` (shaders/conv.wgsl) and `reshape` (a copy), as the CPU's `kernels/conv.rs`
//! computes them.
//!
//! Both kernels run one invocation per element written and no atomics: `unfold_time`
//! per column `(t, b, c, k)`, `fold_time` per `(s, b, c)` of `dx`, summing its taps in
//! order. A launch covers a window of steps of a block of the `[B, C]` rows and features
//! and a group of taps ([`Part`]); the other tensor it reads spans the window's steps
//! plus the taps' reach. When everything fits one binding (the usual case) that is one
//! launch; otherwise [`parts`] cuts the taps in groups, the rows in blocks (whole rows,
//! or parts of one row) and the steps in windows so that every operand fits, and
//! `fold_time` launches each window's tap groups in order, the first writing `dx` and
//! the others adding to it.

use std::ops::Range;

use tensorfit_core::args::*;
use tensorfit_core::{ConvKernels, ConvTaps, Result, Shape};

use super::elementwise::{check_len, copy};
use super::{word, Launches};
use crate::backend_error;
use crate::shaders::{FOLD_TIME, UNFOLD_TIME};
use crate::window::{chunks, rects, Operand, Rect, Region, LOOP_BUDGET};

/// The sizes of one call: the taps, and `(T, B, C)` of the sequence `x` (or `dx`).
#[derive(Debug, Clone, Copy)]
struct Geometry {
    taps: ConvTaps,
    steps: usize,
    batch: usize,
    channels: usize,
}

/// What one launch covers: output steps `ts` (of `cols`, or of `dx`), the block `block`
/// of the `[B, C]` rows and features, taps `ks`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    ts: Range<usize>,
    block: Rect,
    ks: Range<usize>,
}

impl Geometry {
    /// Checks the taps and that every step index the kernels form (`t + k·dilation`)
    /// fits their 32-bit arithmetic.
    fn new(
        kernel: &str,
        taps: ConvTaps,
        (steps, batch, channels): (usize, usize, usize),
    ) -> Result<Self> {
        taps.check()
            .map_err(|m| backend_error(format!("{kernel}: {m}")))?;
        // `check` refuses a span that overflows.
        let span = taps.span().unwrap_or(usize::MAX);
        if span.saturating_add(steps) > i32::MAX as usize {
            return Err(backend_error(format!(
                "{kernel}: taps spanning {span} steps over {steps} steps exceed the kernels' limit of {} steps",
                i32::MAX
            )));
        }
        Ok(Geometry {
            taps,
            steps,
            batch,
            channels,
        })
    }

    /// Columns per row, `C·K`.
    fn width(&self) -> usize {
        self.channels * self.taps.kernel
    }

    /// The elements of a `[T, B, C]` tensor in steps `ts` of `block`.
    fn narrow(&self, ts: &Range<usize>, block: &Rect) -> Range<usize> {
        let rows = block.touched(self.channels);
        if ts.is_empty() || rows.is_empty() {
            return 0..0;
        }
        let step = self.batch * self.channels;
        ts.start * step + rows.start..(ts.end - 1) * step + rows.end
    }

    /// The elements of a `[T, B, C·K]` tensor in steps `ts` of `block`, taps `ks`: from
    /// the first tap of the first feature of the first row to the last of the last.
    fn wide(&self, ts: &Range<usize>, block: &Rect, ks: &Range<usize>) -> Range<usize> {
        if ts.is_empty() || block.len() == 0 || ks.is_empty() {
            return 0..0;
        }
        let (kernel, width) = (self.taps.kernel, self.width());
        let at =
            |t: usize, b: usize, c: usize, k: usize| (t * self.batch + b) * width + c * kernel + k;
        let first = at(ts.start, block.rows.start, block.cols.start, ks.start);
        let last = at(
            ts.end - 1,
            block.rows.end - 1,
            block.cols.end - 1,
            ks.end - 1,
        );
        first..last + 1
    }

    /// The steps of `x` taps `ks` of output steps `ts` read, `t - left + k·dilation`,
    /// inside `0..T`.
    fn sources(&self, ts: &Range<usize>, ks: &Range<usize>) -> Range<usize> {
        let ConvTaps { dilation, left, .. } = self.taps;
        let lo = (ts.start + ks.start * dilation).saturating_sub(left);
        let hi = (ts.end - 1 + (ks.end - 1) * dilation).checked_sub(left);
        self.clip(lo, hi)
    }

    /// The steps of `dcols` whose taps `ks` read steps `ss`, `s + left - k·dilation`,
    /// inside `0..T`.
    fn readers(&self, ss: &Range<usize>, ks: &Range<usize>) -> Range<usize> {
        let ConvTaps { dilation, left, .. } = self.taps;
        let lo = (ss.start + left).saturating_sub((ks.end - 1) * dilation);
        let hi = (ss.end - 1 + left).checked_sub(ks.start * dilation);
        self.clip(lo, hi)
    }

    /// Steps `lo..=hi` inside `0..T` (none when `hi` is below 0).
    fn clip(&self, lo: usize, hi: Option<usize>) -> Range<usize> {
        match hi {
            Some(hi) => lo.min(self.steps)..(hi + 1).min(self.steps).max(lo.min(self.steps)),
            None => 0..0,
        }
    }
}

/// The parts of one call in launch order, none touching more than `span` elements of
/// any operand: the output's steps window by window, for each block of rows, each
/// window's tap groups in order. `fold` plans `fold_time` (which reads `dcols` over the
/// taps' reach and loops over a group's taps), else `unfold_time` (which reads `x`).
fn parts(g: Geometry, span: usize, fold: bool) -> Vec<Part> {
    let Geometry {
        taps,
        steps,
        batch,
        channels,
    } = g;
    let (kernel, narrow_step, wide_step) = (taps.kernel, batch * channels, g.width() * batch);
    if steps == 0 || narrow_step == 0 {
        return Vec::new();
    }
    let span = span.max(1);
    // What one more tap adds to the steps the read tensor spans, in its elements.
    let reach = taps
        .dilation
        .saturating_mul(if fold { wide_step } else { narrow_step });
    // Taps per group: as many as keep one feature's part inside both bindings
    // (unfold: x spans (group - 1)·reach + 1, cols group; fold: dcols both at once).
    let per_group = if fold {
        span.saturating_add(reach) / reach.saturating_add(1)
    } else {
        1 + (span - 1) / reach.max(1)
    };
    let group = per_group.clamp(1, kernel.min(LOOP_BUDGET).min(span));
    // One step of a block (`ne` elements of the narrow tensor) touches (ne - 1)·K +
    // group of the wide one; the read tensor also spans (group - 1)·reach.
    let spread = (group - 1).saturating_mul(reach);
    let (room_narrow, room_wide) = match fold {
        true => (span, span - spread),
        false => (span - spread, span),
    };
    let block_span = room_narrow.min(1 + (room_wide - group) / kernel);
    let mut list = Vec::new();
    for block in rects(batch, channels, block_span, usize::MAX) {
        let ne = block.touched(channels).len();
        let we = (ne - 1) * kernel + group;
        let per = (1 + (room_narrow - ne) / narrow_step).min(1 + (room_wide - we) / wide_step);
        for ts in chunks(steps, per) {
            for ks in chunks(kernel, group) {
                list.push(Part {
                    ts: ts.clone(),
                    block: block.clone(),
                    ks,
                });
            }
        }
    }
    list
}

/// The lengths of the block's rows, or (without lengths: the kernel reads none, but
/// every binding needs a buffer) the first element of `other`.
fn lengths_operand(lengths: Option<Region>, block: &Rect, other: Region) -> Operand {
    match lengths {
        Some(lengths) => Operand::part(lengths, block.rows.clone()),
        None => Operand::part(other, 0..1),
    }
}

/// The parameters both kernels start with after their bases.
fn values(g: &Geometry, p: &Part, masked: bool) -> Vec<u32> {
    vec![
        word(p.ts.start),
        word(p.ts.len()),
        word(p.block.rows.start),
        word(p.block.rows.len()),
        word(p.block.cols.start),
        word(p.block.cols.len()),
        word(p.ks.start),
        word(p.ks.len()),
        word(g.channels),
        word(g.batch),
        word(g.taps.kernel),
        word(g.taps.dilation),
        word(g.taps.left),
        word(g.steps),
        u32::from(masked),
    ]
}

/// `cols[t, b, c·K + k] = x[t - left + k·dilation, b, c]` inside the row's `L_b` steps,
/// else 0, for `x` `[T, B, C]` (`dims`) and `cols` `[T, B, C·K]`.
pub(crate) fn unfold_time(
    l: &mut Launches,
    taps: ConvTaps,
    dims @ (steps, batch, channels): (usize, usize, usize),
    [x, cols]: [Region; 2],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "unfold_time";
    let g = Geometry::new(K, taps, dims)?;
    check_len(K, "x", x, steps * batch * channels)?;
    check_len(K, "cols", cols, steps * batch * g.width())?;
    if let Some(lengths) = lengths {
        check_len(K, "lengths", lengths, batch)?;
    }
    for part in parts(g, l.span(), false) {
        let sources = g.sources(&part.ts, &part.ks);
        let ops = vec![
            Operand::part(x, g.narrow(&sources, &part.block)),
            lengths_operand(lengths, &part.block, x),
            Operand::part(cols, g.wide(&part.ts, &part.block, &part.ks)),
        ];
        let threads = part.ts.len() * part.block.len() * part.ks.len();
        l.push(
            &UNFOLD_TIME,
            ops,
            values(&g, &part, lengths.is_some()),
            threads,
        );
    }
    Ok(())
}

/// `dx[s, b, c] = Σ_k dcols[s + left - k·dilation, b, c·K + k]` over the taps whose step
/// lies inside the row's `L_b` steps, 0 for `s ≥ L_b`, for `dcols` `[T, B, C·K]` and `dx`
/// `[T, B, C]` (`dims`).
pub(crate) fn fold_time(
    l: &mut Launches,
    taps: ConvTaps,
    dims @ (steps, batch, channels): (usize, usize, usize),
    [dcols, dx]: [Region; 2],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "fold_time";
    let g = Geometry::new(K, taps, dims)?;
    check_len(K, "dcols", dcols, steps * batch * g.width())?;
    check_len(K, "dx", dx, steps * batch * channels)?;
    if let Some(lengths) = lengths {
        check_len(K, "lengths", lengths, batch)?;
    }
    for part in parts(g, l.span(), true) {
        let readers = g.readers(&part.ts, &part.ks);
        let ops = vec![
            Operand::part(dcols, g.wide(&readers, &part.block, &part.ks)),
            lengths_operand(lengths, &part.block, dcols),
            Operand::part(dx, g.narrow(&part.ts, &part.block)),
        ];
        let mut values = values(&g, &part, lengths.is_some());
        values.push(u32::from(part.ks.start == 0));
        l.push(&FOLD_TIME, ops, values, part.ts.len() * part.block.len());
    }
    Ok(())
}

impl ConvKernels for Launches {
    fn unfold_time(
        &mut self,
        taps: ConvTaps,
        s: UnfoldTimeInputs<&Shape>,
        i: UnfoldTimeInputs<Region>,
        o: UnfoldTimeOutputs<Region>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        unfold_time(self, taps, dims, [i.x, o.cols], i.lengths)
    }

    fn fold_time(
        &mut self,
        taps: ConvTaps,
        s: FoldTimeInputs<&Shape>,
        i: FoldTimeInputs<Region>,
        o: FoldTimeOutputs<Region>,
    ) -> Result<()> {
        let channels = s.dcols.dim(2) / taps.kernel.max(1);
        let dims = (s.dcols.dim(0), s.dcols.dim(1), channels);
        fold_time(self, taps, dims, [i.dcols, o.dx], i.lengths)
    }

    fn reshape(
        &mut self,
        _: &Shape,
        _: ReshapeInputs<&Shape>,
        i: ReshapeInputs<Region>,
        o: ReshapeOutputs<Region>,
    ) -> Result<()> {
        copy(self, i.x, o.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts of `dims` at `taps` in bindings of `span` elements: every output element
    /// (`fold`: every tap of it) is covered once, a window's tap groups come in order,
    /// every operand range holds every element the part reads or writes and touches no
    /// more than `span`. Returns the number of launches.
    fn covers(
        taps: ConvTaps,
        dims @ (steps, batch, channels): (usize, usize, usize),
        span: usize,
        fold: bool,
    ) -> usize {
        let g = Geometry::new("test", taps, dims).unwrap();
        let list = parts(g, span, fold);
        let kernel = taps.kernel;
        let mut seen = vec![0; steps * batch * channels * kernel];
        for (n, p) in list.iter().enumerate() {
            if p.ks.start > 0 {
                let before = &list[n - 1];
                assert_eq!(
                    (&before.ts, &before.block, before.ks.end),
                    (&p.ts, &p.block, p.ks.start)
                );
            }
            let (out, read) = match fold {
                false => (
                    g.wide(&p.ts, &p.block, &p.ks),
                    g.narrow(&g.sources(&p.ts, &p.ks), &p.block),
                ),
                true => (
                    g.narrow(&p.ts, &p.block),
                    g.wide(&g.readers(&p.ts, &p.ks), &p.block, &p.ks),
                ),
            };
            assert!(
                out.len() <= span && read.len() <= span,
                "{p:?}: {out:?} {read:?} in {span}"
            );
            assert!(p.ks.len() <= LOOP_BUDGET);
            for t in p.ts.clone() {
                for b in p.block.rows.clone() {
                    for c in p.block.cols.clone() {
                        for k in p.ks.clone() {
                            seen[((t * batch + b) * channels + c) * kernel + k] += 1;
                            let column = (t * batch + b) * g.width() + c * kernel + k;
                            let element = (t * batch + b) * channels + c;
                            // What the part writes, and reads there at a row's longest.
                            let (written, read_at) = match fold {
                                false => (
                                    column,
                                    taps.source(t, k, steps)
                                        .map(|s| (s * batch + b) * channels + c),
                                ),
                                true => (
                                    element,
                                    taps.reader(t, k, steps)
                                        .map(|r| (r * batch + b) * g.width() + c * kernel + k),
                                ),
                            };
                            assert!(out.contains(&written), "{p:?}");
                            if let Some(read_at) = read_at {
                                assert!(read.contains(&read_at), "{p:?} t {t} k {k}");
                            }
                        }
                    }
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{taps:?} {dims:?} in {span}");
        list.len()
    }

    fn taps(kernel: usize, dilation: usize, left: usize) -> ConvTaps {
        ConvTaps {
            kernel,
            dilation,
            left,
        }
    }

    #[test]
    fn a_call_is_cut_in_windows_blocks_and_tap_groups_that_fit() {
        for fold in [false, true] {
            // Everything at once.
            assert_eq!(covers(taps(3, 2, 4), (5, 4, 3), 1000, fold), 1);
            // Windows of steps; blocks of rows; parts of one row; groups of taps.
            assert!(covers(taps(3, 1, 2), (40, 9, 7), 250, fold) > 1);
            assert!(covers(taps(3, 2, 2), (6, 50, 7), 250, fold) > 1);
            assert!(covers(taps(2, 1, 1), (3, 2, 300), 250, fold) > 1);
            assert!(covers(taps(5, 4, 8), (12, 9, 7), 250, fold) > 5);
            assert!(covers(taps(300, 1, 0), (3, 1, 2), 250, fold) > 1);
            assert!(covers(taps(1, 1, 0), (7, 3, 5), 250, fold) >= 1);
            // Tiny bindings.
            covers(taps(4, 3, 5), (9, 3, 4), 1, fold);
            covers(taps(4, 3, 5), (9, 3, 4), 7, fold);
        }
        // No steps, rows or features: nothing to launch.
        let g = Geometry::new("test", taps(3, 1, 1), (0, 3, 2)).unwrap();
        assert!(parts(g, 250, false).is_empty());
        let g = Geometry::new("test", taps(3, 1, 1), (4, 0, 2)).unwrap();
        assert!(parts(g, 250, true).is_empty());
    }

    #[test]
    fn taps_outside_the_kernels_reach_are_refused() {
        assert!(Geometry::new("unfold_time", taps(0, 1, 0), (3, 1, 1)).is_err());
        let far = taps(2, 1 << 31, 0);
        let err = Geometry::new("unfold_time", far, (3, 1, 1)).unwrap_err();
        assert!(err.to_string().contains("unfold_time"), "{err}");
        assert!(Geometry::new("fold_time", taps(2, 1 << 20, 0), (3, 1, 1)).is_ok());
    }
}
