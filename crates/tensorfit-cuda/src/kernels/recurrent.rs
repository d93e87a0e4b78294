//! What every recurrent cell's launchers share (the LSTM's and the GRU's; tensorfit-cpu's
//! kernels/recurrent/): the input projection of a run of steps (one cuBLAS GEMM over
//! features, or on token input the gather of `w_ih`'s columns, `gather.rs`) and the
//! weight gradients the backward forms after its time loop, as GEMMs over all `T·B` rows:
//! a cell hands in the gradients at its input projections (`d_ih`; on token input
//! scattered into `w_ih`'s columns) and at its recurrent projections (`d_hh`; the same
//! tensor for the LSTM) and forms its bias gradients itself.

use tensorfit_core::{RecurrentDims, Result};

use super::gather::{gather, scatter_add};
use super::gemm::gemm;
use super::Gpu;
use crate::driver::DevPtr;

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

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
pub fn hidden_weight_gradient(
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
pub fn input_gradients(
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
