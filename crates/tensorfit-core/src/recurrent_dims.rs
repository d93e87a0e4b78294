//! [`RecurrentDims`]: the sizes every recurrent cell's layer shares, and the shapes and
//! counts that follow from them, written once for [`LstmDims`](crate::LstmDims) and
//! [`GruDims`](crate::GruDims) (a cell adds only its gate count and its checks). Kernels
//! of every backend read their offsets from these.

use crate::shape::Shape;

/// Steps of gates a recurrent forward that keeps nothing for backward holds (see
/// [`RecurrentDims::gate_steps`]). Enough rows for an efficient input-projection GEMM
/// (16 · B) and for the CPU fast path's runs of projected steps; at the seed network's
/// inference shape (B = 100, H = 250) 6.1 MiB per LSTM layer instead of 76 MiB at T = 200.
pub const LSTM_SCRATCH_STEPS: usize = 16;

/// Reads the input side of a recurrent layer whose gate rows are `width` wide off `x`
/// (`[T, B, I]` features or `[T, B]` token ids) and `w_ih` (`[width, I]`, or `[width, V]`
/// over a vocabulary): both cells' one check of it.
pub(crate) fn check_input(x: &Shape, w_ih: &Shape, width: usize) -> Result<(), String> {
    if x.rank() != 3 && x.rank() != 2 {
        return Err(format!(
            "x must be [T, B, I] features or [T, B] token ids, got {x}"
        ));
    }
    if w_ih.rank() != 2 || w_ih.dim(0) != width {
        return Err(format!("w_ih must be [{width}, I], got {w_ih}"));
    }
    let (input, tokens) = (w_ih.dim(1), x.rank() == 2);
    if !tokens && x.dim(2) != input {
        return Err(format!("x {x} must have {input} features, as w_ih {w_ih}"));
    }
    Ok(())
}

/// A backward over token ids has no input gradient to give (both cells' check).
pub(crate) fn check_input_grad(d: &impl RecurrentDims, input_grad: bool) -> Result<(), String> {
    match (d.input(), input_grad) {
        ((_, true), true) => Err("token ids x have no gradient (input_grad must be false)".into()),
        _ => Ok(()),
    }
}

/// The sizes of a recurrent layer over a whole sequence: `T` steps of `B` rows of `H`
/// units, each unit with [`RecurrentDims::GATES`] gate blocks.
pub trait RecurrentDims {
    /// Gate blocks per unit: 4 for the LSTM (i, f, g, o), 3 for the GRU (r, z, n).
    const GATES: usize;

    /// `(T, B, H)`.
    fn sizes(&self) -> (usize, usize, usize);

    /// `(I, tokens)`: features per step, or with token input (`x` `[T, B]` ids) the
    /// vocabulary, `w_ih`'s columns.
    fn input(&self) -> (usize, bool);

    /// Elements of `x` per batch row of a step: `I` features, or one id.
    fn x_row(&self) -> usize {
        match self.input() {
            (_, true) => 1,
            (features, false) => features,
        }
    }

    /// Elements of `x`: `T·B·I`, or `T·B` ids.
    fn x_len(&self) -> usize {
        self.rows() * self.x_row()
    }

    /// Where token `v`'s gate inputs lie in `w_ih` `[GATES·H, V]` on token input: column
    /// `v`.
    fn token_table(&self) -> crate::tokens::Table {
        crate::tokens::Table::columns(self.gate_width(), self.input().0)
    }

    /// `[T, B, width]`.
    fn seq(&self, width: usize) -> Shape {
        let (steps, batch, _) = self.sizes();
        Shape::from([steps, batch, width])
    }

    /// `[B, H]`.
    fn state(&self) -> Shape {
        let (_, batch, hidden) = self.sizes();
        Shape::from([batch, hidden])
    }

    /// Rows of the whole sequence, `T·B`.
    fn rows(&self) -> usize {
        let (steps, batch, _) = self.sizes();
        steps * batch
    }

    /// Width of one row of gates, `GATES·H`.
    fn gate_width(&self) -> usize {
        Self::GATES * self.sizes().2
    }

    /// Elements of one step's state, `B·H`.
    fn step_state(&self) -> usize {
        let (_, batch, hidden) = self.sizes();
        batch * hidden
    }

    /// Elements of one step's gates, `B·GATES·H`.
    fn step_gates(&self) -> usize {
        self.sizes().1 * self.gate_width()
    }

    /// Whether nothing flows through the layer (no steps, or no units): the final state
    /// is the initial one and the weights get no gradient.
    fn is_empty(&self) -> bool {
        self.sizes().0 == 0 || self.step_state() == 0
    }

    /// Steps of gates a forward pass holds: every step when they are kept for the
    /// backward, else at most [`LSTM_SCRATCH_STEPS`] reused in turn (step `t` in slot
    /// `t % gate_steps`). Kernels project the inputs this many steps at a time.
    fn gate_steps(&self, keep_for_backward: bool) -> usize {
        let steps = self.sizes().0;
        if keep_for_backward {
            steps
        } else {
            steps.min(LSTM_SCRATCH_STEPS)
        }
    }

    /// The forward's gates (and a GRU's recurrent projections): `[gate_steps, B, GATES·H]`.
    fn gates(&self, keep_for_backward: bool) -> Shape {
        Shape::from([
            self.gate_steps(keep_for_backward),
            self.sizes().1,
            self.gate_width(),
        ])
    }
}

/// The tensors a recurrent forward's time loop reads and writes besides the cell's own, as
/// a backend's handles `T` (the wgpu and CUDA `kernels/recurrent.rs` take them): the input
/// `x`, `w_ih`, `w_hh`, `h0` and output `y`, the `held` steps of input projections
/// `gates`, and where each step's recurrent projection `h_{t-1} · w_hhᵀ` goes: added to
/// the gates (`add_recurrent`, the LSTM's) or written to a tensor of its own (the GRU's
/// `hidden`).
#[derive(Debug, Clone, Copy)]
pub struct ForwardLoop<T> {
    pub x: T,
    pub w_ih: T,
    pub w_hh: T,
    pub h0: T,
    pub y: T,
    pub gates: T,
    pub held: usize,
    pub recurrent: T,
    pub add_recurrent: bool,
}

impl<T> ForwardLoop<T> {
    /// From `[x, w_ih, w_hh, h0]`, `[y, gates]`, `held` and (where the recurrent projection
    /// goes, whether it is added there).
    pub fn new(
        [x, w_ih, w_hh, h0]: [T; 4],
        [y, gates]: [T; 2],
        held: usize,
        (recurrent, add_recurrent): (T, bool),
    ) -> Self {
        ForwardLoop {
            x,
            w_ih,
            w_hh,
            h0,
            y,
            gates,
            held,
            recurrent,
            add_recurrent,
        }
    }
}
