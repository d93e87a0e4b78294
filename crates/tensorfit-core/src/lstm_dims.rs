//! [`LstmDims`]: the sizes of an LSTM layer, read once off its inputs' shapes, which every
//! backend's LSTM kernels use instead of working them out again (and whether the layer
//! reads token ids).

use crate::op::same;
use crate::shape::Shape;

/// Steps of gates an LSTM forward that keeps nothing for backward holds (see
/// [`LstmDims::gate_steps`]). Enough rows for an efficient input-projection GEMM (16 · B)
/// and for the CPU fast path's runs of projected steps; at the seed network's inference
/// shape (B = 100, H = 250) 6.1 MiB per layer instead of 76 MiB at T = 200.
pub const LSTM_SCRATCH_STEPS: usize = 16;

/// Steps of gates a recurrent forward holds (the LSTM's and the GRU's `gate_steps`):
/// all `steps` when they are kept for the backward, else at most
/// [`LSTM_SCRATCH_STEPS`].
pub fn scratch_steps(steps: usize, keep_for_backward: bool) -> usize {
    if keep_for_backward {
        steps
    } else {
        steps.min(LSTM_SCRATCH_STEPS)
    }
}

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
    /// Reads and checks the dimensions from a layer's `x`, `h0`, `c0`, `w_ih`, `w_hh`.
    pub fn checked(
        x: &Shape,
        h0: &Shape,
        c0: &Shape,
        w_ih: &Shape,
        w_hh: &Shape,
    ) -> Result<Self, String> {
        if x.rank() != 3 && x.rank() != 2 {
            return Err(format!(
                "x must be [T, B, I] features or [T, B] token ids, got {x}"
            ));
        }
        if w_hh.rank() != 2 || w_hh.dim(0) != 4 * w_hh.dim(1) {
            return Err(format!("w_hh must be [4H, H], got {w_hh}"));
        }
        if w_ih.rank() != 2 {
            return Err(format!("w_ih must be [4H, I], got {w_ih}"));
        }
        let d = LstmDims::of(x, w_ih, w_hh);
        if !d.tokens && x.dim(2) != d.input {
            return Err(format!(
                "x {x} must have {} features, as w_ih {w_ih}",
                d.input
            ));
        }
        same(h0, &d.state(), "h0")?;
        same(c0, &d.state(), "c0")?;
        same(w_ih, &Shape::from([4 * d.hidden, d.input]), "w_ih")?;
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

    /// Where token `v`'s gate inputs lie in `w_ih` `[4H, V]` on token input: column `v`.
    pub fn token_table(&self) -> crate::tokens::Table {
        crate::tokens::Table::columns(self.gate_width(), self.input)
    }

    /// Elements of `x`: `T·B·I`, or `T·B` ids.
    pub fn x_len(&self) -> usize {
        if self.tokens {
            self.rows()
        } else {
            self.rows() * self.input
        }
    }

    /// Steps of gates a forward pass holds: every step when they are kept for the
    /// backward, else at most [`LSTM_SCRATCH_STEPS`] reused in turn (step `t` in slot
    /// `t % gate_steps`). Kernels project the inputs this many steps at a time.
    pub fn gate_steps(&self, keep_for_backward: bool) -> usize {
        scratch_steps(self.steps, keep_for_backward)
    }

    /// The forward's `gates`: `[gate_steps, B, 4H]`.
    pub fn gates(&self, keep_for_backward: bool) -> Shape {
        Shape::from([
            self.gate_steps(keep_for_backward),
            self.batch,
            self.gate_width(),
        ])
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

    /// Width of one row of gates, `4H` (i, f, g, o).
    pub fn gate_width(&self) -> usize {
        4 * self.hidden
    }

    /// Elements of one step's state, `B·H`.
    pub fn step_state(&self) -> usize {
        self.batch * self.hidden
    }

    /// Elements of one step's gates, `B·4H`.
    pub fn step_gates(&self) -> usize {
        self.batch * self.gate_width()
    }

    /// Whether nothing flows through the layer (no steps, or no units): the final state
    /// is the initial one and the weights get no gradient.
    pub fn is_empty(&self) -> bool {
        self.steps == 0 || self.step_state() == 0
    }
}
