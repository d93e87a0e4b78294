//! The sizes of a GRU layer ([`GruDims`]), the shapes and lengths of the GRU ops'
//! tensors, which every backend's kernels check and read their offsets from.
//!
//! [`Op::GruForward`](crate::Op::GruForward) is PyTorch's `nn.GRU` layer:
//! `r = σ(x W_irᵀ + b_ir + h W_hrᵀ + b_hr)`, `z = σ(x W_izᵀ + b_iz + h W_hzᵀ + b_hz)`,
//! `n = tanh(x W_inᵀ + b_in + r ∘ (h W_hnᵀ + b_hn))`, `h_t = (1 − z) ∘ n + z ∘ h_{t-1}`.
//! Kernels compute the input projection of all steps as one GEMM into `gates`, then per
//! step one GEMM `h_{t-1} W_hhᵀ` into `hidden[t]` and one fused pass. `hidden` keeps the
//! recurrent projections because the backward needs their n block (`b_hn` sits inside
//! the reset product). [`Op::GruBackward`](crate::Op::GruBackward) steps backwards with
//! one fused pass and one GEMM per step; its `dgates` and `dhidden` (the gradients at
//! `x W_ihᵀ + b_ih` and at `h W_hhᵀ + b_hh`) differ only in the n block, by the factor r,
//! and give the weight gradients with one GEMM each over all steps.
//!
//! **Token input**, as the LSTM's: `x` may be `[T, B]` ids with `w_ih` `[3H, V]`; the
//! input projection is then the gather of `w_ih`'s columns and `dw_ih` their scatter-add
//! (no `dx`), the exact result of the one-hot input without materialising it.
//!
//! A forward that keeps nothing for the backward holds only
//! [`RecurrentDims::gate_steps`] steps of `gates` and `hidden`, as the LSTM's does, and
//! projects its inputs that many steps at a time. With `lengths` `[B]` both ops follow
//! [`crate::seq_lengths`]: past a row's end its `y`, gates and projections are zero and
//! `h_n` is its state at its own last step; backward, its gradients are zero and `dh`
//! carries (the GRU's step GEMM already adds to `dh`, so nothing else is needed).

use crate::args::{
    Args, Expected, GruBackwardInputs, GruBackwardOutputs, GruForwardInputs, GruForwardOutputs,
};
use crate::op::same;
use crate::recurrent_dims::{check_input, check_input_grad, RecurrentDims};
use crate::seq_lengths::check_shape;
use crate::shape::Shape;

/// Sizes of a GRU layer read off its inputs `x, h0, w_ih, w_hh, ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GruDims {
    pub steps: usize,
    pub batch: usize,
    /// Features per step, or with token input the vocabulary (`w_ih`'s columns).
    pub input: usize,
    pub hidden: usize,
    /// Token input: `x` is `[T, B]` ids, not `[T, B, I]` features (as the LSTM's).
    pub tokens: bool,
}

impl GruDims {
    /// [`Op::GruForward`](crate::Op::GruForward)'s output shapes, its inputs checked.
    pub(crate) fn forward_shapes(
        i: GruForwardInputs<&Shape>,
        keep_for_backward: bool,
    ) -> Result<Vec<Shape>, String> {
        let l = GruDims::checked(i.x, i.h0, i.w_ih, i.w_hh)?;
        let gates = Shape::from([l.gate_width()]);
        same(i.b_ih, &gates, "b_ih")?;
        same(i.b_hh, &gates, "b_hh")?;
        check_shape(i.lengths, l.batch)?;
        let outputs = GruForwardOutputs {
            y: l.seq(l.hidden),
            h_n: l.state(),
            gates: l.gates(keep_for_backward),
            hidden: l.gates(keep_for_backward),
        };
        Ok(outputs.into_vec())
    }

    /// [`Op::GruBackward`](crate::Op::GruBackward)'s output shapes, its inputs checked.
    pub(crate) fn backward_shapes(
        i: GruBackwardInputs<&Shape>,
        input_grad: bool,
    ) -> Result<Vec<Shape>, String> {
        let l = GruDims::checked(i.x, i.h0, i.w_ih, i.w_hh)?;
        check_input_grad(&l, input_grad)?;
        let g = l.gate_width();
        same(i.y, &l.seq(l.hidden), "y")?;
        same(i.gates, &l.seq(g), "gates")?;
        same(i.hidden, &l.seq(g), "hidden")?;
        same(i.dy, &l.seq(l.hidden), "dy")?;
        same(i.dh_n, &l.state(), "dh_n")?;
        check_shape(i.lengths, l.batch)?;
        let outputs = GruBackwardOutputs {
            dgates: l.seq(g),
            dhidden: l.seq(g),
            dh0: l.state(),
            dw_ih: Shape::from([g, l.input]),
            dw_hh: Shape::from([g, l.hidden]),
            db_ih: Shape::from([g]),
            db_hh: Shape::from([g]),
            dx: input_grad.then(|| l.seq(l.input)),
        };
        Ok(outputs.into_vec())
    }

    /// Reads and checks the dimensions from a layer's `x`, `h0`, `w_ih`, `w_hh`.
    pub fn checked(x: &Shape, h0: &Shape, w_ih: &Shape, w_hh: &Shape) -> Result<Self, String> {
        if w_hh.rank() != 2 || w_hh.dim(0) != 3 * w_hh.dim(1) {
            return Err(format!("w_hh must be [3H, H], got {w_hh}"));
        }
        check_input(x, w_ih, w_hh.dim(0))?;
        let d = GruDims::of(x, w_ih, w_hh);
        same(h0, &d.state(), "h0")?;
        Ok(d)
    }

    /// The dimensions of `x` `[T, B, I]` (or `[T, B]` ids), `w_ih` `[3H, I]` and `w_hh`
    /// `[3H, H]`, unchecked (for shapes [`GruDims::checked`] has accepted).
    pub fn of(x: &Shape, w_ih: &Shape, w_hh: &Shape) -> Self {
        GruDims {
            steps: x.dim(0),
            batch: x.dim(1),
            input: w_ih.dim(1),
            hidden: w_hh.dim(1),
            tokens: x.rank() == 2,
        }
    }
}

impl RecurrentDims for GruDims {
    const GATES: usize = 3;

    fn sizes(&self) -> (usize, usize, usize) {
        (self.steps, self.batch, self.hidden)
    }

    fn input(&self) -> (usize, bool) {
        (self.input, self.tokens)
    }
}

impl GruForwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> GruDims {
        GruDims::of(self.x, self.w_ih, self.w_hh)
    }
}

impl GruBackwardInputs<&Shape> {
    /// The layer's sizes (the shapes have been checked by `Op::infer_shapes`).
    pub fn dims(&self) -> GruDims {
        GruDims::of(self.x, self.w_ih, self.w_hh)
    }
}

impl<T> GruForwardInputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let g = d.gate_width();
        let mut e = vec![
            ("x", &self.x, d.x_len()),
            ("h0", &self.h0, d.step_state()),
            ("w_ih", &self.w_ih, g * d.input),
            ("w_hh", &self.w_hh, g * d.hidden),
            ("b_ih", &self.b_ih, g),
            ("b_hh", &self.b_hh, g),
        ];
        e.extend(self.lengths.as_ref().map(|l| ("lengths", l, d.batch)));
        e
    }
}

impl<T> GruForwardOutputs<T> {
    /// With `keep_for_backward` false, `gates` and `hidden` hold
    /// [`RecurrentDims::gate_steps`] steps only.
    pub fn expected(&self, d: GruDims, keep_for_backward: bool) -> Expected<'_, T> {
        let held = d.gates(keep_for_backward).numel();
        vec![
            ("y", &self.y, d.rows() * d.hidden),
            ("h_n", &self.h_n, d.step_state()),
            ("gates", &self.gates, held),
            ("hidden", &self.hidden, held),
        ]
    }
}

impl<T> GruBackwardInputs<T> {
    pub fn expected(&self, d: GruDims) -> Expected<'_, T> {
        let (rows, g) = (d.rows(), d.gate_width());
        let mut e = vec![
            ("x", &self.x, d.x_len()),
            ("h0", &self.h0, d.step_state()),
            ("w_ih", &self.w_ih, g * d.input),
            ("w_hh", &self.w_hh, g * d.hidden),
            ("y", &self.y, rows * d.hidden),
            ("gates", &self.gates, rows * g),
            ("hidden", &self.hidden, rows * g),
            ("dy", &self.dy, rows * d.hidden),
            ("dh_n", &self.dh_n, d.step_state()),
        ];
        e.extend(self.lengths.as_ref().map(|l| ("lengths", l, d.batch)));
        e
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

#[cfg(test)]
mod tests {
    use crate::{Op, Shape};

    #[test]
    fn a_gru_reads_token_ids_against_its_vocabulary_and_gives_them_no_gradient() {
        let (t, b, v, h) = (4, 2, 11, 3);
        let shapes = [
            Shape::from([t, b]),
            Shape::from([b, h]),
            Shape::from([3 * h, v]),
            Shape::from([3 * h, h]),
            Shape::from([3 * h]),
            Shape::from([3 * h]),
        ];
        let inputs: Vec<&Shape> = shapes.iter().collect();
        let forward = Op::GruForward {
            keep_for_backward: true,
        };
        let out = forward.infer_shapes(&inputs).unwrap();
        assert_eq!(out[0], Shape::from([t, b, h]));
        let mut backward: Vec<&Shape> = inputs[..4].to_vec();
        backward.extend([&out[0], &out[2], &out[3], &out[0], &out[1]]);
        let grads = Op::GruBackward { input_grad: false };
        let d = grads.infer_shapes(&backward).unwrap();
        assert_eq!(d[3], Shape::from([3 * h, v]), "dw_ih over the vocabulary");
        let e = Op::GruBackward { input_grad: true }
            .infer_shapes(&backward)
            .unwrap_err();
        assert!(e.contains("no gradient"), "{e}");
        let wrong_width = Shape::from([4 * h, v]);
        let mut bad = inputs.clone();
        bad[2] = &wrong_width;
        let e = forward.infer_shapes(&bad).unwrap_err();
        assert!(e.contains("w_ih"), "{e}");
    }

    #[test]
    fn the_gates_and_hidden_projections_of_a_gru_that_keeps_nothing_are_scratch() {
        let forward = |keep_for_backward| Op::GruForward { keep_for_backward };
        assert!(forward(false).output_is_scratch(2) && forward(false).output_is_scratch(3));
        assert!(!forward(false).output_is_scratch(0) && !forward(false).output_is_scratch(1));
        assert!((0..4).all(|k| !forward(true).output_is_scratch(k)));
    }
}
