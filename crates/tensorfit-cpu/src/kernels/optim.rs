//! SGD and gradient clipping: `sgd_update`, `sum_squares`, `clip_grad`, with PyTorch's
//! formulas (`torch.optim.SGD`, `clip_grad_norm_`, `clip_grad_value_`).
//!
//! The learning rate and the gradient's weight in the momentum buffer (1 on the first
//! step, `1 - dampening` after) arrive as host scalars, so the graph is the same every
//! step. These passes are a few per parameter tensor per step and memory-bound, so they
//! run on one thread: what they cost is small beside the LSTM's GEMMs.

use tensorfit_core::{Result, SgdParams};

use super::check_len;

/// Update op: with `(lr, s) = scalars`, `g = grad + weight_decay·param`,
/// `buf = momentum·buf + s·g`, `d = g + momentum·buf` (Nesterov) or `buf`,
/// `param -= lr·d`.
pub fn sgd_update(
    p: SgdParams,
    grad: &[f32],
    scalars: &[f32],
    param: &mut [f32],
    buf: &mut [f32],
) -> Result<()> {
    const K: &str = "sgd_update";
    check_len(K, "scalars", scalars, 2)?;
    check_len(K, "param", param, grad.len())?;
    check_len(K, "buf", buf, grad.len())?;
    let (lr, weight) = (scalars[0], scalars[1]);
    for ((w, &dw), b) in param.iter_mut().zip(grad).zip(buf.iter_mut()) {
        let g = dw + p.weight_decay * *w;
        *b = p.momentum * *b + weight * g;
        let d = if p.nesterov { g + p.momentum * *b } else { *b };
        *w -= lr * d;
    }
    Ok(())
}

/// `total[0] = Σ x²`, accumulated in f64.
pub fn sum_squares(x: &[f32], total: &mut [f32]) -> Result<()> {
    check_len("sum_squares", "total", total, 1)?;
    total[0] = x.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() as f32;
    Ok(())
}

/// The factor `clip_grad_norm_` multiplies every gradient by: `max_norm / (norm + 1e-6)`,
/// at most 1.
pub fn clip_factor(max_norm: f32, total_sq: f32) -> f32 {
    (max_norm / (total_sq.sqrt() + 1e-6)).min(1.0)
}

/// `y = clamp(x · clip_factor(max_norm, total_sq), -value, value)`.
pub fn clip_grad(
    max_norm: f32,
    value: f32,
    x: &[f32],
    total_sq: &[f32],
    y: &mut [f32],
) -> Result<()> {
    const K: &str = "clip_grad";
    check_len(K, "total_sq", total_sq, 1)?;
    check_len(K, "y", y, x.len())?;
    let factor = clip_factor(max_norm, total_sq[0]);
    for (y, &x) in y.iter_mut().zip(x) {
        *y = (x * factor).clamp(-value, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgd_with_nesterov_matches_pytorch_worked_by_hand() {
        // torch.optim.SGD([w], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.5):
        // step 1: g = 0.3 + 0.5·2 = 1.3, buf = g, d = g + 0.9·buf = 2.47, w = 2 - 0.247.
        let p = SgdParams {
            momentum: 0.9,
            nesterov: true,
            weight_decay: 0.5,
        };
        let (mut w, mut buf) = ([2.0f32], [0.0f32]);
        sgd_update(p, &[0.3], &[0.1, 1.0], &mut w, &mut buf).unwrap();
        assert!(
            (buf[0] - 1.3).abs() < 1e-6 && (w[0] - 1.753).abs() < 1e-6,
            "{w:?} {buf:?}"
        );
        // step 2 with dampening 0.5 (weight 0.5): g = 0.3 + 0.8765 = 1.1765,
        // buf = 0.9·1.3 + 0.5·1.1765, d = g + 0.9·buf.
        sgd_update(p, &[0.3], &[0.1, 0.5], &mut w, &mut buf).unwrap();
        let g = 0.3 + 0.5 * 1.753f32;
        let b = 0.9 * 1.3 + 0.5 * g;
        assert!((buf[0] - b).abs() < 1e-6, "{buf:?}");
        assert!((w[0] - (1.753 - 0.1 * (g + 0.9 * b))).abs() < 1e-6, "{w:?}");
    }

    #[test]
    fn clipping_scales_by_the_global_norm_then_clamps_by_value() {
        let x = [3.0f32, -4.0];
        let mut total = [0.0f32];
        sum_squares(&x, &mut total).unwrap();
        assert_eq!(total[0], 25.0);
        let mut y = [0.0f32; 2];
        clip_grad(1.0, f32::INFINITY, &x, &total, &mut y).unwrap();
        let f = 1.0 / (5.0 + 1e-6);
        assert_eq!(y, [3.0 * f, -4.0 * f]);
        // A norm under the limit leaves the gradient alone; the value limit still clamps.
        clip_grad(10.0, 3.5, &x, &total, &mut y).unwrap();
        assert_eq!(y, [3.0, -3.5]);
        assert!(clip_grad(1.0, 1.0, &x, &[], &mut y).is_err());
    }
}
