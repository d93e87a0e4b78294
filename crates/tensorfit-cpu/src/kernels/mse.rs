//! Mean squared error, the loss of a regression: `mse_loss_forward` and
//! `mse_loss_backward`, PyTorch's `nn.MSELoss()` (the mean over every element).

use tensorfit_core::Result;

use super::check_len;

/// `loss[0] = mean over all elements of (pred - target)²`, summed in f64.
pub fn mse_loss_forward(pred: &[f32], target: &[f32], loss: &mut [f32]) -> Result<()> {
    const K: &str = "mse_loss_forward";
    check_len(K, "target", target, pred.len())?;
    check_len(K, "loss", loss, 1)?;
    let total: f64 = pred
        .iter()
        .zip(target)
        .map(|(&p, &t)| f64::from(p - t).powi(2))
        .sum();
    loss[0] = (total / pred.len().max(1) as f64) as f32;
    Ok(())
}

/// `dpred = 2 (pred - target) · dloss[0] / numel`.
pub fn mse_loss_backward(
    pred: &[f32],
    target: &[f32],
    dloss: &[f32],
    dpred: &mut [f32],
) -> Result<()> {
    const K: &str = "mse_loss_backward";
    check_len(K, "target", target, pred.len())?;
    check_len(K, "dloss", dloss, 1)?;
    check_len(K, "dpred", dpred, pred.len())?;
    let scale = 2.0 * dloss[0] / pred.len().max(1) as f32;
    for ((d, &p), &t) in dpred.iter_mut().zip(pred).zip(target) {
        *d = (p - t) * scale;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_is_the_mean_of_squared_differences_over_every_element() {
        let pred = [1.0, -2.0, 0.5, 3.0, 0.0, 4.0];
        let target = [0.0, -2.0, 1.5, 1.0, -1.0, 4.0];
        let mut loss = [0.0];
        mse_loss_forward(&pred, &target, &mut loss).unwrap();
        let want = (1.0 + 0.0 + 1.0 + 4.0 + 1.0 + 0.0) / 6.0;
        assert!((loss[0] - want).abs() < 1e-6, "{} vs {want}", loss[0]);
    }

    #[test]
    fn backward_is_twice_the_difference_scaled_by_dloss_over_numel() {
        let pred = [1.0, -2.0, 0.5, 3.0];
        let target = [0.0, -1.0, 0.5, 1.0];
        let mut d = [0.0; 4];
        mse_loss_backward(&pred, &target, &[4.0], &mut d).unwrap();
        let want = [2.0, -2.0, 0.0, 4.0];
        for (g, w) in d.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{d:?}");
        }
    }

    #[test]
    fn mismatched_lengths_are_errors() {
        let mut loss = [0.0];
        assert!(mse_loss_forward(&[0.0; 3], &[0.0; 2], &mut loss).is_err());
        let mut d = [0.0; 3];
        assert!(mse_loss_backward(&[0.0; 3], &[0.0; 3], &[1.0], &mut d[..2]).is_err());
    }
}
