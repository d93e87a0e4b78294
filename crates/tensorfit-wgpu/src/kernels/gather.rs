//! Gathers and scatter-adds of a table's token vectors (shaders/gather.wgsl), mirroring
//! tensorfit-cpu's kernels/gather.rs: the ops `embedding` and `embedding_backward`, and the
//! input projection of a recurrent layer on token input (`lstm.rs`), which gathers and
//! scatters the columns of `w_ih`. Where a token's vector lies is a
//! [`Table`](tensorfit_core::tokens::Table), shared with every backend.
//!
//! Which tokens a launch reads is known only on the device, so the table is cut into
//! blocks of whole token vectors (or, for vectors longer than a binding, pieces of one)
//! that each fit a binding, and every launch handles the ids that fall in its block; the
//! `[N, width]` side (output or its gradient) is cut into row ranges under each block.
//! The scatter-add visits the rows in order within a launch and the launches in row
//! order, so every element of the table sums in the order of the ids, as on the CPU.

use std::ops::Range;

use tensorfit_core::tokens::Table;
use tensorfit_core::Result;

use super::elementwise::{check_len, fill};
use super::{word, Launches};
use crate::shaders::{Kernel, GATHER, SCATTER_ADD};
use crate::window::{chunks, rects, Operand, Rect, Region, LOOP_BUDGET};

/// `out[n, :] = the vector of token ids[n]`, `out` `[N, width]`; an id outside the
/// vocabulary gives zeros (see the shader).
pub(crate) fn gather(
    l: &mut Launches,
    table: Region,
    t: Table,
    ids: Region,
    out: Region,
) -> Result<()> {
    check_len("gather", "table", table, t.len())?;
    check_len("gather", "out", out, ids.len * t.width)?;
    launches(l, &GATHER, [table, ids, out], t, usize::MAX);
    Ok(())
}

/// `dtable = Σ_n (the vector of ids[n]) += dout[n, :]` from zero, in the order of `n`.
pub(crate) fn scatter_add(
    l: &mut Launches,
    t: Table,
    ids: Region,
    dout: Region,
    dtable: Region,
) -> Result<()> {
    check_len("scatter_add", "dtable", dtable, t.len())?;
    check_len("scatter_add", "dout", dout, ids.len * t.width)?;
    fill(l, 0.0, dtable);
    launches(l, &SCATTER_ADD, [dtable, ids, dout], t, LOOP_BUDGET);
    Ok(())
}

/// `nn.Embedding`: `out[n] = table[ids[n]]`, `table` `[vocab, E]`.
pub(crate) fn embedding(
    l: &mut Launches,
    table: Region,
    vocab: usize,
    ids: Region,
    out: Region,
) -> Result<()> {
    let width = table.len.checked_div(vocab).unwrap_or(0);
    gather(l, table, Table::rows(vocab, width), ids, out)
}

/// The gradient of [`embedding`].
pub(crate) fn embedding_backward(
    l: &mut Launches,
    vocab: usize,
    ids: Region,
    dout: Region,
    dtable: Region,
) -> Result<()> {
    let width = dtable.len.checked_div(vocab).unwrap_or(0);
    scatter_add(l, Table::rows(vocab, width), ids, dout, dtable)
}

/// The launches of `kernel` over `[table, ids, side]`: per block of the table, the rows of
/// the side in ranges of at most `max_rows` whose windows fit a binding.
fn launches(
    l: &mut Launches,
    kernel: &'static Kernel,
    [table, ids, side]: [Region; 3],
    t: Table,
    max_rows: usize,
) {
    let n = ids.len;
    let (v_stride, e_stride) = t.strides();
    for (tokens, cols, touched) in blocks(t, l.span()) {
        // Rows r.. of the side touch (rows - 1)·width + cols elements.
        let per_launch = ((l.span() - cols.len()) / t.width.max(1) + 1).min(max_rows);
        for rows in chunks(n, per_launch) {
            let at_side = Rect {
                rows: rows.clone(),
                cols: cols.clone(),
            };
            let values = vec![
                word(rows.start),
                word(rows.len()),
                word(cols.start),
                word(cols.len()),
                word(t.width),
                word(t.vocab),
                word(tokens.start),
                word(tokens.end),
                word(v_stride),
                word(e_stride),
                u32::from(tokens.start == 0),
            ];
            let ops = vec![
                Operand::part(table, touched.clone()),
                Operand::part(ids, rows.clone()),
                Operand::part(side, at_side.touched(t.width)),
            ];
            let threads = if kernel == &SCATTER_ADD {
                cols.len()
            } else {
                at_side.len()
            };
            l.push(kernel, ops, values, threads);
        }
    }
}

/// Blocks of the table that fit a binding: (tokens, columns of their vectors, the element
/// range touched). Whole vectors when one fits (as many as fit), else pieces of one.
fn blocks(t: Table, span: usize) -> Vec<(Range<usize>, Range<usize>, Range<usize>)> {
    // The table as a matrix: rows are tokens (`[V, E]`) or vector elements (`[E, V]`).
    let (rows, cols) = if t.by_column {
        (t.width, t.vocab)
    } else {
        (t.vocab, t.width)
    };
    rects(rows, cols, span, usize::MAX)
        .into_iter()
        .map(|r| {
            let touched = r.touched(cols);
            if t.by_column {
                (r.cols, r.rows, touched)
            } else {
                (r.rows, r.cols, touched)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_blocks_cover_every_element_once_within_the_span() {
        for t in [
            Table::rows(7, 5),
            Table::columns(5, 7),
            Table::rows(3, 40),
            Table::columns(40, 3),
        ] {
            for span in [4, 9, 35, 1000] {
                let mut seen = vec![0; t.len()];
                for (tokens, cols, touched) in blocks(t, span) {
                    assert!(touched.len() <= span, "{t:?} span {span}");
                    for v in tokens {
                        for e in cols.clone() {
                            assert!(touched.contains(&t.at(v, e)));
                            seen[t.at(v, e)] += 1;
                        }
                    }
                }
                assert!(seen.iter().all(|&k| k == 1), "{t:?} span {span}: {seen:?}");
            }
        }
    }
}
