//! `slice_time` and `scatter_time` with lengths: each row of a padded batch at its own
//! step (see `tensorfit_core::seq_lengths::step_at`), with the `copy_rows_at_step` kernel
//! of shaders/elementwise.wgsl: one launch per step and block of rows, so that no
//! binding covers more than one step of the `[T, B, F]` side.

use std::ops::Range;

use tensorfit_core::Result;

use super::elementwise::fill;
use super::{word, Launches};
use crate::shaders::COPY_ROWS_AT_STEP;
use crate::window::{row_chunks, Operand, Region};

/// The sizes of the `[T, B, F]` side, and the step `t` read (or written).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Steps {
    pub t: usize,
    pub steps: usize,
    pub batch: usize,
    pub width: usize,
}

/// With `scatter` false (`slice_time`): `out[b] = x[step_at(t, lengths[b]), b]`, zero
/// for empty sequences; with `scatter` (`scatter_time`, its gradient): `out` `[T, B, F]`
/// zero except `out[step_at(t, lengths[b]), b] = x[b]`.
pub(crate) fn at_lengths(
    l: &mut Launches,
    n: Steps,
    [x, lengths, out]: [Region; 3],
    scatter: bool,
) -> Result<()> {
    fill(l, 0.0, out);
    copy_rows(l, n, lengths, (x, !scatter), (out, scatter))
}

/// Copies each row from `src` to `dst` at its own step; the side marked `true` is the
/// `[T, B, F]` one.
fn copy_rows(
    l: &mut Launches,
    n: Steps,
    lengths: Region,
    (src, src_seq): (Region, bool),
    (dst, dst_seq): (Region, bool),
) -> Result<()> {
    let blocks = row_chunks(n.batch, n.width, l.span(), "slice_time")?;
    // Rows read step min(t, L - 1) ≤ t.
    for s in 0..=n.t.min(n.steps.saturating_sub(1)) {
        for b in &blocks {
            let at = |seq: bool| -> Range<usize> {
                let first = if seq { s * n.batch } else { 0 } + b.start;
                first * n.width..(first + b.len()) * n.width
            };
            let (src_at, dst_at) = (at(src_seq), at(dst_seq));
            let values = vec![
                word(src_at.start),
                word(dst_at.start),
                word(b.start),
                word(b.len()),
                word(n.width),
                word(n.t),
                word(s),
                word(n.steps),
            ];
            let ops = vec![
                Operand::part(src, src_at),
                Operand::part(dst, dst_at),
                Operand::part(lengths, b.clone()),
            ];
            l.push(&COPY_ROWS_AT_STEP, ops, values, b.len() * n.width);
        }
    }
    Ok(())
}
