//! What every recurrent cell's kernels share (the LSTM's and the GRU's; tensorfit-cpu's
//! kernels/recurrent/): the time loops ([`forward_steps`], [`backward_steps`]: the input
//! projection of a run of steps, one GEMM over features or on token input the gather of
//! `w_ih`'s columns; per step one GEMM and the cell's fused pass, cut into blocks of batch
//! rows ([`StepBlock`]) only when a step is larger than one binding holds), and the weight
//! gradients the backward forms after its time loop ([`weight_gradients`]), as GEMMs over
//! all `T·B` rows: a cell hands in the gradients at its input projections (`d_ih`; on
//! token input scattered into `w_ih`'s columns) and at its recurrent projections (`d_hh`;
//! the same tensor for the LSTM), and which of them its bias gradients sum. A cell writes
//! only its fused passes: their bindings and own parameter words
//! ([`StepBlock::push_backward`] and `push_forward` add those every pass takes).

use std::ops::Range;

use tensorfit_core::{args, recurrent_dims, RecurrentDims, Result};

use super::elementwise::{check_len, fill, sum_rows};
use super::gather::{gather, scatter_add};
use super::gemm::{gemm, Mat};
use super::{word, Launches};
use crate::shaders::Kernel;
use crate::window::{row_chunks, Operand, Region};

/// Checks every region against the length the layer needs.
pub(crate) fn check_lengths(kernel: &str, expected: args::Expected<'_, Region>) -> Result<()> {
    for (what, r, want) in expected {
        check_len(kernel, what, *r, want)?;
    }
    Ok(())
}

/// What one launch of a fused pass covers, batch rows `rows` of step `t`, as element
/// ranges (region-relative) of each kind of tensor, and what every fused pass is told of
/// its block (see [`StepBlock::push_backward`]).
pub(crate) struct StepBlock {
    /// Of a `[B, H]` state (h0, c0, h_n, c_n, dh0, dc0).
    pub state: Range<usize>,
    /// Of a `[T, B, H]` sequence (y, cells, dy) at step `t`.
    pub seq: Range<usize>,
    /// Of the same rows at step `t - 1` (for `t > 0`).
    pub prev_seq: Range<usize>,
    /// Of the gates (and their gradients, a GRU's recurrent projections) at their slot
    /// for step `t`.
    pub gates: Range<usize>,
    rows: Range<usize>,
    t: usize,
    hidden: usize,
    lengths: Option<Region>,
}

impl StepBlock {
    /// The block of step `t`, whose gates are held in slot `slot` (`t` itself when every
    /// step's gates are held), of a layer with sequence `lengths` (if any).
    pub fn new(
        d: &impl RecurrentDims,
        (t, slot): (usize, usize),
        rows: &Range<usize>,
        lengths: Option<Region>,
    ) -> Self {
        let (_, batch, h) = d.sizes();
        let width = d.gate_width();
        let state = rows.start * h..rows.end * h;
        let at_step = |t: usize| {
            let step = t * batch * h;
            step + state.start..step + state.end
        };
        let first_row = slot * batch + rows.start;
        StepBlock {
            seq: at_step(t),
            prev_seq: at_step(t.saturating_sub(1)),
            gates: first_row * width..(first_row + rows.len()) * width,
            state,
            rows: rows.clone(),
            t,
            hidden: h,
            lengths,
        }
    }

    /// The lengths of the block's rows, or, without lengths, `unread` (a region the
    /// kernel's `masked = 0` leaves alone, bound only because every binding needs one).
    pub fn lengths(&self, unread: Region) -> Operand {
        match self.lengths {
            Some(l) => Operand::part(l, self.rows.clone()),
            None => Operand::part(unread, 0..1),
        }
    }

    /// Pushes the launch of backward pass `kernel` over the block, one invocation per
    /// (batch row, unit). Its parameter words are those every cell pass of lstm.wgsl and
    /// gru.wgsl takes in this order: the rows, the units, the gates' offset, then `own`
    /// (the pass's other offsets and flags), then whether lengths are read, the step and
    /// the first row.
    pub fn push_backward(
        &self,
        l: &mut Launches,
        kernel: &'static Kernel,
        ops: Vec<Operand>,
        own: &[usize],
    ) {
        self.launch(l, kernel, ops, own, None);
    }

    /// [`StepBlock::push_backward`] for a forward pass, whose last word is the offset of `h_n`
    /// (written at each row's last step).
    pub fn push_forward(
        &self,
        l: &mut Launches,
        kernel: &'static Kernel,
        ops: Vec<Operand>,
        own: &[usize],
    ) {
        self.launch(l, kernel, ops, own, Some(self.state.start));
    }

    fn launch(
        &self,
        l: &mut Launches,
        kernel: &'static Kernel,
        ops: Vec<Operand>,
        own: &[usize],
        h_n: Option<usize>,
    ) {
        let masked = usize::from(self.lengths.is_some());
        let head = [self.rows.len(), self.hidden, self.gates.start];
        let tail = [masked, self.t, self.rows.start];
        let words = head.iter().chain(own).chain(&tail).chain(&h_n);
        let values = words.map(|&v| word(v)).collect();
        l.push(kernel, ops, values, self.rows.len() * self.hidden);
    }
}

/// The time loop's tensors (`tensorfit_core::recurrent_dims::ForwardLoop`), as regions.
pub(crate) type ForwardLoop = recurrent_dims::ForwardLoop<Region>;

/// The time loop of a recurrent forward (`kernel` names it in errors): per run of `held`
/// steps the input projection into `gates`, per step the recurrent GEMM, then
/// `fused(l, (t, slot), block)` for each block of batch rows, which launches the cell's
/// fused pass.
pub(crate) fn forward_steps(
    l: &mut Launches,
    (kernel, d): (&str, &impl RecurrentDims),
    f: &ForwardLoop,
    mut fused: impl FnMut(&mut Launches, (usize, usize), &Range<usize>),
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    let blocks = row_chunks(batch, width, l.span(), kernel)?;
    let recurrent = Mat::new(f.recurrent, f.held * batch, width);
    let w_hh = Mat::new(f.w_hh, width, hidden);
    for t in 0..steps {
        let slot = t % f.held;
        if slot == 0 {
            // The input projection of the run's steps (the biases join in the fused pass).
            let n = f.held.min(steps - t) * batch;
            input_projection(l, d, (f.x, f.w_ih), (t * batch, n), f.gates)?;
        }
        // The recurrence: one GEMM and one fused pass per step.
        let h_prev = match t {
            0 => Mat::new(f.h0, batch, hidden),
            _ => Mat::new(f.y, d.rows(), hidden).rows((t - 1) * batch, batch),
        };
        let target = recurrent.rows(slot * batch, batch);
        gemm(l, (h_prev, false), (w_hh, true), target, f.add_recurrent)?;
        for b in &blocks {
            fused(l, (t, slot), b);
        }
    }
    Ok(())
}

/// The time loop of a recurrent backward (`kernel` names it in errors): per step, from
/// `T-1` down to 0, `fused(l, t, block)` for each block of batch rows (the cell's fused
/// pass), then the GEMM that carries the gradient to `h_{t-1}`: `dh = d_hh[t] · w_hh`,
/// added to what `dh` holds with `add` (`d_hh` `[T, B, G·H]`: the gradients at the
/// recurrent projections).
pub(crate) fn backward_steps(
    l: &mut Launches,
    (kernel, d): (&str, &impl RecurrentDims),
    (d_hh, w_hh, dh): (Region, Region, Region),
    add: bool,
    mut fused: impl FnMut(&mut Launches, usize, &Range<usize>),
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    let blocks = row_chunks(batch, width, l.span(), kernel)?;
    let d_hh = Mat::new(d_hh, d.rows(), width);
    let w_hh = Mat::new(w_hh, width, hidden);
    let dh = Mat::new(dh, batch, hidden);
    for t in (0..steps).rev() {
        for b in &blocks {
            fused(l, t, b);
        }
        gemm(
            l,
            (d_hh.rows(t * batch, batch), false),
            (w_hh, false),
            dh,
            add,
        )?;
    }
    Ok(())
}

/// `gates[0..n] = x · w_ihᵀ` for the `n` rows of `x` from row `first` on (features, or
/// ids whose projection is the gather of `w_ih`'s columns), without biases.
pub(crate) fn input_projection(
    l: &mut Launches,
    d: &impl RecurrentDims,
    (x, w_ih): (Region, Region),
    (first, n): (usize, usize),
    gates: Region,
) -> Result<()> {
    let ((input, tokens), width) = (d.input(), d.gate_width());
    if tokens {
        let ids = x.slice(first..first + n);
        return gather(l, w_ih, d.token_table(), ids, gates.slice(0..n * width));
    }
    let x = Mat::new(x, d.rows(), input).rows(first, n);
    let w_ih = Mat::new(w_ih, width, input);
    let gates = Mat::new(gates, n, width);
    gemm(l, (x, false), (w_ih, true), gates, false)
}

/// When nothing flows through the layer (no steps, or no units): zero weight gradients
/// `grads` and input gradient `dx`.
pub(crate) fn zero_gradients(l: &mut Launches, grads: &[Region], dx: Option<Region>) {
    for &g in grads.iter().chain(&dx) {
        fill(l, 0.0, g);
    }
}

/// The weight gradients a backward forms after its time loop, over all `T·B` rows, from
/// what the forward read (`x`, `w_ih`, `h0`, `y`) and the gradients at the input and at
/// the recurrent projections (`d_ih`, `d_hh` `[T, B, G·H]`; the same tensor for the LSTM):
/// `dw_ih` and `dx` (`input_gradients`), `dw_hh` (`hidden_weight_gradient`), and each
/// bias gradient of `biases` (`(from, db)`) the column sums of its `from`.
pub(crate) fn weight_gradients(
    l: &mut Launches,
    d: &impl RecurrentDims,
    [x, w_ih, h0, y]: [Region; 4],
    (d_ih, d_hh): (Region, Region),
    (dw_ih, dw_hh, dx): (Region, Region, Option<Region>),
    biases: &[(Region, Region)],
) -> Result<()> {
    input_gradients(l, d, (d_ih, x, w_ih), (dw_ih, dx))?;
    hidden_weight_gradient(l, d, d_hh, (h0, y), dw_hh)?;
    for &(from, db) in biases {
        sum_rows(l, from, d.rows(), d.gate_width(), db, 1.0);
    }
    Ok(())
}

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
fn hidden_weight_gradient(
    l: &mut Launches,
    d: &impl RecurrentDims,
    d_hh: Region,
    (h0, y): (Region, Region),
    dw_hh: Region,
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let (rows, width) = (d.rows(), d.gate_width());
    let d_hh = Mat::new(d_hh, rows, width);
    let dw_hh = Mat::new(dw_hh, width, hidden);
    let h0 = Mat::new(h0, batch, hidden);
    gemm(l, (d_hh.rows(0, batch), true), (h0, false), dw_hh, false)?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let h_prev = Mat::new(y, rows, hidden).rows(0, later);
        let d_rest = d_hh.rows(batch, later);
        gemm(l, (d_rest, true), (h_prev, false), dw_hh, true)?;
    }
    Ok(())
}

/// `dw_ih = d_ihᵀ · x` and, if wanted, `dx = d_ih · w_ih`; on token input `dw_ih` is the
/// scatter-add of `d_ih` into the columns of the ids (and there is no `dx`).
fn input_gradients(
    l: &mut Launches,
    d: &impl RecurrentDims,
    (d_ih, x, w_ih): (Region, Region, Region),
    (dw_ih, dx): (Region, Option<Region>),
) -> Result<()> {
    let (rows, width, (input, tokens)) = (d.rows(), d.gate_width(), d.input());
    if tokens {
        return scatter_add(l, d.token_table(), x, d_ih, dw_ih);
    }
    let d_ih = Mat::new(d_ih, rows, width);
    let x = Mat::new(x, rows, input);
    gemm(
        l,
        (d_ih, true),
        (x, false),
        Mat::new(dw_ih, width, input),
        false,
    )?;
    if let Some(dx) = dx {
        let w_ih = Mat::new(w_ih, width, input);
        gemm(
            l,
            (d_ih, false),
            (w_ih, false),
            Mat::new(dx, rows, input),
            false,
        )?;
    }
    Ok(())
}
