//! [`LstmDims`]: the sizes of an LSTM layer, read once off its inputs' shapes, which every
//! backend's LSTM kernels use instead of working them out again (and whether the layer
//! reads token ids). What every recurrent cell shares is [`RecurrentDims`]'s.

use crate::args::{
    Args, Expected, LstmBackwardInputs, LstmBackwardOutputs, LstmForwardInputs, LstmForwardOutputs,
};
use crate::op::same;
use crate::recurrent_dims::{check_input, check_input_grad, RecurrentDims};
use crate::seq_lengths::check_shape;
use crate::shape::Shape;

/// Sizes of an LSTM layer read off its inputs `x, h0, c0, w_ih, w_hh, ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmDims {
    pub steps: usize,
    pub batch: usize,
    /// Features per step, or with token input the vocabulary (`w_ih`'s columns).
    pub input: usize,
    pub hidden: usize,
    /// Token input: `x` is `[T, B]` ids, not `[T, B, I]` features.
    pub tokens: bool,
}

impl LstmDims {
    /// [`Op::LstmForward`](crate::Op::LstmForward)'s output shapes, its inputs checked.
    pub(crate) fn forward_shapes(
        i: LstmForwardInputs<&Shape>,
        keep_for_backward: bool,
    ) -> Result<Vec<Shape>, String> {
        let l = LstmDims::checked(i.x, i.h0, i.c0, i.w_ih, i.w_hh)?;
        let b = Shape::from([l.gate_width()]);
        same(i.b_ih, &b, "b_ih")?;
        same(i.b_hh, &b, "b_hh")?;
        check_shape(i.lengths, l.batch)?;
        let outputs = LstmForwardOutputs {
            y: l.seq(l.hidden),
            h_n: l.state(),
            c_n: l.state(),
            gates: l.gates(keep_for_backward),
            cells: keep_for_backward.then(|| l.seq(l.hidden)),
        };
        Ok(outputs.into_vec())
    }

    /// [`Op::LstmBackward`](crate::Op::LstmBackward)'s output shapes, its inputs checked.
    pub(crate) fn backward_shapes(
        i: LstmBackwardInputs<&Shape>,
        input_grad: bool,
    ) -> Result<Vec<Shape>, String> {
        let l = LstmDims::checked(i.x, i.h0, i.c0, i.w_ih, i.w_hh)?;
        check_input_grad(&l, input_grad)?;
        let g = l.gate_width();
        same(i.y, &l.seq(l.hidden), "y")?;
        same(i.gates, &l.seq(g), "gates")?;
        same(i.cells, &l.seq(l.hidden), "cells")?;
        same(i.dy, &l.seq(l.hidden), "dy")?;
        same(i.dh_n, &l.state(), "dh_n")?;
        same(i.dc_n, &l.state(), "dc_n")?;
        check_shape(i.lengths, l.batch)?;
        let outputs = LstmBackwardOutputs {
            dgates: l.seq(g),
            dh0: l.state(),
            dc0: l.state(),
            dw_ih: Shape::from([g, l.input]),
            dw_hh: Shape::from([g, l.hidden]),
            db: Shape::from([g]),
            dx: input_grad.then(|| l.seq(l.input)),
        };
        Ok(outputs.into_vec())
    }

    /// Reads and checks the dimensions from a layer's `x`, `h0`, `c0`, `w_ih`, `w_hh`.
    pub fn checked(
        x: &Shape,
        h0: &Shape,
        c0: &Shape,
        w_ih: &Shape,
        w_hh: &Shape,
    ) -> Result<Self, String> {
        if w_hh.rank() != 2 || w_hh.dim(0) != 4 * w_hh.dim(1) {
            return Err(format!("w_hh must be [4H, H], got {w_hh}"));
        }
        check_input(x, w_ih, w_hh.dim(0))?;
        let d = LstmDims::of(x, w_ih, w_hh);
        same(h0, &d.state(), "h0")?;
        same(c0, &d.state(), "c0")?;
        Ok(d)
    }

    /// The dimensions of `x` `[T, B, I]` (or `[T, B]` ids), `w_ih` `[4H, I]` and `w_hh`
    /// `[4H, H]`, unchecked (for shapes [`LstmDims::checked`] has accepted).
    pub fn of(x: &Shape, w_ih: &Shape, w_hh: &Shape) -> Self {
        LstmDims {
            steps: x.dim(0),
            batch: x.dim(1),
            input: w_ih.dim(1),
            hidden: w_hh.dim(1),
            tokens: x.rank() == 2,
        }
    }
}

impl RecurrentDims for LstmDims {
    const GATES: usize = 4;

    fn sizes(&self) -> (usize, usize, usize) {
        (self.steps, self.batch, self.hidden)
    }

    fn input(&self) -> (usize, bool) {
        (self.input, self.tokens)
    }
}

impl LstmForwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> LstmDims {
        LstmDims::of(self.x, self.w_ih, self.w_hh)
    }
}

impl LstmBackwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> LstmDims {
        LstmDims::of(self.x, self.w_ih, self.w_hh)
    }
}

impl<T> LstmForwardInputs<T> {
    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let mut e = layer_inputs(d, [&self.x, &self.h0, &self.c0, &self.w_ih, &self.w_hh]);
        e.extend([
            ("b_ih", &self.b_ih, 4 * d.hidden),
            ("b_hh", &self.b_hh, 4 * d.hidden),
        ]);
        e.extend(self.lengths.as_ref().map(|l| ("lengths", l, d.batch)));
        e
    }
}

impl<T> LstmForwardOutputs<T> {
    pub fn expected(&self, d: LstmDims) -> Expected<'_, T> {
        let (rows, state) = (d.steps * d.batch, d.batch * d.hidden);
        let mut e = vec![
            ("y", &self.y, rows * d.hidden),
            ("h_n", &self.h_n, state),
            ("c_n", &self.c_n, state),
            ("gates", &self.gates, d.gates(self.cells.is_some()).numel()),
        ];
        e.extend(self.cells.as_ref().map(|c| ("cells", c, rows * d.hidden)));
        e
    }
}

impl<T> LstmBackwardInputs<T> {
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
        e.extend(self.lengths.as_ref().map(|l| ("lengths", l, d.batch)));
        e
    }
}

impl<T> LstmBackwardOutputs<T> {
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

/// The first five inputs of both LSTM ops, `x, h0, c0, w_ih, w_hh`, with their lengths.
fn layer_inputs<T>(d: LstmDims, [x, h0, c0, w_ih, w_hh]: [&T; 5]) -> Expected<'_, T> {
    let (h4, state) = (4 * d.hidden, d.batch * d.hidden);
    vec![
        ("x", x, d.x_len()),
        ("h0", h0, state),
        ("c0", c0, state),
        ("w_ih", w_ih, h4 * d.input),
        ("w_hh", w_hh, h4 * d.hidden),
    ]
}
