//! Elementwise kernels and the small data-movement ops: `binary`, `activation_forward`,
//! `activation_backward`, `sum_to_shape`, `fill`, `slice_time`, `scatter_time`, `copy`
//! (shaders/elementwise.wgsl). As on the CPU, the one kind of broadcast is a second
//! operand whose shape is a suffix of the first's: it repeats over the first's rows.
//!
//! Every op here is split the same way: element ranges of at most one binding's span
//! ([`chunks`], through [`per_element`]), or blocks of rows ([`rects`]) when a row-wise
//! operand is involved.

use std::ops::Range;

use tensorfit_core::{Activation, BinaryOp, Result};

use super::{bits, block_values, word, Launches};
use crate::backend_error;
use crate::shaders::{
    Kernel, ACTIVATION_BACKWARD, ACTIVATION_FORWARD, BINARY, COPY, FILL, SCATTER_TIME, SUM_TO_SHAPE,
};
use crate::window::{chunks, rects, Operand, Rect, Region, LOOP_BUDGET};

/// Checks that `r` (called `what` in the message of kernel `kernel`) has `want` elements.
pub(crate) fn check_len(kernel: &str, what: &str, r: Region, want: usize) -> Result<()> {
    if r.len == want {
        Ok(())
    } else {
        Err(backend_error(format!(
            "{kernel}: `{what}` has {} elements, expected {want}",
            r.len
        )))
    }
}

/// Launches of `kernel` over elements `0..n` of every region in `regions` alike, in
/// chunks of at most one binding's span; each launch's parameters are the chunk's start
/// and length, then `extra`.
pub(crate) fn per_element(
    l: &mut Launches,
    kernel: &'static Kernel,
    regions: &[Region],
    n: usize,
    extra: &[u32],
) {
    for c in chunks(n, l.span()) {
        let ops = regions
            .iter()
            .map(|&r| Operand::part(r, c.clone()))
            .collect();
        let mut values = vec![word(c.start), word(c.len())];
        values.extend_from_slice(extra);
        l.push(kernel, ops, values, c.len());
    }
}

/// The shader's code for an activation.
fn activation_code(f: Activation) -> u32 {
    match f {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Tanh => 2,
        Activation::Sigmoid => 3,
        Activation::Gelu => 4,
    }
}

/// `out = a ∘ b`, with `b` repeated over `a`'s leading dimensions.
pub(crate) fn binary(
    l: &mut Launches,
    op: BinaryOp,
    a: Region,
    b: Region,
    out: Region,
) -> Result<()> {
    check_len("binary", "out", out, a.len)?;
    if a.len == 0 {
        return Ok(());
    }
    if b.len == 0 || !a.len.is_multiple_of(b.len) {
        return Err(backend_error(format!(
            "binary: b ({} elements) does not tile a ({} elements)",
            b.len, a.len
        )));
    }
    let code = match op {
        BinaryOp::Add => 0,
        BinaryOp::Mul => 1,
    };
    let cols = b.len;
    for r in rects(a.len / cols, cols, l.span(), usize::MAX) {
        let touched = r.touched(cols);
        let ops = vec![
            Operand::part(a, touched.clone()),
            Operand::part(b, r.cols.clone()),
            Operand::part(out, touched),
        ];
        let mut values = block_values(&r, cols);
        values.push(code);
        l.push(&BINARY, ops, values, r.len());
    }
    Ok(())
}

/// `y = f(x)`.
pub(crate) fn activation_forward(
    l: &mut Launches,
    f: Activation,
    x: Region,
    y: Region,
) -> Result<()> {
    check_len("activation_forward", "y", y, x.len)?;
    let code = [activation_code(f)];
    per_element(l, &ACTIVATION_FORWARD, &[x, y], x.len, &code);
    Ok(())
}

/// `dx = dy · f'(x)`, with `f'` computed from the forward output `y`, or from the input
/// `x` for an activation that needs it (GELU; given exactly then): the kernel's first
/// binding is whichever of the two `f'` reads.
pub(crate) fn activation_backward(
    l: &mut Launches,
    f: Activation,
    y: Region,
    x: Option<Region>,
    dy: Region,
    dx: Region,
) -> Result<()> {
    const K: &str = "activation_backward";
    check_len(K, "dy", dy, y.len)?;
    check_len(K, "dx", dx, y.len)?;
    let from = match (f.needs_input(), x) {
        (true, Some(x)) => {
            check_len(K, "x", x, y.len)?;
            x
        }
        (false, None) => y,
        (needs, _) => {
            let what = if needs { "needs" } else { "takes no" };
            return Err(backend_error(format!("{K}: {} {what} x", f.name())));
        }
    };
    let code = [activation_code(f)];
    per_element(l, &ACTIVATION_BACKWARD, &[from, dy, dx], y.len, &code);
    Ok(())
}

/// `out[j] = Σ_i x[i, j]`: sums `x` over the leading dimensions that `out` lacks.
pub(crate) fn sum_to_shape(l: &mut Launches, x: Region, out: Region) -> Result<()> {
    if out.len == 0 || !x.len.is_multiple_of(out.len) {
        if x.len == 0 {
            return Ok(());
        }
        return Err(backend_error(format!(
            "sum_to_shape: {} elements do not reduce to {}",
            x.len, out.len
        )));
    }
    let cols = out.len;
    let rows = x.len / cols;
    if rows == 0 {
        fill(l, 0.0, out);
        return Ok(());
    }
    sum_rows(l, x, rows, cols, out, 1.0);
    Ok(())
}

/// `out[j] = scale · Σ_i x[i, j]` for `x` `[rows, cols]` (also the LSTM's bias gradient,
/// and with `scale = 1/B` batchnorm's batch mean).
pub(crate) fn sum_rows(
    l: &mut Launches,
    x: Region,
    rows: usize,
    cols: usize,
    out: Region,
    scale: f32,
) {
    for r in rects(rows, cols, l.span(), LOOP_BUDGET) {
        let ops = vec![
            Operand::part(x, r.touched(cols)),
            Operand::part(out, r.cols.clone()),
        ];
        let values = reduction_values(&r, rows, cols, scale);
        l.push(&SUM_TO_SHAPE, ops, values, r.cols.len());
    }
}

/// The parameters of a column sum over block `r` of `[rows, cols]` (blocks visited in
/// row order): the block, whether it adds to the earlier blocks' sums, and the factor of
/// the result (`scale` on the last block, 1 before it).
pub(crate) fn reduction_values(r: &Rect, rows: usize, cols: usize, scale: f32) -> Vec<u32> {
    let mut values = block_values(r, cols);
    let factor = if r.rows.end == rows { scale } else { 1.0 };
    values.extend([u32::from(r.rows.start > 0), bits(factor)]);
    values
}

/// Every element of `out` set to `value`.
pub(crate) fn fill(l: &mut Launches, value: f32, out: Region) {
    per_element(l, &FILL, &[out], out.len, &[bits(value)]);
}

/// The block of time step `t` of `x` `[T, B, F]` into `out` `[B, F]`.
pub(crate) fn slice_time(l: &mut Launches, t: usize, x: Region, out: Region) -> Result<()> {
    let block = time_block(t, out.len, x.len, "slice_time")?;
    copy_range(l, x, block.start, out);
    Ok(())
}

/// `out` `[steps, B, F]` zero except `out[t] = x`.
pub(crate) fn scatter_time(l: &mut Launches, t: usize, x: Region, out: Region) -> Result<()> {
    let block = time_block(t, x.len, out.len, "scatter_time")?;
    for c in chunks(out.len, l.span()) {
        let start = c.start.max(block.start);
        let end = c.end.min(block.end);
        let from_x = if start < end {
            start - block.start..end - block.start
        } else {
            0..0
        };
        let ops = vec![Operand::part(x, from_x), Operand::part(out, c.clone())];
        let values = vec![word(c.start), word(c.len()), word(block.start), word(x.len)];
        l.push(&SCATTER_TIME, ops, values, c.len());
    }
    Ok(())
}

/// `dst = src` (an update op: `dst` is an existing tensor).
pub(crate) fn copy(l: &mut Launches, src: Region, dst: Region) -> Result<()> {
    check_len("copy", "dst", dst, src.len)?;
    copy_range(l, src, 0, dst);
    Ok(())
}

/// `dst[i] = src[from + i]` for every element of `dst` (the `copy` kernel). Used by
/// `slice_time`, `copy` and the LSTM for its state.
pub(crate) fn copy_range(l: &mut Launches, src: Region, from: usize, dst: Region) {
    for c in chunks(dst.len, l.span()) {
        let ops = vec![
            Operand::part(src, from + c.start..from + c.end),
            Operand::part(dst, c.clone()),
        ];
        let values = vec![word(from), word(c.start), word(c.len())];
        l.push(&COPY, ops, values, c.len());
    }
}

/// The element range of step `t` in a sequence of `seq_len` elements cut in steps of
/// `step`.
fn time_block(t: usize, step: usize, seq_len: usize, kernel: &str) -> Result<Range<usize>> {
    let start = t.checked_mul(step);
    match start.and_then(|s| s.checked_add(step)) {
        Some(end) if end <= seq_len && (step == 0 || seq_len.is_multiple_of(step)) => {
            Ok(end - step..end)
        }
        _ => Err(backend_error(format!(
            "{kernel}: step {t} of {step} elements outside a sequence of {seq_len}"
        ))),
    }
}
