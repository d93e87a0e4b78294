//! Batch normalisation over the batch of a `[B, C]` input: `batchnorm_forward`,
//! `batchnorm_backward`, `batchnorm_stats_update`.
//!
//! Training normalises with the batch statistics (the *biased* variance, as PyTorch and
//! cuDNN do) and returns them, so that the backward pass and the running-statistics
//! update read exactly what the forward used. Inference normalises with the running
//! statistics, which makes the op an affine map of `x`, so its backward is one product.
//! Rows are contiguous, so every reduction walks the rows and accumulates per channel.

use tensorfit_core::kernels::batchnorm_dims;
use tensorfit_core::{args, Result};

use super::check_len;
use crate::backend_error;

/// Where the statistics of [`batchnorm_forward`] come from (see
/// [`args::BatchNormStats`]).
pub type BatchNormStats<'a> = args::BatchNormStats<&'a [f32], &'a mut [f32]>;

/// `y = (x - mean) / sqrt(var + eps) · gamma + beta` for `x` `[B, C]`, `gamma` and
/// `beta` `[C]`.
pub fn batchnorm_forward(
    eps: f32,
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    stats: BatchNormStats<'_>,
    y: &mut [f32],
) -> Result<()> {
    const K: &str = "batchnorm_forward";
    let (batch, channels) = batchnorm_dims(K, x.len(), gamma.len()).map_err(backend_error)?;
    check_len(K, "beta", beta, channels)?;
    check_len(K, "y", y, x.len())?;
    if channels == 0 {
        return Ok(());
    }
    let (mean, var): (&[f32], &[f32]) = match stats {
        BatchNormStats::Batch { mean, var } => {
            check_len(K, "mean", mean, channels)?;
            check_len(K, "var", var, channels)?;
            column_mean(x, channels, batch, mean);
            // Two passes (mean first, then squared deviations) for accuracy.
            var.fill(0.0);
            for row in x.chunks_exact(channels) {
                for ((v, &xv), &m) in var.iter_mut().zip(row).zip(mean.iter()) {
                    *v += (xv - m) * (xv - m);
                }
            }
            let inv_b = 1.0 / batch as f32;
            var.iter_mut().for_each(|v| *v *= inv_b);
            (mean, var)
        }
        BatchNormStats::Running { mean, var } => {
            check_len(K, "running_mean", mean, channels)?;
            check_len(K, "running_var", var, channels)?;
            (mean, var)
        }
    };
    for (y_row, x_row) in y.chunks_exact_mut(channels).zip(x.chunks_exact(channels)) {
        for c in 0..channels {
            let inv_std = 1.0 / (var[c] + eps).sqrt();
            y_row[c] = (x_row[c] - mean[c]) * inv_std * gamma[c] + beta[c];
        }
    }
    Ok(())
}

/// The inputs of [`batchnorm_backward`] (see [`args::BatchNormBackwardInputs`]).
pub type BatchNormBackwardInputs<'a> = args::BatchNormBackwardInputs<&'a [f32]>;

/// Gradients of [`batchnorm_forward`]. With `x̂ = (x - mean)·inv_std` and
/// `dx̂ = dy·gamma`: `dbeta = Σ_b dy`, `dgamma = Σ_b dy·x̂`, and
/// - training (the statistics depend on `x`):
///   `dx = inv_std / B · (B·dx̂ - Σ_b dx̂ - x̂·Σ_b dx̂·x̂)`;
/// - inference (the statistics are constants): `dx = dx̂ · inv_std`.
pub fn batchnorm_backward(
    eps: f32,
    training: bool,
    inp: &BatchNormBackwardInputs<'_>,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) -> Result<()> {
    const K: &str = "batchnorm_backward";
    let BatchNormBackwardInputs {
        x,
        gamma,
        mean,
        var,
        dy,
    } = *inp;
    let (batch, channels) = batchnorm_dims(K, x.len(), gamma.len()).map_err(backend_error)?;
    check_len(K, "mean", mean, channels)?;
    check_len(K, "var", var, channels)?;
    check_len(K, "dy", dy, x.len())?;
    check_len(K, "dx", dx, x.len())?;
    check_len(K, "dgamma", dgamma, channels)?;
    check_len(K, "dbeta", dbeta, channels)?;
    if channels == 0 {
        return Ok(());
    }
    // The sums and dx are formed in f64: dx is a difference of nearly equal terms
    // (Σ_b dx = 0 exactly), so float32 here would amplify rounding for small batches.
    let inv_std: Vec<f64> = var
        .iter()
        .map(|&v| 1.0 / (v as f64 + eps as f64).sqrt())
        .collect();
    let mut sum_dy = vec![0.0f64; channels];
    let mut sum_dy_xhat = vec![0.0f64; channels];
    for (x_row, dy_row) in x.chunks_exact(channels).zip(dy.chunks_exact(channels)) {
        for c in 0..channels {
            let x_hat = (x_row[c] as f64 - mean[c] as f64) * inv_std[c];
            sum_dy_xhat[c] += dy_row[c] as f64 * x_hat;
            sum_dy[c] += dy_row[c] as f64;
        }
    }
    for c in 0..channels {
        dgamma[c] = sum_dy_xhat[c] as f32;
        dbeta[c] = sum_dy[c] as f32;
    }

    let b = batch as f64;
    let rows = dx.chunks_exact_mut(channels).zip(x.chunks_exact(channels));
    for ((dx_row, x_row), dy_row) in rows.zip(dy.chunks_exact(channels)) {
        for c in 0..channels {
            let (s, g, d) = (inv_std[c], gamma[c] as f64, dy_row[c] as f64);
            dx_row[c] = if training {
                // Σ dx̂ = gamma·Σdy and Σ dx̂·x̂ = gamma·Σ dy·x̂.
                let x_hat = (x_row[c] as f64 - mean[c] as f64) * s;
                (g * s / b * (b * d - sum_dy[c] - x_hat * sum_dy_xhat[c])) as f32
            } else {
                (d * g * s) as f32
            };
        }
    }
    Ok(())
}

/// Update op: `running_mean = (1 - m)·running_mean + m·mean`,
/// `running_var = (1 - m)·running_var + m·var·unbias` (the batch variance made unbiased,
/// `unbias = B / (B - 1)`, as PyTorch does).
pub fn batchnorm_stats_update(
    momentum: f32,
    unbias: f32,
    mean: &[f32],
    var: &[f32],
    running_mean: &mut [f32],
    running_var: &mut [f32],
) -> Result<()> {
    const K: &str = "batchnorm_stats_update";
    check_len(K, "var", var, mean.len())?;
    check_len(K, "running_mean", running_mean, mean.len())?;
    check_len(K, "running_var", running_var, mean.len())?;
    for (r, &m) in running_mean.iter_mut().zip(mean) {
        *r = (1.0 - momentum) * *r + momentum * m;
    }
    for (r, &v) in running_var.iter_mut().zip(var) {
        *r = (1.0 - momentum) * *r + momentum * v * unbias;
    }
    Ok(())
}

/// `mean[c] = Σ_b x[b, c] / B`.
fn column_mean(x: &[f32], channels: usize, batch: usize, mean: &mut [f32]) {
    mean.fill(0.0);
    for row in x.chunks_exact(channels) {
        for (m, &v) in mean.iter_mut().zip(row) {
            *m += v;
        }
    }
    let inv_b = 1.0 / batch.max(1) as f32;
    mean.iter_mut().for_each(|m| *m *= inv_b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_forward_normalises_each_channel() {
        let x = [1.0, 10.0, 3.0, 20.0, 5.0, 30.0]; // [3, 2]
        let (mut mean, mut var, mut y) = ([0.0; 2], [0.0; 2], [0.0; 6]);
        let stats = BatchNormStats::Batch {
            mean: &mut mean,
            var: &mut var,
        };
        batchnorm_forward(0.0, &x, &[1.0, 2.0], &[0.0, 1.0], stats, &mut y).unwrap();
        assert_eq!(mean, [3.0, 20.0]);
        assert!((var[0] - 8.0 / 3.0).abs() < 1e-6 && (var[1] - 200.0 / 3.0).abs() < 1e-4);
        let s = (1.5f32).sqrt();
        for (got, want) in y
            .iter()
            .zip([-s, 1.0 - 2.0 * s, 0.0, 1.0, s, 1.0 + 2.0 * s])
        {
            assert!((got - want).abs() < 1e-5, "{y:?}");
        }
    }

    #[test]
    fn stats_update_uses_momentum_and_unbias() {
        let (mut rm, mut rv) = ([1.0, 2.0], [3.0, 4.0]);
        batchnorm_stats_update(0.1, 2.0, &[10.0, 20.0], &[5.0, 6.0], &mut rm, &mut rv).unwrap();
        let close = |a: f32, b: f32| (a - b).abs() < 1e-5;
        assert!(close(rm[0], 1.9) && close(rm[1], 3.8), "{rm:?}");
        assert!(close(rv[0], 3.7) && close(rv[1], 4.8), "{rv:?}");
    }
}
