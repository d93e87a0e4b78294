//! Global pooling over time, each sequence over its own steps: `mean_time`, `max_time`
//! and their gradients `mean_time_backward`, `max_time_backward` (kernels in `pool.cu`), as
//! the CPU's `kernels/pool.rs` computes them.

use tensorfit_core::args::*;
use tensorfit_core::{PoolKernels, Result, Shape};

use super::{count, int, Gpu, MAX_TIME, MAX_TIME_BACKWARD, MEAN_TIME, MEAN_TIME_BACKWARD};
use crate::driver::{Arg, DevPtr};

/// `(T, B, F)`: the steps, batch rows and features of a pooled sequence.
type Dims = (usize, usize, usize);

/// The sizes as the kernels' `int` parameters.
fn sizes((steps, batch, width): Dims) -> Result<[Arg; 3]> {
    Ok([
        Arg::I32(int("steps", steps)?),
        Arg::I32(int("batch", batch)?),
        Arg::I32(int("width", width)?),
    ])
}

/// `lengths`, or null: every row has `T` steps.
fn lengths_arg(lengths: Option<DevPtr>) -> Arg {
    Arg::Ptr(lengths.unwrap_or(DevPtr(0)))
}

/// `out[b] = (1 / L_b) Σ_{t < L_b} x[t, b]` for `x` `[T, B, F]` (`dims`), `out` `[B, F]`,
/// `L_b` from `lengths` if given, else `T`; 0 for `L_b = 0`.
pub fn mean_time(
    g: &Gpu<'_>,
    [x, out]: [DevPtr; 2],
    lengths: Option<DevPtr>,
    dims: Dims,
) -> Result<()> {
    let [steps, batch, width] = sizes(dims)?;
    let args = [
        Arg::Ptr(x),
        lengths_arg(lengths),
        Arg::Ptr(out),
        steps,
        batch,
        width,
    ];
    g.launch_1d(MEAN_TIME, count(dims.1) * count(dims.2), &args)
}

/// `out[b, f] = max_{t < L_b} x[t, b, f]` and `at[b, f]` the first step holding it; 0 and
/// -1 for `L_b = 0`.
pub fn max_time(
    g: &Gpu<'_>,
    [x, out, at]: [DevPtr; 3],
    lengths: Option<DevPtr>,
    dims: Dims,
) -> Result<()> {
    let [steps, batch, width] = sizes(dims)?;
    let args = [
        Arg::Ptr(x),
        lengths_arg(lengths),
        Arg::Ptr(out),
        Arg::Ptr(at),
        steps,
        batch,
        width,
    ];
    g.launch_1d(MAX_TIME, count(dims.1) * count(dims.2), &args)
}

/// `dx[t, b] = dout[b] / L_b` for `t < L_b`, else 0, with `dx` `[T, B, F]` (`dims`).
pub fn mean_time_backward(
    g: &Gpu<'_>,
    [dout, dx]: [DevPtr; 2],
    lengths: Option<DevPtr>,
    dims: Dims,
) -> Result<()> {
    let [steps, batch, width] = sizes(dims)?;
    let args = [
        Arg::Ptr(dout),
        lengths_arg(lengths),
        Arg::Ptr(dx),
        steps,
        batch,
        width,
    ];
    let n = count(dims.0) * count(dims.1) * count(dims.2);
    g.launch_1d(MEAN_TIME_BACKWARD, n, &args)
}

/// `dx` `[T, B, F]` (`dims`) zero except `dx[at[b, f], b, f] = dout[b, f]`; an `at`
/// outside `0..T` places nothing.
pub fn max_time_backward(g: &Gpu<'_>, [dout, at, dx]: [DevPtr; 3], dims: Dims) -> Result<()> {
    let [steps, batch, width] = sizes(dims)?;
    let args = [
        Arg::Ptr(dout),
        Arg::Ptr(at),
        Arg::Ptr(dx),
        steps,
        batch,
        width,
    ];
    let n = count(dims.0) * count(dims.1) * count(dims.2);
    g.launch_1d(MAX_TIME_BACKWARD, n, &args)
}

impl<'g> PoolKernels for Gpu<'g> {
    fn mean_time(
        &mut self,
        s: MeanTimeInputs<&Shape>,
        i: MeanTimeInputs<DevPtr>,
        o: MeanTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        mean_time(self, [i.x, o.out], i.lengths, dims)
    }

    fn mean_time_backward(
        &mut self,
        steps: usize,
        s: MeanTimeBackwardInputs<&Shape>,
        i: MeanTimeBackwardInputs<DevPtr>,
        o: MeanTimeBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        mean_time_backward(self, [i.dout, o.dx], i.lengths, dims)
    }

    fn max_time(
        &mut self,
        s: MaxTimeInputs<&Shape>,
        i: MaxTimeInputs<DevPtr>,
        o: MaxTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        max_time(self, [i.x, o.out, o.at], i.lengths, dims)
    }

    fn max_time_backward(
        &mut self,
        steps: usize,
        s: MaxTimeBackwardInputs<&Shape>,
        i: MaxTimeBackwardInputs<DevPtr>,
        o: MaxTimeBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        max_time_backward(self, [i.dout, i.at, o.dx], dims)
    }
}
