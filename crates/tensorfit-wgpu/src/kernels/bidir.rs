//! The ops a bidirectional recurrent layer is built from, which only move values:
//! `reverse_time`, `concat_features` and `slice_features` (shaders/bidir.wgsl), as the
//! CPU's `kernels/bidir.rs` computes them.
//!
//! `reverse_time` reads each row from a step that depends on its length, which only the
//! device knows: a launch may read any step of its rows. When a tensor fits one binding
//! (the usual case) one launch does everything; otherwise the steps are cut in windows
//! that fit (whole steps, or blocks of rows of one step when a step alone is larger),
//! and each window of `y` is launched once per window of `x` its sources can lie in,
//! writing the elements whose source lies there. The feature ops copy blocks of rows
//! (or parts of one row) whose windows fit.

use std::ops::Range;

use tensorfit_core::Result;

use super::elementwise::check_len;
use super::{word, Launches};
use crate::backend_error;
use crate::shaders::{COPY_FEATURES, REVERSE_TIME};
use crate::window::{chunks, row_chunks, Operand, Rect, Region};

/// `y[t, b] = x[reversed_step(t, L_b), b]` for `x`, `y` `[T, B, F]` (`dims`), `L_b` from
/// `lengths` if given, else `T`.
pub(crate) fn reverse_time(
    l: &mut Launches,
    (steps, batch, width): (usize, usize, usize),
    [x, y]: [Region; 2],
    lengths: Option<Region>,
) -> Result<()> {
    const K: &str = "reverse_time";
    let step = batch * width;
    check_len(K, "x", x, steps * step)?;
    check_len(K, "y", y, x.len)?;
    if let Some(lengths) = lengths {
        check_len(K, "lengths", lengths, batch)?;
    }
    if x.len == 0 {
        return Ok(());
    }
    // Windows of whole steps while a step fits one binding, else of rows of one step.
    let span = l.span();
    let (per_window, row_blocks): (usize, Vec<Range<usize>>) = if step <= span {
        (span / step, std::iter::once(0..batch).collect())
    } else {
        (1, row_chunks(batch, width, span, K)?)
    };
    let windows: Vec<Range<usize>> = chunks(steps, per_window).collect();
    // The element range of steps `ts` and rows `rows` of a [T, B, F] tensor.
    let touched = |ts: &Range<usize>, rows: &Range<usize>| {
        (ts.start * batch + rows.start) * width..((ts.end - 1) * batch + rows.end) * width
    };
    for rows in &row_blocks {
        for to in &windows {
            for from in windows
                .iter()
                .filter(|w| may_read(to, w, steps, lengths.is_some()))
            {
                let ops = vec![
                    Operand::part(x, touched(from, rows)),
                    Operand::part(y, touched(to, rows)),
                    match lengths {
                        Some(lengths) => Operand::part(lengths, rows.clone()),
                        // Not read (`masked` 0), bound because every binding needs one.
                        None => Operand::part(x, 0..1),
                    },
                ];
                let values = vec![
                    word(to.start),
                    word(to.len()),
                    word(rows.start),
                    word(rows.len()),
                    word(width),
                    word(batch),
                    word(steps),
                    word(from.start),
                    word(from.end),
                    u32::from(lengths.is_some()),
                ];
                let threads = to.len() * rows.len() * width;
                l.push(&REVERSE_TIME, ops, values, threads);
            }
        }
    }
    Ok(())
}

/// Whether a step of `to` may read a step of `from` in a sequence of `steps`: without
/// lengths step `t` reads `T - 1 - t`; with them, `L - 1 - t < T - t` or `t` itself.
fn may_read(to: &Range<usize>, from: &Range<usize>, steps: usize, masked: bool) -> bool {
    let overlaps = |a: Range<usize>| a.start < from.end && from.start < a.end;
    let mirrored = steps - to.end..steps - to.start;
    if masked {
        overlaps(0..mirrored.end) || overlaps(to.clone())
    } else {
        overlaps(mirrored)
    }
}

/// `out[r] = [a[r], b[r]]` for `rows` rows of `a` `[rows, Fa]`, `b` `[rows, Fb]`.
pub(crate) fn concat_features(
    l: &mut Launches,
    rows: usize,
    [(a, fa), (b, fb)]: [(Region, usize); 2],
    out: Region,
) -> Result<()> {
    const K: &str = "concat_features";
    check_len(K, "a", a, rows * fa)?;
    check_len(K, "b", b, rows * fb)?;
    check_len(K, "out", out, rows * (fa + fb))?;
    let width = fa + fb;
    copy_features(l, rows, (a, fa, 0), (out, width, 0), fa);
    copy_features(l, rows, (b, fb, 0), (out, width, fa), fb);
    Ok(())
}

/// `out[r] = x[r, start..start + width]` for every row of `x` `[rows, features]`.
pub(crate) fn slice_features(
    l: &mut Launches,
    (start, width): (usize, usize),
    (x, rows, features): (Region, usize, usize),
    out: Region,
) -> Result<()> {
    const K: &str = "slice_features";
    if width == 0 || start.checked_add(width).is_none_or(|end| end > features) {
        return Err(backend_error(format!(
            "{K}: features {start}.. (width {width}) are not inside rows of {features}"
        )));
    }
    check_len(K, "x", x, rows * features)?;
    check_len(K, "out", out, rows * width)?;
    copy_features(l, rows, (x, features, start), (out, width, 0), width);
    Ok(())
}

/// `dst[r, dst_col + j] = src[r, src_col + j]` for `j < width` and every row, `src` a
/// `[rows, src_ld]` matrix and `dst` a `[rows, dst_ld]` one: blocks of as many whole
/// rows as one binding holds of the wider, or parts of one row.
fn copy_features(
    l: &mut Launches,
    rows: usize,
    (src, src_ld, src_col): (Region, usize, usize),
    (dst, dst_ld, dst_col): (Region, usize, usize),
    width: usize,
) {
    let (span, ld) = (l.span(), src_ld.max(dst_ld));
    let blocks: Vec<Rect> = if ld <= span {
        chunks(rows, span / ld.max(1))
            .map(|rows| Rect {
                rows,
                cols: 0..width,
            })
            .collect()
    } else {
        (0..rows)
            .flat_map(|r| {
                chunks(width, span).map(move |cols| Rect {
                    rows: r..r + 1,
                    cols,
                })
            })
            .collect()
    };
    for block in blocks.iter().filter(|b| b.len() > 0) {
        // The block's columns where they lie in each matrix.
        let at = |col: usize| Rect {
            rows: block.rows.clone(),
            cols: col + block.cols.start..col + block.cols.end,
        };
        let ops = vec![
            Operand::part(src, at(src_col).touched(src_ld)),
            Operand::part(dst, at(dst_col).touched(dst_ld)),
        ];
        let values = vec![
            word(block.rows.start),
            word(block.rows.len()),
            word(block.cols.start),
            word(block.cols.len()),
            word(src_ld),
            word(src_col),
            word(dst_ld),
            word(dst_col),
        ];
        l.push(&COPY_FEATURES, ops, values, block.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_of_steps_reads_its_mirror_and_with_lengths_everything_before_it() {
        // T = 6 in windows of 2: 0..2, 2..4, 4..6.
        assert!(may_read(&(0..2), &(4..6), 6, false));
        assert!(!may_read(&(0..2), &(0..2), 6, false));
        assert!(!may_read(&(0..2), &(2..4), 6, false));
        assert!(may_read(&(2..4), &(2..4), 6, false));
        // With lengths: step 0..2 reads any step below 6 (a row of length 6 down to 1), or
        // itself; 4..6 reads 0..2 or itself (a row of length 6 or 5, else padding).
        assert!((0..3).all(|w| may_read(&(0..2), &(2 * w..2 * w + 2), 6, true)));
        assert!(may_read(&(4..6), &(0..2), 6, true));
        assert!(!may_read(&(4..6), &(2..4), 6, true));
        assert!(may_read(&(4..6), &(4..6), 6, true));
    }
}
