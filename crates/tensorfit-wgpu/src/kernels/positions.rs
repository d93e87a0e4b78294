//! The positions of a sequence: `add_time_rows`, `sum_batch_to_rows` and `sinusoids`
//! (shaders/positions.wgsl), as the CPU's `kernels/positions.rs` computes them.
//!
//! `add_time_rows` and `sinusoids` cut their `[T·B, D]` and `[steps, dim]` matrices in
//! blocks that fit one binding ([`rects`]); a block of `x`'s rows reads at most as many
//! rows of the table as it has (one per step it touches), so the table's part fits too.
//! `sum_batch_to_rows` sums whole steps' `[B, D]` blocks when one fits a binding, and
//! otherwise each step's rows in windows (blocks of rows in row order, each carrying the
//! sums on), then fills the table's rows past the steps with zeros.

use tensorfit_core::args::*;
use tensorfit_core::positions_ops::{sinusoid_factors, SINUSOID_FACTORS};
use tensorfit_core::{PositionKernels, Result, Shape};

use super::elementwise::{check_len, fill};
use super::{bits, block_values, word, Launches};
use crate::backend_error;
use crate::shaders::{ADD_TIME_ROWS, SINUSOIDS, SUM_BATCH_TO_ROWS};
use crate::window::{chunks, rects, Operand, Rect, Region, LOOP_BUDGET};

/// `(T, B, D)`: the steps, batch rows and features of a sequence.
type Dims = (usize, usize, usize);

/// The rows of a table of `len` elements in rows of `width` that a sequence of `steps`
/// steps reads, or an error naming the kernel.
fn table_rows(kernel: &str, len: usize, width: usize, steps: usize) -> Result<usize> {
    let positions = match len.checked_div(width) {
        Some(n) if n * width == len => n,
        None if len == 0 => steps,
        _ => {
            return Err(backend_error(format!(
                "{kernel}: `table` has {len} elements, not rows of {width}"
            )))
        }
    };
    if steps > positions {
        return Err(backend_error(format!(
            "{kernel}: the sequence of {steps} steps is longer than the table's {positions} positions"
        )));
    }
    Ok(positions)
}

/// `out[t, b] = x[t, b] + table[t]` for `x`, `out` `[T, B, D]` (`dims`), `table` `[N, D]`.
pub(crate) fn add_time_rows(
    l: &mut Launches,
    (steps, batch, width): Dims,
    [x, table, out]: [Region; 3],
) -> Result<()> {
    const K: &str = "add_time_rows";
    check_len(K, "x", x, steps * batch * width)?;
    check_len(K, "out", out, x.len)?;
    table_rows(K, table.len, width, steps)?;
    for r in rects(steps * batch, width, l.span(), usize::MAX) {
        let touched = r.touched(width);
        let steps_read = Rect {
            rows: r.rows.start / batch..(r.rows.end - 1) / batch + 1,
            cols: r.cols.clone(),
        };
        let ops = vec![
            Operand::part(x, touched.clone()),
            Operand::part(table, steps_read.touched(width)),
            Operand::part(out, touched),
        ];
        let mut values = block_values(&r, width);
        values.push(word(batch));
        l.push(&ADD_TIME_ROWS, ops, values, r.len());
    }
    Ok(())
}

/// What one `sum_batch_to_rows` launch covers: steps `steps`, batch rows `rows` and
/// features `cols`, carrying on the sums of earlier rows when `rows` does not start at 0.
struct Part {
    steps: std::ops::Range<usize>,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
}

/// `dtable[t] = Σ_b dout[t, b]` (in `b` order) for `dout` `[T, B, D]` (`dims`) and
/// `dtable` `[rows, D]`; rows `T..rows` zero.
pub(crate) fn sum_batch_to_rows(
    l: &mut Launches,
    (steps, batch, width): Dims,
    rows: usize,
    [dout, dtable]: [Region; 2],
) -> Result<()> {
    const K: &str = "sum_batch_to_rows";
    check_len(K, "dout", dout, steps * batch * width)?;
    check_len(K, "dtable", dtable, rows * width)?;
    table_rows(K, dtable.len, width, steps)?;
    let step = batch * width;
    let span = l.span();
    let mut parts = Vec::new();
    if step == 0 {
        // No rows to sum: every sum is 0, the fill below writes them.
    } else if step <= span && batch <= LOOP_BUDGET {
        parts.extend(chunks(steps, span / step).map(|ts| Part {
            steps: ts,
            rows: 0..batch,
            cols: 0..width,
        }));
    } else {
        for t in 0..steps {
            parts.extend(
                rects(batch, width, span, LOOP_BUDGET)
                    .into_iter()
                    .map(|r| Part {
                        steps: t..t + 1,
                        rows: r.rows,
                        cols: r.cols,
                    }),
            );
        }
    }
    for p in parts {
        let first = (p.steps.start * batch + p.rows.start) * width + p.cols.start;
        let last = ((p.steps.end - 1) * batch + p.rows.end - 1) * width + p.cols.end;
        let sums = Rect {
            rows: p.steps.clone(),
            cols: p.cols.clone(),
        };
        let ops = vec![
            Operand::part(dout, first..last),
            Operand::part(dtable, sums.touched(width)),
        ];
        let values = vec![
            word(p.steps.start),
            word(p.steps.len()),
            word(p.rows.start),
            word(p.rows.len()),
            word(p.cols.start),
            word(p.cols.len()),
            word(batch),
            word(width),
            u32::from(p.rows.start > 0),
        ];
        l.push(&SUM_BATCH_TO_ROWS, ops, values, sums.len());
    }
    let zero = if step == 0 { 0 } else { steps * width };
    fill(l, 0.0, dtable.slice(zero..dtable.len));
    Ok(())
}

/// `table[p, 2i] = sin(p · w_i)`, `table[p, 2i + 1] = cos(p · w_i)` for `table`
/// `[steps, dim]`, `w_i` from the factors every backend multiplies.
pub(crate) fn sinusoids(l: &mut Launches, steps: usize, dim: usize, table: Region) -> Result<()> {
    check_len("sinusoids", "table", table, steps * dim)?;
    let mut factors = sinusoid_factors(dim);
    factors.resize(SINUSOID_FACTORS, 1.0);
    for r in rects(steps, dim, l.span(), usize::MAX) {
        let ops = vec![Operand::part(table, r.touched(dim))];
        let mut values = block_values(&r, dim);
        values.extend([0, 0]);
        values.extend(factors.iter().map(|&f| bits(f)));
        l.push(&SINUSOIDS, ops, values, r.len());
    }
    Ok(())
}

impl PositionKernels for Launches {
    fn add_time_rows(
        &mut self,
        s: AddTimeRowsInputs<&Shape>,
        i: AddTimeRowsInputs<Region>,
        o: AddTimeRowsOutputs<Region>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        add_time_rows(self, dims, [i.x, i.table, o.out])
    }

    fn sum_batch_to_rows(
        &mut self,
        rows: usize,
        s: SumBatchToRowsInputs<&Shape>,
        i: SumBatchToRowsInputs<Region>,
        o: SumBatchToRowsOutputs<Region>,
    ) -> Result<()> {
        let dims = (s.dout.dim(0), s.dout.dim(1), s.dout.dim(2));
        sum_batch_to_rows(self, dims, rows, [i.dout, o.dtable])
    }

    fn sinusoids(&mut self, steps: usize, dim: usize, o: SinusoidsOutputs<Region>) -> Result<()> {
        sinusoids(self, steps, dim, o.table)
    }
}
