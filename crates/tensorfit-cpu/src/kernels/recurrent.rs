//! The weight gradients every recurrent cell's backward forms after its time loop, one
//! GEMM each over all `T·B` rows (the LSTM's and the GRU's, reference and fast path):
//! a cell hands in the gradients at its input projections (`d_ih`) and at its recurrent
//! projections (`d_hh`; the same tensor for the LSTM) and forms its bias gradients itself.

use tensorfit_core::{RecurrentDims, Result};

use super::gemm::{gemm, mat, mat_mut};

/// When nothing flows through the layer (no steps, or no units): zero weight gradients
/// `grads` and input gradient `dx`.
pub(crate) fn zero_gradients<const N: usize>(grads: [&mut [f32]; N], dx: Option<&mut [f32]>) {
    for g in grads.into_iter().chain(dx) {
        g.fill(0.0);
    }
}

/// `dw_hh = Σ_t d_hh[t]ᵀ · h_{t-1}` over `d_hh` `[T, B, G·H]`: step 0 against `h0`, steps
/// 1.. against `y[0..T-1]`.
pub(crate) fn hidden_weight_gradient(
    d: &impl RecurrentDims,
    d_hh: &[f32],
    (h0, y): (&[f32], &[f32]),
    dw_hh: &mut [f32],
) -> Result<()> {
    let (steps, batch, hidden) = d.sizes();
    let width = d.gate_width();
    let mut dw_hh = mat_mut(dw_hh, width, hidden)?;
    let d_0 = mat(&d_hh[..d.step_gates()], batch, width)?;
    gemm(1.0, d_0.t(), mat(h0, batch, hidden)?, 0.0, &mut dw_hh)?;
    if steps > 1 {
        let later = (steps - 1) * batch;
        let d_rest = mat(&d_hh[d.step_gates()..], later, width)?;
        let h_prev = mat(&y[..later * hidden], later, hidden)?;
        gemm(1.0, d_rest.t(), h_prev, 1.0, &mut dw_hh)?;
    }
    Ok(())
}

/// Over dense input `x` `[T, B, input]`: `dw_ih = d_ihᵀ · x` and, if wanted,
/// `dx = d_ih · w_ih`.
pub(crate) fn input_gradients(
    d: &impl RecurrentDims,
    input: usize,
    (d_ih, x, w_ih): (&[f32], &[f32], &[f32]),
    (dw_ih, dx): (&mut [f32], Option<&mut [f32]>),
) -> Result<()> {
    let (rows, width) = (d.rows(), d.gate_width());
    let d_ih = mat(d_ih, rows, width)?;
    let x = mat(x, rows, input)?;
    gemm(1.0, d_ih.t(), x, 0.0, &mut mat_mut(dw_ih, width, input)?)?;
    if let Some(dx) = dx {
        let w_ih = mat(w_ih, width, input)?;
        gemm(1.0, d_ih, w_ih, 0.0, &mut mat_mut(dx, rows, input)?)?;
    }
    Ok(())
}
