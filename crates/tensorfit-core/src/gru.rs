//! The sizes of a GRU layer ([`GruDims`]) and the lengths of the GRU ops' tensors, which
//! every backend's kernels check and read their offsets from.

use crate::args::{
    Expected, GruBackwardInputs, GruBackwardOutputs, GruForwardInputs, GruForwardOutputs,
};
use crate::shape::Shape;

/// Sizes of a GRU layer read off its inputs `x, h0, w_ih, w_hh, ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GruDims {
    pub steps: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
}

impl GruDims {
    /// Reads and checks the dimensions from a layer's `x`, `h0`, `w_ih`, `w_hh`.
    pub fn checked(x: &Shape, h0: &Shape, w_ih: &Shape, w_hh: &Shape) -> Result<Self, String> {
        if x.rank() != 3 {
            return Err(format!("x must be [T, B, I], got {x}"));
        }
        if w_hh.rank() != 2 || w_hh.dim(0) != 3 * w_hh.dim(1) {
            return Err(format!("w_hh must be [3H, H], got {w_hh}"));
        }
        let d = GruDims::of(x, w_hh);
        let expect = |s: &Shape, want: Shape, what: &str| {
            if *s == want {
                Ok(())
            } else {
                Err(format!("{what} must have shape {want}, got {s}"))
            }
        };
        expect(h0, d.state(), "h0")?;
        expect(w_ih, Shape::from([d.gate_width(), d.input]), "w_ih")?;
        Ok(d)
    }

    /// The dimensions of `x` `[T, B, I]` and `w_hh` `[3H, H]`, unchecked (for shapes
    /// [`GruDims::checked`] has accepted).
    pub fn of(x: &Shape, w_hh: &Shape) -> Self {
        GruDims {
            steps: x.dim(0),
            batch: x.dim(1),
            input: x.dim(2),
            hidden: w_hh.dim(1),
        }
    }

    /// `[T, B, width]`.
    pub fn seq(&self, width: usize) -> Shape {
        Shape::from([self.steps, self.batch, width])
    }

    /// `[B, H]`.
    pub fn state(&self) -> Shape {
        Shape::from([self.batch, self.hidden])
    }

    /// Rows of the whole sequence, `T·B`.
    pub fn rows(&self) -> usize {
        self.steps * self.batch
    }

    /// Width of one row of gates, `3H` (r, z, n).
    pub fn gate_width(&self) -> usize {
        3 * self.hidden
    }

    /// Elements of one step's state, `B·H`.
    pub fn step_state(&self) -> usize {
        self.batch * self.hidden
    }

    /// Elements of one step's gates, `B·3H`.
    pub fn step_gates(&self) -> usize {
        self.batch * self.gate_width()
    }

    /// Whether nothing flows through the layer (no steps, or no units): the final state
    /// is the initial one and the weights get no gradient.
    pub fn is_empty(&self) -> bool {
        self.steps == 0 || self.step_state() == 0
    }
}

impl GruForwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> GruDims {
        GruDims::of(self.x, self.w_hh)
    }
}

impl GruBackwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> GruDims {
        GruDims::of(self.x, self.w_hh)
    }
}

impl<T> GruForwardInputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let g = d.gate_width();
        vec![
            ("x", &self.x, d.rows() * d.input),
            ("h0", &self.h0, d.step_state()),
            ("w_ih", &self.w_ih, g * d.input),
            ("w_hh", &self.w_hh, g * d.hidden),
            ("b_ih", &self.b_ih, g),
            ("b_hh", &self.b_hh, g),
        ]
    }
}

impl<T> GruForwardOutputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let rows = d.rows();
        vec![
            ("y", &self.y, rows * d.hidden),
            ("h_n", &self.h_n, d.step_state()),
            ("gates", &self.gates, rows * d.gate_width()),
            ("hidden", &self.hidden, rows * d.gate_width()),
        ]
    }
}

impl<T> GruBackwardInputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let (rows, g) = (d.rows(), d.gate_width());
        vec![
            ("x", &self.x, rows * d.input),
            ("h0", &self.h0, d.step_state()),
            ("w_ih", &self.w_ih, g * d.input),
            ("w_hh", &self.w_hh, g * d.hidden),
            ("y", &self.y, rows * d.hidden),
            ("gates", &self.gates, rows * g),
            ("hidden", &self.hidden, rows * g),
            ("dy", &self.dy, rows * d.hidden),
            ("dh_n", &self.dh_n, d.step_state()),
        ]
    }
}

impl<T> GruBackwardOutputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let (rows, g) = (d.rows(), d.gate_width());
        let mut e = vec![
            ("dgates", &self.dgates, rows * g),
            ("dhidden", &self.dhidden, rows * g),
            ("dh0", &self.dh0, d.step_state()),
            ("dw_ih", &self.dw_ih, g * d.input),
            ("dw_hh", &self.dw_hh, g * d.hidden),
            ("db_ih", &self.db_ih, g),
            ("db_hh", &self.db_hh, g),
        ];
        e.extend(self.dx.as_ref().map(|dx| ("dx", dx, rows * d.input)));
        e
    }
}
