//! What every recurrent cell's launchers share (the LSTM's and the GRU's; tensorfit-cpu's
//! kernels/recurrent/): the time loops ([`forward_steps`], [`backward_steps`]: the input
//! projection of a run of steps, one cuBLAS GEMM over features or on token input the
//! gather of `w_ih`'s columns; per step one GEMM and the cell's fused kernel), and the
//! weight gradients the backward forms after its time loop, as GEMMs over all `T·B` rows:
//! a cell hands in the gradients at its input projections (`d_ih`; on token input
//! scattered into `w_ih`'s columns) and at its recurrent projections (`d_hh`; the same
//! tensor for the LSTM), and which of them its bias gradients sum ([`weight_gradients`]).
//! A cell writes only its fused kernels' tensors ([`CellKernel`] launches them with the
//! arguments every fused kernel takes after its tensors).

use tensorfit_core::{recurrent_dims, RecurrentDims, Result};

use super::elementwise::sum_to_shape;
use super::gather::{gather, scatter_add};
use super::gemm::gemm;
use super::{int, Gpu, Loaded};
use crate::driver::{Arg, DevPtr};

/// The time loop's tensors (`tensorfit_core::recurrent_dims::ForwardLoop`), as device addresses.
pub type ForwardLoop = recurrent_dims::ForwardLoop<DevPtr>;

/// A cell's fused kernel (lstm.cu, gru.cu), looked up once before its time loop, with the
/// arguments every fused kernel takes after its tensors: the lengths (a null pointer
/// without, which the kernel reads as every row running every step), the step, the batch
/// and the hidden size. One thread per element of a `[B, H]` state.
#[derive(Debug)]
pub struct CellKernel<'a> {
    loaded: &'a Loaded,
    name: &'static str,
    lengths: DevPtr,
    batch: i32,
    hidden: i32,
    threads: i64,
}

impl<'a> CellKernel<'a> {
    /// Kernel `name` of a layer of sizes `d` and sequence `lengths` (if any).
    pub fn new(
        g: &Gpu<'a>,
        name: &'static str,
        d: &impl RecurrentDims,
        lengths: Option<DevPtr>,
    ) -> Result<Self> {
        let (_, batch, hidden) = d.sizes();
        let (batch, hidden) = (int("batch", batch)?, int("hidden", hidden)?);
        Ok(CellKernel {
            loaded: g.kernels.get(name)?,
            name,
            lengths: lengths.unwrap_or(DevPtr(0)),
            batch,
            hidden,
            threads: d.step_state() as i64,
        })
    }

    /// Launches the kernel for step `t` on `tensors` (its pointer arguments, in order).
    pub fn launch(&self, g: &Gpu<'_>, t: usize, tensors: &[DevPtr]) -> Result<()> {
        let mut args: Vec<Arg> = tensors.iter().map(|&p| Arg::Ptr(p)).collect();
        args.extend([
            Arg::Ptr(self.lengths),
            Arg::I32(int("step", t)?),
            Arg::I32(self.batch),
            Arg::I32(self.hidden),
        ]);
        g.launch_fn(self.loaded, self.name, self.threads, &args)
    }
}

/// The time loop of a recurrent forward: per run of `held` steps the input projection
/// into `gates`, per step the recurrent GEMM, then `fused(t, slot, h_prev)`, which
/// launches the cell's fused kernel for step `t` (its gates in slot `slot`).
pub fn forward_steps(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    f: &ForwardLoop,
    mut fused: impl FnMut(usize, usize, DevPtr) -> Result<()>,
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let (width, step_h, step_g) = (d.gate_width(), d.step_state(), d.step_gates());
    let beta = if f.add_recurrent { 1.0 } else { 0.0 };
    for t in 0..steps {
        let slot = t % f.held;
        if slot == 0 {
            // The input projection of the run's steps (the biases come in the fused pass).
            let n = f.held.min(steps - t) * batch;
            input_projection(g, d, (f.x, f.w_ih), (t * batch, n), f.gates)?;
        }
        // The recurrence: one GEMM and one fused kernel per step.
        let h_prev = match t {
            0 => f.h0,
            _ => f.y.add((t - 1) * step_h),
        };
        let target = f.recurrent.add(slot * step_g);
        let mnk = (batch, width, hidden);
        gemm(g, (false, true), mnk, 1.0, h_prev, f.w_hh, beta, target)?;
        fused(t, slot, h_prev)?;
    }
    Ok(())
}

/// The time loop of a recurrent backward: per step, from `T-1` down to 0, `fused(t)`
/// (the cell's fused kernel), then the GEMM that carries the gradient to `h_{t-1}`:
/// `dh = d_hh[t] · w_hh + beta · dh` (`d_hh` `[T, B, G·H]`: the gradients at the
/// recurrent projections).
pub fn backward_steps(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    (d_hh, w_hh, dh): (DevPtr, DevPtr, DevPtr),
    beta: f32,
    mut fused: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let (width, step_g) = (d.gate_width(), d.step_gates());
    for t in (0..steps).rev() {
        fused(t)?;
        let carry = (batch, hidden, width);
        gemm(
            g,
            (false, false),
            carry,
            1.0,
            d_hh.add(t * step_g),
            w_hh,
            beta,
            dh,
        )?;
    }
    Ok(())
}

/// `gates[0..n] = x · w_ihᵀ` for the `n` rows of `x` from row `first` on (features, or
/// ids whose projection is the gather of `w_ih`'s columns), without biases.
pub fn input_projection(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    (x, w_ih): (DevPtr, DevPtr),
    (first, n): (usize, usize),
    gates: DevPtr,
) -> Result<()> {
    let ((input, tokens), width) = (d.input(), d.gate_width());
    let x = x.add(first * d.x_row());
    if tokens {
        return gather(g, w_ih, d.token_table(), x, gates, n);
    }
    gemm(
        g,
        (false, true),
        (n, width, input),
        1.0,
        x,
        w_ih,
        0.0,
        gates,
    )
}

/// When nothing flows through the layer (no steps, or no units): zero weight gradients
/// `grads` and input gradient `dx`, each with its element count.
pub fn zero_gradients(
    g: &Gpu<'_>,
    grads: &[(DevPtr, usize)],
    dx: Option<(DevPtr, usize)>,
) -> Result<()> {
    for &(ptr, n) in grads.iter().chain(&dx) {
        g.fill(ptr, 0.0, n)?;
    }
    Ok(())
}

/// The weight gradients a backward forms after its time loop, over all `T·B` rows, from
/// what the forward read (`x`, `w_ih`, `h0`, `y`) and the gradients at the input and at
/// the recurrent projections (`d_ih`, `d_hh` `[T, B, G·H]`; the same tensor for the LSTM):
/// `dw_ih` and `dx` (`input_gradients`), `dw_hh` (`hidden_weight_gradient`), and each
/// bias gradient of `biases` (`(from, db)`) the column sums of its `from`.
pub fn weight_gradients(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    [x, w_ih, h0, y]: [DevPtr; 4],
    (d_ih, d_hh): (DevPtr, DevPtr),
    (dw_ih, dw_hh, dx): (DevPtr, DevPtr, Option<DevPtr>),
    biases: &[(DevPtr, DevPtr)],
) -> Result<()> {
    input_gradients(g, d, (d_ih, x, w_ih), (dw_ih, dx))?;
    hidden_weight_gradient(g, d, d_hh, (h0, y), dw_hh)?;
    for &(from, db) in biases {
        sum_to_shape(g, from, db, d.rows(), d.gate_width())?;
    }
    Ok(())
}

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
fn hidden_weight_gradient(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    d_hh: DevPtr,
    (h0, y): (DevPtr, DevPtr),
    dw_hh: DevPtr,
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    gemm(
        g,
        (true, false),
        (width, hidden, batch),
        1.0,
        d_hh,
        h0,
        0.0,
        dw_hh,
    )?;
    if steps > 1 {
        let later = (width, hidden, (steps - 1) * batch);
        let d_rest = d_hh.add(d.step_gates());
        gemm(g, (true, false), later, 1.0, d_rest, y, 1.0, dw_hh)?;
    }
    Ok(())
}

/// `dw_ih = d_ihᵀ · x` and, if wanted, `dx = d_ih · w_ih`; on token input `dw_ih` is the
/// scatter-add of `d_ih` into the columns of the ids (and there is no `dx`).
fn input_gradients(
    g: &Gpu<'_>,
    d: &impl RecurrentDims,
    (d_ih, x, w_ih): (DevPtr, DevPtr, DevPtr),
    (dw_ih, dx): (DevPtr, Option<DevPtr>),
) -> Result<()> {
    let (rows, width, (input, tokens)) = (d.rows(), d.gate_width(), d.input());
    if tokens {
        return scatter_add(g, d.token_table(), x, d_ih, dw_ih, rows);
    }
    gemm(
        g,
        (true, false),
        (width, input, rows),
        1.0,
        d_ih,
        x,
        0.0,
        dw_ih,
    )?;
    if let Some(dx) = dx {
        gemm(
            g,
            (false, false),
            (rows, input, width),
            1.0,
            d_ih,
            w_ih,
            0.0,
            dx,
        )?;
    }
    Ok(())
}
