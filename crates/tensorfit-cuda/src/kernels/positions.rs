//! The positions of a sequence: `add_time_rows`, `sum_batch_to_rows` and `sinusoids`
//! (kernels in `positions.cu`), as the CPU's `kernels/positions.rs` computes them.

use tensorfit_core::args::*;
use tensorfit_core::positions_ops::{sinusoid_factors, SINUSOID_FACTORS};
use tensorfit_core::{PositionKernels, Result, Shape};

use super::{count, int, Gpu, ADD_TIME_ROWS, SINUSOIDS, SUM_BATCH_TO_ROWS};
use crate::driver::{Arg, DevPtr};

/// `(T, B, D)`: the steps, batch rows and features of a sequence.
type Dims = (usize, usize, usize);

/// `out[t, b] = x[t, b] + table[t]` for `x`, `out` `[T, B, D]` (`dims`), `table` `[N, D]`
/// (`N >= T`, checked by the shape rule).
pub fn add_time_rows(
    g: &Gpu<'_>,
    [x, table, out]: [DevPtr; 3],
    (steps, batch, width): Dims,
) -> Result<()> {
    let n = count(steps * batch * width);
    let args = [
        Arg::Ptr(x),
        Arg::Ptr(table),
        Arg::Ptr(out),
        Arg::I64(n),
        Arg::I64(count(batch * width)),
        Arg::I32(int("width", width)?),
    ];
    g.launch_1d(ADD_TIME_ROWS, n, &args)
}

/// `dtable[t] = Σ_b dout[t, b]` (in `b` order) for `dout` `[T, B, D]` (`dims`) and
/// `dtable` `[rows, D]`; rows `T..rows` zero.
pub fn sum_batch_to_rows(
    g: &Gpu<'_>,
    [dout, dtable]: [DevPtr; 2],
    (steps, batch, width): Dims,
    rows: usize,
) -> Result<()> {
    let args = [
        Arg::Ptr(dout),
        Arg::Ptr(dtable),
        Arg::I32(int("steps", steps)?),
        Arg::I32(int("batch", batch)?),
        Arg::I32(int("width", width)?),
        Arg::I32(int("rows", rows)?),
    ];
    g.launch_1d(SUM_BATCH_TO_ROWS, count(rows * width), &args)
}

/// `table[p, 2i] = sin(p · w_i)`, `table[p, 2i + 1] = cos(p · w_i)` for `table`
/// `[steps, dim]`, `w_i` from the factors every backend multiplies.
pub fn sinusoids(g: &Gpu<'_>, table: DevPtr, steps: usize, dim: usize) -> Result<()> {
    let mut factors = sinusoid_factors(dim);
    factors.resize(SINUSOID_FACTORS, 1.0);
    let n = count(steps * dim);
    let mut args = vec![Arg::Ptr(table), Arg::I64(n), Arg::I32(int("dim", dim)?)];
    args.extend(factors.into_iter().map(Arg::F32));
    g.launch_1d(SINUSOIDS, n, &args)
}

impl<'g> PositionKernels for Gpu<'g> {
    fn add_time_rows(
        &mut self,
        s: AddTimeRowsInputs<&Shape>,
        i: AddTimeRowsInputs<DevPtr>,
        o: AddTimeRowsOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        add_time_rows(self, [i.x, i.table, o.out], dims)
    }

    fn sum_batch_to_rows(
        &mut self,
        rows: usize,
        s: SumBatchToRowsInputs<&Shape>,
        i: SumBatchToRowsInputs<DevPtr>,
        o: SumBatchToRowsOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (s.dout.dim(0), s.dout.dim(1), s.dout.dim(2));
        sum_batch_to_rows(self, [i.dout, o.dtable], dims, rows)
    }

    fn sinusoids(&mut self, steps: usize, dim: usize, o: SinusoidsOutputs<DevPtr>) -> Result<()> {
        sinusoids(self, o.table, steps, dim)
    }
}
