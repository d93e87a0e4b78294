//! What every recurrent cell's kernels share (the LSTM's and the GRU's; tensorfit-cpu's
//! kernels/recurrent/): the input projection of a run of steps (one GEMM over features,
//! or on token input the gather of `w_ih`'s columns, `gather.rs`) and the weight
//! gradients the backward forms after its time loop, as GEMMs over all `T·B` rows: a cell
//! hands in the gradients at its input projections (`d_ih`; on token input scattered
//! into `w_ih`'s columns) and at its recurrent projections (`d_hh`; the same tensor for
//! the LSTM) and forms its bias gradients itself.

use tensorfit_core::{RecurrentDims, Result};

use super::elementwise::fill;
use super::gather::{gather, scatter_add};
use super::gemm::{gemm, Mat};
use super::Launches;
use crate::window::Region;

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

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
pub(crate) fn hidden_weight_gradient(
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
pub(crate) fn input_gradients(
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
