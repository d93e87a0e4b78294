//! An op's tensors by name: the unpacking every backend does before calling a kernel.
//!
//! A backend receives an op's tensors as two lists, inputs and outputs, in the order
//! [`Op`] documents, and its kernels want them by name. This module does that once for
//! every backend, generic over what a backend holds per tensor (host slices on the CPU,
//! buffer regions on wgpu, device addresses on CUDA), so the argument order of each op is
//! written down here, next to `Op`, and every backend reports a wrong count with the same
//! message. Errors are plain strings; each backend wraps them in its own error.

use crate::backend::TensorView;
use crate::op::{LstmDims, Op};

/// The items of one kind (`what`: "inputs" or "outputs") as a fixed-size array.
pub fn arity<T, const N: usize>(op: &Op, what: &str, items: Vec<T>) -> Result<[T; N], String> {
    let n = items.len();
    items
        .try_into()
        .map_err(|_| format!("{}: expected {N} {what}, got {n}", op.name()))
}

/// `N` required items and one optional last item (`cells`, `dx`).
pub fn arity_optional<T, const N: usize>(
    op: &Op,
    what: &str,
    mut items: Vec<T>,
) -> Result<([T; N], Option<T>), String> {
    if items.len() > N + 1 {
        return Err(format!(
            "{}: expected at most {} {what}, got {}",
            op.name(),
            N + 1,
            items.len()
        ));
    }
    let last = if items.len() > N { items.pop() } else { None };
    Ok((arity(op, what, items)?, last))
}

/// The two dimensions of a matrix view.
pub fn dims2(view: &TensorView) -> [usize; 2] {
    [view.shape.dim(0), view.shape.dim(1)]
}

/// The sizes of the LSTM layer whose input views (forward or backward) are `views`.
pub fn lstm_dims(op: &Op, views: &[TensorView]) -> Result<LstmDims, String> {
    // The forward reads its biases' shapes too; the backward has none.
    let read = if matches!(op, Op::LstmForward { .. }) {
        7
    } else {
        5
    };
    let shapes: Vec<_> = views.iter().take(read).map(|v| &v.shape).collect();
    if shapes.len() < 5 {
        return Err(format!(
            "{}: expected LSTM inputs, got {}",
            op.name(),
            shapes.len()
        ));
    }
    LstmDims::from_inputs(&shapes).map_err(|m| format!("{}: {m}", op.name()))
}

/// The inputs of `Op::LstmForward`: `x` `[T, B, I]`, `h0`, `c0` `[B, H]`, `w_ih`
/// `[4H, I]`, `w_hh` `[4H, H]`, `b_ih`, `b_hh` `[4H]`.
#[derive(Debug, Clone, Copy)]
pub struct LstmForwardInputs<T> {
    pub x: T,
    pub h0: T,
    pub c0: T,
    pub w_ih: T,
    pub w_hh: T,
    pub b_ih: T,
    pub b_hh: T,
}

/// The outputs of `Op::LstmForward`: `y` `[T, B, H]`, `h_n`, `c_n` `[B, H]`, `gates`
/// `[T, B, 4H]` (activated), and `cells` `[T, B, H]` when kept for backward.
#[derive(Debug, Clone, Copy)]
pub struct LstmForwardOutputs<T> {
    pub y: T,
    pub h_n: T,
    pub c_n: T,
    pub gates: T,
    pub cells: Option<T>,
}

/// The inputs of `Op::LstmBackward`: the forward's `x`, `h0`, `c0`, `w_ih`, `w_hh`, its
/// outputs `y`, `gates`, `cells`, and the gradients arriving at `y`, `h_n` and `c_n`.
#[derive(Debug, Clone, Copy)]
pub struct LstmBackwardInputs<T> {
    pub x: T,
    pub h0: T,
    pub c0: T,
    pub w_ih: T,
    pub w_hh: T,
    pub y: T,
    pub gates: T,
    pub cells: T,
    pub dy: T,
    pub dh_n: T,
    pub dc_n: T,
}

/// The outputs of `Op::LstmBackward`: `dgates` `[T, B, 4H]` (pre-activation), `dh0`,
/// `dc0` `[B, H]`, `dw_ih` `[4H, I]`, `dw_hh` `[4H, H]`, `db` `[4H]`, and `dx`
/// `[T, B, I]` when the input gradient is wanted.
#[derive(Debug, Clone, Copy)]
pub struct LstmBackwardOutputs<T> {
    pub dgates: T,
    pub dh0: T,
    pub dc0: T,
    pub dw_ih: T,
    pub dw_hh: T,
    pub db: T,
    pub dx: Option<T>,
}

/// Each item with its name and the number of elements it has for a layer of `d`, for
/// kernels that check the lengths they are handed.
pub type Expected<'a, T> = Vec<(&'static str, &'a T, usize)>;

impl<T> LstmForwardInputs<T> {
    pub fn from_vec(op: &Op, items: Vec<T>) -> Result<Self, String> {
        let [x, h0, c0, w_ih, w_hh, b_ih, b_hh] = arity(op, "inputs", items)?;
        Ok(LstmForwardInputs {
            x,
            h0,
            c0,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
        })
    }

    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let mut e = layer_inputs(d, [&self.x, &self.h0, &self.c0, &self.w_ih, &self.w_hh]);
        e.extend([
            ("b_ih", &self.b_ih, 4 * d.hidden),
            ("b_hh", &self.b_hh, 4 * d.hidden),
        ]);
        e
    }
}

impl<T> LstmForwardOutputs<T> {
    pub fn from_vec(op: &Op, items: Vec<T>) -> Result<Self, String> {
        let ([y, h_n, c_n, gates], cells) = arity_optional(op, "outputs", items)?;
        Ok(LstmForwardOutputs {
            y,
            h_n,
            c_n,
            gates,
            cells,
        })
    }

    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let (rows, state) = (d.steps * d.batch, d.batch * d.hidden);
        let mut e = vec![
            ("y", &self.y, rows * d.hidden),
            ("h_n", &self.h_n, state),
            ("c_n", &self.c_n, state),
            ("gates", &self.gates, rows * 4 * d.hidden),
        ];
        e.extend(self.cells.as_ref().map(|c| ("cells", c, rows * d.hidden)));
        e
    }
}

impl<T> LstmBackwardInputs<T> {
    pub fn from_vec(op: &Op, items: Vec<T>) -> Result<Self, String> {
        let [x, h0, c0, w_ih, w_hh, y, gates, cells, dy, dh_n, dc_n] = arity(op, "inputs", items)?;
        Ok(LstmBackwardInputs {
            x,
            h0,
            c0,
            w_ih,
            w_hh,
            y,
            gates,
            cells,
            dy,
            dh_n,
            dc_n,
        })
    }

    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let (rows, h4, state) = (d.steps * d.batch, 4 * d.hidden, d.batch * d.hidden);
        let mut e = layer_inputs(d, [&self.x, &self.h0, &self.c0, &self.w_ih, &self.w_hh]);
        e.extend([
            ("y", &self.y, rows * d.hidden),
            ("gates", &self.gates, rows * h4),
            ("cells", &self.cells, rows * d.hidden),
            ("dy", &self.dy, rows * d.hidden),
            ("dh_n", &self.dh_n, state),
            ("dc_n", &self.dc_n, state),
        ]);
        e
    }
}

/// The first five inputs of both LSTM ops, `x, h0, c0, w_ih, w_hh`, with their lengths.
fn layer_inputs<T>(d: LstmDims, [x, h0, c0, w_ih, w_hh]: [&T; 5]) -> Expected<'_, T> {
    let (rows, h4, state) = (d.steps * d.batch, 4 * d.hidden, d.batch * d.hidden);
    vec![
        ("x", x, rows * d.input),
        ("h0", h0, state),
        ("c0", c0, state),
        ("w_ih", w_ih, h4 * d.input),
        ("w_hh", w_hh, h4 * d.hidden),
    ]
}

impl<T> LstmBackwardOutputs<T> {
    pub fn from_vec(op: &Op, items: Vec<T>) -> Result<Self, String> {
        let ([dgates, dh0, dc0, dw_ih, dw_hh, db], dx) = arity_optional(op, "outputs", items)?;
        Ok(LstmBackwardOutputs {
            dgates,
            dh0,
            dc0,
            dw_ih,
            dw_hh,
            db,
            dx,
        })
    }

    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let (rows, h4, state) = (d.steps * d.batch, 4 * d.hidden, d.batch * d.hidden);
        let mut e = vec![
            ("dgates", &self.dgates, rows * h4),
            ("dh0", &self.dh0, state),
            ("dc0", &self.dc0, state),
            ("dw_ih", &self.dw_ih, h4 * d.input),
            ("dw_hh", &self.dw_hh, h4 * d.hidden),
            ("db", &self.db, h4),
        ];
        e.extend(self.dx.as_ref().map(|dx| ("dx", dx, rows * d.input)));
        e
    }
}

/// Where the statistics of `Op::BatchNorm` come from; `R` is what a backend reads
/// through, `W` what it writes through.
#[derive(Debug, Clone, Copy)]
pub enum BatchNormStats<R, W> {
    /// Training: the batch mean and biased variance `[C]` are computed and written here.
    Batch { mean: W, var: W },
    /// Inference: the running mean and variance `[C]` are read.
    Running { mean: R, var: R },
}

/// The inputs of `Op::BatchNormBackward`: `x` `[B, C]`, `gamma`, the `mean` and `var`
/// `[C]` the forward used, and `dy` `[B, C]`.
#[derive(Debug, Clone, Copy)]
pub struct BatchNormBackwardInputs<T> {
    pub x: T,
    pub gamma: T,
    pub mean: T,
    pub var: T,
    pub dy: T,
}

impl<T> BatchNormBackwardInputs<T> {
    pub fn from_vec(op: &Op, items: Vec<T>) -> Result<Self, String> {
        let [x, gamma, mean, var, dy] = arity(op, "inputs", items)?;
        Ok(BatchNormBackwardInputs {
            x,
            gamma,
            mean,
            var,
            dy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_counts_are_errors_naming_the_op() {
        let op = Op::LstmForward {
            keep_for_backward: true,
        };
        let e = LstmForwardInputs::from_vec(&op, vec![0u8; 6]).unwrap_err();
        assert_eq!(e, "lstm_forward: expected 7 inputs, got 6");
        let e = LstmForwardOutputs::from_vec(&op, vec![0u8; 6]).unwrap_err();
        assert_eq!(e, "lstm_forward: expected at most 5 outputs, got 6");
        let out = LstmForwardOutputs::from_vec(&op, vec![1u8, 2, 3, 4]).unwrap();
        assert_eq!((out.gates, out.cells), (4, None));
        let out = LstmForwardOutputs::from_vec(&op, vec![1u8, 2, 3, 4, 5]).unwrap();
        assert_eq!(out.cells, Some(5));
        assert!(lstm_dims(&op, &[]).is_err());
    }
}
