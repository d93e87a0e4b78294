//! Layer normalisation over the features of each row of `x` `[rows, F]` (PyTorch's
//! `nn.LayerNorm(F)`): `layernorm_forward`, `layernorm_backward`.
//!
//! Each row is normalised by its own mean and biased variance, computed in two passes
//! (mean, then squared deviations) for accuracy; the forward returns each row's mean and
//! `rstd = 1/sqrt(var + eps)`, so the backward reads exactly what the forward used. The
//! parameter gradients sum over the rows in row order, so they are the same bits
//! whatever the thread count.

use tensorfit_core::args::LayerNormBackwardInputs;
use tensorfit_core::kernels::batchnorm_dims;
use tensorfit_core::Result;

use super::check_len;
use crate::backend_error;

/// `y = (x - mean) · rstd · gamma + beta` per row of `x` `[rows, F]`, with each row's
/// `mean` and `rstd` `[rows]`.
pub fn layernorm_forward(
    eps: f32,
    (x, gamma, beta): (&[f32], &[f32], &[f32]),
    y: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
) -> Result<()> {
    const K: &str = "layernorm_forward";
    let (rows, features) = batchnorm_dims(K, x.len(), gamma.len()).map_err(backend_error)?;
    check_len(K, "beta", beta, features)?;
    check_len(K, "y", y, x.len())?;
    check_len(K, "mean", mean, rows)?;
    check_len(K, "rstd", rstd, rows)?;
    if features == 0 {
        return Ok(());
    }
    let inv_f = 1.0 / features as f32;
    let rows_of = x.chunks_exact(features).zip(y.chunks_exact_mut(features));
    for ((x_row, y_row), (m, r)) in rows_of.zip(mean.iter_mut().zip(rstd.iter_mut())) {
        *m = x_row.iter().sum::<f32>() * inv_f;
        let var = x_row.iter().map(|&v| (v - *m) * (v - *m)).sum::<f32>() * inv_f;
        *r = 1.0 / (var + eps).sqrt();
        for (((yv, &xv), &g), &b) in y_row.iter_mut().zip(x_row).zip(gamma).zip(beta) {
            *yv = (xv - *m) * *r * g + b;
        }
    }
    Ok(())
}

/// With `xhat = (x - mean) · rstd` and `g = dy · gamma` per row:
/// `dx = rstd · (g - mean(g) - xhat · mean(g · xhat))`, `dgamma = Σ_rows dy · xhat`,
/// `dbeta = Σ_rows dy`.
pub fn layernorm_backward(
    i: &LayerNormBackwardInputs<&[f32]>,
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) -> Result<()> {
    const K: &str = "layernorm_backward";
    let (rows, features) = batchnorm_dims(K, i.x.len(), i.gamma.len()).map_err(backend_error)?;
    check_len(K, "mean", i.mean, rows)?;
    check_len(K, "rstd", i.rstd, rows)?;
    check_len(K, "dy", i.dy, i.x.len())?;
    check_len(K, "dx", dx, i.x.len())?;
    check_len(K, "dgamma", dgamma, features)?;
    check_len(K, "dbeta", dbeta, features)?;
    dgamma.fill(0.0);
    dbeta.fill(0.0);
    if features == 0 {
        return Ok(());
    }
    let inv_f = 1.0 / features as f32;
    let xs = i.x.chunks_exact(features).zip(i.dy.chunks_exact(features));
    let stats = i.mean.iter().zip(i.rstd);
    for (((x_row, dy_row), dx_row), (&m, &r)) in xs.zip(dx.chunks_exact_mut(features)).zip(stats) {
        let (mut g_mean, mut gx_mean) = (0.0f32, 0.0f32);
        for ((&xv, &d), &gm) in x_row.iter().zip(dy_row).zip(i.gamma) {
            let xhat = (xv - m) * r;
            g_mean += d * gm;
            gx_mean += d * gm * xhat;
        }
        g_mean *= inv_f;
        gx_mean *= inv_f;
        let each = x_row.iter().zip(dy_row).zip(i.gamma).zip(dx_row.iter_mut());
        for (((&xv, &d), &gm), out) in each {
            let xhat = (xv - m) * r;
            *out = r * (d * gm - g_mean - xhat * gx_mean);
        }
        let sums = dgamma.iter_mut().zip(dbeta.iter_mut());
        for (((dg, db), &xv), &d) in sums.zip(x_row).zip(dy_row) {
            *dg += d * (xv - m) * r;
            *db += d;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row normalised in f64, naively.
    fn reference(x: &[f32], gamma: &[f32], beta: &[f32], eps: f64) -> Vec<f64> {
        let f = gamma.len();
        x.chunks(f)
            .flat_map(|row| {
                let mean = row.iter().map(|&v| v as f64).sum::<f64>() / f as f64;
                let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / f as f64;
                let rstd = 1.0 / (var + eps).sqrt();
                row.iter()
                    .enumerate()
                    .map(move |(c, &v)| (v as f64 - mean) * rstd * gamma[c] as f64 + beta[c] as f64)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn each_row_is_normalised_by_its_own_statistics() {
        let (rows, f) = (5, 7);
        let x: Vec<f32> = (0..rows * f)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.3)
            .collect();
        let gamma: Vec<f32> = (0..f).map(|c| 0.5 + c as f32 * 0.1).collect();
        let beta: Vec<f32> = (0..f).map(|c| c as f32 * -0.2).collect();
        let (mut y, mut mean, mut rstd) = (vec![0.0; rows * f], vec![0.0; rows], vec![0.0; rows]);
        layernorm_forward(1e-5, (&x, &gamma, &beta), &mut y, &mut mean, &mut rstd).unwrap();
        for (got, want) in y.iter().zip(reference(&x, &gamma, &beta, 1e-5)) {
            assert!((*got as f64 - want).abs() < 1e-5, "{got} vs {want}");
        }
    }

    #[test]
    fn the_backward_is_the_forwards_derivative() {
        let (rows, f) = (3, 5);
        let x: Vec<f32> = (0..rows * f)
            .map(|i| ((i * 13 % 11) as f32 - 5.0) * 0.4)
            .collect();
        let gamma: Vec<f32> = (0..f).map(|c| 1.0 + c as f32 * 0.25).collect();
        let beta = vec![0.1; f];
        let dy: Vec<f32> = (0..rows * f)
            .map(|i| ((i * 7 % 5) as f32 - 2.0) * 0.5)
            .collect();
        // The loss Σ dy · y, differentiated numerically in f64.
        let loss = |x: &[f32], gamma: &[f32], beta: &[f32]| -> f64 {
            let y = reference(x, gamma, beta, 1e-5);
            y.iter().zip(&dy).map(|(a, &b)| a * b as f64).sum()
        };
        let (mut y, mut mean, mut rstd) = (vec![0.0; rows * f], vec![0.0; rows], vec![0.0; rows]);
        layernorm_forward(1e-5, (&x, &gamma, &beta), &mut y, &mut mean, &mut rstd).unwrap();
        let (mut dx, mut dgamma, mut dbeta) = (vec![0.0; rows * f], vec![0.0; f], vec![0.0; f]);
        let i = LayerNormBackwardInputs {
            x: &x[..],
            gamma: &gamma[..],
            mean: &mean[..],
            rstd: &rstd[..],
            dy: &dy[..],
        };
        layernorm_backward(&i, &mut dx, &mut dgamma, &mut dbeta).unwrap();
        let h = 1e-3f32;
        let numeric = |k: usize, which: usize| -> f64 {
            let mut v = [x.clone(), gamma.clone(), beta.clone()];
            v[which][k] += h;
            let up = loss(&v[0], &v[1], &v[2]);
            v[which][k] -= 2.0 * h;
            let down = loss(&v[0], &v[1], &v[2]);
            (up - down) / (2.0 * h as f64)
        };
        for (k, &g) in dx.iter().enumerate() {
            assert!(
                (g as f64 - numeric(k, 0)).abs() < 2e-3,
                "dx[{k}] {g} vs {}",
                numeric(k, 0)
            );
        }
        for c in 0..f {
            assert!(
                (dgamma[c] as f64 - numeric(c, 1)).abs() < 2e-3,
                "dgamma[{c}]"
            );
            assert!((dbeta[c] as f64 - numeric(c, 2)).abs() < 2e-3, "dbeta[{c}]");
        }
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let (mut y, mut m, mut r) = (vec![0.0; 6], vec![0.0; 2], vec![0.0; 2]);
        let x = [0.0; 6];
        assert!(
            layernorm_forward(1e-5, (&x, &[1.0; 4], &[0.0; 4]), &mut y, &mut m, &mut r).is_err()
        );
        assert!(
            layernorm_forward(1e-5, (&x, &[1.0; 3], &[0.0; 2]), &mut y, &mut m, &mut r).is_err()
        );
        let mut short = vec![0.0; 1];
        assert!(
            layernorm_forward(1e-5, (&x, &[1.0; 3], &[0.0; 3]), &mut y, &mut short, &mut r)
                .is_err()
        );
    }
}
