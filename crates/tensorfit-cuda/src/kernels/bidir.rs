//! The ops a bidirectional recurrent layer is built from, which only move values:
//! `reverse_time`, `concat_features` and `slice_features` (kernels in `bidir.cu`), as the
//! CPU's `kernels/bidir.rs` computes them: one thread per element written.

use tensorfit_core::Result;

use super::{count, int, Gpu, COPY_FEATURES, REVERSE_TIME};
use crate::backend_error;
use crate::driver::{Arg, DevPtr};

/// `y[t, b] = x[reversed_step(t, L_b), b]` for `x`, `y` `[T, B, F]` (`dims`), `L_b` from
/// `lengths` if given, else `T`.
pub fn reverse_time(
    g: &Gpu<'_>,
    [x, y]: [DevPtr; 2],
    lengths: Option<DevPtr>,
    (steps, batch, width): (usize, usize, usize),
) -> Result<()> {
    let args = [
        Arg::Ptr(x),
        Arg::Ptr(y),
        // Null: every row has `steps` steps.
        Arg::Ptr(lengths.unwrap_or(DevPtr(0))),
        Arg::I32(int("steps", steps)?),
        Arg::I32(int("batch", batch)?),
        Arg::I32(int("width", width)?),
    ];
    g.launch_1d(
        REVERSE_TIME,
        count(steps) * count(batch) * count(width),
        &args,
    )
}

/// `out[r] = [a[r], b[r]]` for `rows` rows of `a` `[rows, Fa]`, `b` `[rows, Fb]`.
pub fn concat_features(
    g: &Gpu<'_>,
    rows: usize,
    [(a, fa), (b, fb)]: [(DevPtr, usize); 2],
    out: DevPtr,
) -> Result<()> {
    let width = fa + fb;
    copy_features(g, rows, (a, fa, 0), (out, width, 0), fa)?;
    copy_features(g, rows, (b, fb, 0), (out, width, fa), fb)
}

/// `out[r] = x[r, start..start + width]` for every row of `x` `[rows, features]`.
pub fn slice_features(
    g: &Gpu<'_>,
    (start, width): (usize, usize),
    (x, rows, features): (DevPtr, usize, usize),
    out: DevPtr,
) -> Result<()> {
    if width == 0 || start.checked_add(width).is_none_or(|end| end > features) {
        return Err(backend_error(format!(
            "slice_features: features {start}.. (width {width}) are not inside rows of {features}"
        )));
    }
    copy_features(g, rows, (x, features, start), (out, width, 0), width)
}

/// `dst[r, dst_col + j] = src[r, src_col + j]` for `j < width` and every row, `src` a
/// `[rows, src_ld]` matrix and `dst` a `[rows, dst_ld]` one.
fn copy_features(
    g: &Gpu<'_>,
    rows: usize,
    (src, src_ld, src_col): (DevPtr, usize, usize),
    (dst, dst_ld, dst_col): (DevPtr, usize, usize),
    width: usize,
) -> Result<()> {
    let args = [
        Arg::Ptr(src),
        Arg::Ptr(dst),
        Arg::I64(count(rows)),
        Arg::I32(int("width", width)?),
        Arg::I32(int("row length", src_ld)?),
        Arg::I32(int("first feature", src_col)?),
        Arg::I32(int("row length", dst_ld)?),
        Arg::I32(int("first feature", dst_col)?),
    ];
    g.launch_1d(COPY_FEATURES, count(rows) * count(width), &args)
}
