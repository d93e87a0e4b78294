//! The ops a 1-D convolution over time is built from: `unfold_time` and its gradient
//! `fold_time` (kernels in `conv.cu`), and `reshape` (a device copy), as the CPU's
//! `kernels/conv.rs` computes them.

use tensorfit_core::args::*;
use tensorfit_core::{ConvKernels, ConvTaps, Error, Result, Shape};

use super::{count, elementwise, int, Gpu, FOLD_TIME, UNFOLD_TIME};
use crate::driver::{Arg, DevPtr};

/// `(T, B, C)`: the steps, batch rows and features of a sequence.
type Dims = (usize, usize, usize);

/// The sizes and taps as the kernels' `int` parameters (steps, batch, channels, kernel,
/// dilation, left), the taps checked and every step index the kernels form
/// (`t + k·dilation`) within `int`.
fn sizes(kernel: &str, taps: ConvTaps, (steps, batch, channels): Dims) -> Result<[Arg; 6]> {
    taps.check()
        .map_err(|m| Error::Input(format!("{kernel}: {m}")))?;
    let span = taps.span().unwrap_or(usize::MAX);
    int("steps + (kernel - 1)·dilation", steps.saturating_add(span))?;
    Ok([
        Arg::I32(int("steps", steps)?),
        Arg::I32(int("batch", batch)?),
        Arg::I32(int("channels", channels)?),
        Arg::I32(int("kernel", taps.kernel)?),
        Arg::I32(int("dilation", taps.dilation)?),
        Arg::I32(int("left", taps.left)?),
    ])
}

/// `lengths`, or null: every row has `T` steps.
fn lengths_arg(lengths: Option<DevPtr>) -> Arg {
    Arg::Ptr(lengths.unwrap_or(DevPtr(0)))
}

/// `cols[t, b, c·K + k] = x[t - left + k·dilation, b, c]` inside the row's `L_b` steps,
/// else 0, for `x` `[T, B, C]` (`dims`) and `cols` `[T, B, C·K]`.
pub fn unfold_time(
    g: &Gpu<'_>,
    taps: ConvTaps,
    [x, cols]: [DevPtr; 2],
    lengths: Option<DevPtr>,
    dims @ (steps, batch, channels): Dims,
) -> Result<()> {
    let [t, b, c, k, d, l] = sizes("unfold_time", taps, dims)?;
    let args = [
        Arg::Ptr(x),
        lengths_arg(lengths),
        Arg::Ptr(cols),
        t,
        b,
        c,
        k,
        d,
        l,
    ];
    let n = count(steps) * count(batch) * count(channels) * count(taps.kernel);
    g.launch_1d(UNFOLD_TIME, n, &args)
}

/// `dx[s, b, c] = Σ_k dcols[s + left - k·dilation, b, c·K + k]` over the taps whose step
/// lies inside the row's `L_b` steps, 0 for `s ≥ L_b`, for `dcols` `[T, B, C·K]` and `dx`
/// `[T, B, C]` (`dims`).
pub fn fold_time(
    g: &Gpu<'_>,
    taps: ConvTaps,
    [dcols, dx]: [DevPtr; 2],
    lengths: Option<DevPtr>,
    dims @ (steps, batch, channels): Dims,
) -> Result<()> {
    let [t, b, c, k, d, l] = sizes("fold_time", taps, dims)?;
    let args = [
        Arg::Ptr(dcols),
        lengths_arg(lengths),
        Arg::Ptr(dx),
        t,
        b,
        c,
        k,
        d,
        l,
    ];
    g.launch_1d(
        FOLD_TIME,
        count(steps) * count(batch) * count(channels),
        &args,
    )
}

impl<'g> ConvKernels for Gpu<'g> {
    fn unfold_time(
        &mut self,
        taps: ConvTaps,
        s: UnfoldTimeInputs<&Shape>,
        i: UnfoldTimeInputs<DevPtr>,
        o: UnfoldTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        unfold_time(self, taps, [i.x, o.cols], i.lengths, dims)
    }

    fn fold_time(
        &mut self,
        taps: ConvTaps,
        s: FoldTimeInputs<&Shape>,
        i: FoldTimeInputs<DevPtr>,
        o: FoldTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let channels = s.dcols.dim(2) / taps.kernel.max(1);
        let dims = (s.dcols.dim(0), s.dcols.dim(1), channels);
        fold_time(self, taps, [i.dcols, o.dx], i.lengths, dims)
    }

    fn reshape(
        &mut self,
        _: &Shape,
        s: ReshapeInputs<&Shape>,
        i: ReshapeInputs<DevPtr>,
        o: ReshapeOutputs<DevPtr>,
    ) -> Result<()> {
        elementwise::copy(self, i.x, o.out, s.x.numel())
    }
}
