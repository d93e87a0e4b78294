//! Elementwise launchers and the small data-movement ops: `binary`, `activation_forward`,
//! `activation_backward`, `sum_to_shape` (kernels in `elementwise.cu`), and `fill`,
//! `slice_time`, `scatter_time`, `copy`, which are driver memsets and device-to-device
//! copies, no kernel needed.
//!
//! Broadcasting is the op set's one kind: `b`'s shape is a suffix of `a`'s, so `b`
//! repeats every `b.len()` elements of `a`.

use tensorfit_core::{Activation, BinaryOp, Result};

use super::{count, int, Gpu};
use super::{ACTIVATION_BACKWARD, ACTIVATION_FORWARD, BINARY, SUM_TO_SHAPE};
use crate::backend_error;
use crate::driver::{Arg, DevPtr};

/// `out = a ∘ b` over `n` elements, `b` (`nb` elements, dividing `n`) repeated.
pub fn binary(
    g: &Gpu<'_>,
    op: BinaryOp,
    a: DevPtr,
    b: DevPtr,
    out: DevPtr,
    n: usize,
    nb: usize,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    if nb == 0 || !n.is_multiple_of(nb) {
        return Err(backend_error(format!(
            "binary: b ({nb} elements) does not tile a ({n} elements)"
        )));
    }
    let code = match op {
        BinaryOp::Add => 0,
        BinaryOp::Mul => 1,
    };
    g.launch_1d(
        BINARY,
        count(n),
        &[
            Arg::I32(code),
            Arg::Ptr(a),
            Arg::Ptr(b),
            Arg::Ptr(out),
            Arg::I64(count(n)),
            Arg::I64(count(nb)),
        ],
    )
}

fn activation_code(f: Activation) -> i32 {
    match f {
        Activation::Identity => 0,
        Activation::Relu => 1,
        Activation::Tanh => 2,
        Activation::Sigmoid => 3,
        Activation::Gelu => 4,
    }
}

/// `y = f(x)` over `n` elements.
pub fn activation_forward(
    g: &Gpu<'_>,
    f: Activation,
    x: DevPtr,
    y: DevPtr,
    n: usize,
) -> Result<()> {
    activation(g, ACTIVATION_FORWARD, f, &[x, y], n)
}

/// `dx = dy · f'(x)`, with `f'` computed from the forward output `y`, or from the input
/// `x` for an activation that needs it (GELU; given exactly then): the kernel reads
/// whichever of the two `f'` is written with.
pub fn activation_backward(
    g: &Gpu<'_>,
    f: Activation,
    [y, dy, dx]: [DevPtr; 3],
    x: Option<DevPtr>,
    n: usize,
) -> Result<()> {
    let from = match (f.needs_input(), x) {
        (true, Some(x)) => x,
        (false, None) => y,
        (needs, _) => {
            let what = if needs { "needs" } else { "takes no" };
            return Err(backend_error(format!(
                "activation_backward: {} {what} x",
                f.name()
            )));
        }
    };
    activation(g, ACTIVATION_BACKWARD, f, &[from, dy, dx], n)
}

/// Launches activation kernel `kernel` over `n` elements: its arguments are `f`'s code,
/// `tensors`, then the count (see elementwise.cu).
fn activation(
    g: &Gpu<'_>,
    kernel: &str,
    f: Activation,
    tensors: &[DevPtr],
    n: usize,
) -> Result<()> {
    let mut args = vec![Arg::I32(activation_code(f))];
    args.extend(tensors.iter().map(|&p| Arg::Ptr(p)));
    args.push(Arg::I64(count(n)));
    g.launch_1d(kernel, count(n), &args)
}

/// `out[j] = Σ_i x[i, j]` for `x` `[rows, width]` (also the LSTM's bias gradient).
pub fn sum_to_shape(g: &Gpu<'_>, x: DevPtr, out: DevPtr, rows: usize, width: usize) -> Result<()> {
    if width == 0 {
        return Ok(());
    }
    let w = int("sum_to_shape width", width)?;
    let blocks = width.div_ceil(32) as u32;
    g.launch(
        SUM_TO_SHAPE,
        (blocks, 1, 1),
        (32, 32, 1),
        &[
            Arg::Ptr(x),
            Arg::Ptr(out),
            Arg::I64(count(rows)),
            Arg::I32(w),
        ],
    )
}

/// Every element of `out` (`n` elements) set to `value`.
pub fn fill(g: &Gpu<'_>, value: f32, out: DevPtr, n: usize) -> Result<()> {
    g.fill(out, value, n)
}

/// The block of time step `t` (`step` elements) of a sequence into `out`.
pub fn slice_time(g: &Gpu<'_>, t: usize, x: DevPtr, out: DevPtr, step: usize) -> Result<()> {
    g.copy(out, x.add(t * step), step)
}

/// `out` (`steps` blocks of `step` elements) zero except block `t`, which gets `x`.
pub fn scatter_time(
    g: &Gpu<'_>,
    t: usize,
    x: DevPtr,
    out: DevPtr,
    step: usize,
    steps: usize,
) -> Result<()> {
    g.fill(out, 0.0, step * steps)?;
    g.copy(out.add(t * step), x, step)
}

/// `dst = src` (`n` elements; an update op: `dst` is an existing tensor).
pub fn copy(g: &Gpu<'_>, src: DevPtr, dst: DevPtr, n: usize) -> Result<()> {
    g.copy(dst, src, n)
}
