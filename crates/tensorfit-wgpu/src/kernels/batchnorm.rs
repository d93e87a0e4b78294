//! Batch normalisation over the batch of a `[B, C]` input: `batchnorm_forward`,
//! `batchnorm_backward`, `batchnorm_stats_update` (shaders/batchnorm.wgsl).
//!
//! As on the CPU, training normalises with the batch statistics (biased variance, two
//! passes) and returns them, and inference with the running statistics. Each reduction
//! runs over blocks of rows ([`rects`]) in row order, so an input larger than one binding
//! still reduces in order: later blocks add to the earlier partial sums, and the last
//! finishes. The batch mean is `sum_to_shape`'s column sum ([`sum_rows`]) scaled by 1/B.

use tensorfit_core::kernels::batchnorm_dims;
use tensorfit_core::{args, Result};

use super::elementwise::{check_len, fill, per_element, reduction_values, sum_rows};
use super::{bits, block_values, word, Launches};
use crate::backend_error;
use crate::shaders::{
    BATCHNORM_BACKWARD, BATCHNORM_BACKWARD_SUMS, BATCHNORM_FORWARD, BATCHNORM_FORWARD_VAR,
    BATCHNORM_STATS_UPDATE,
};
use crate::window::{rects, Operand, Rect, Region, LOOP_BUDGET};

/// Where the statistics of [`batchnorm_forward`] come from (see `tensorfit_core::args`).
type Stats = args::BatchNormStats<Region, Region>;

/// How a launch over block `r` of a `[B, C]` input sees a tensor: its rows of a `[B, C]`
/// tensor, or its channels of a `[C]` one.
enum Part {
    Rows(Region),
    Cols(Region),
}
use Part::{Cols, Rows};

/// The operands of a launch over block `r`, in the order given.
fn block_operands<const N: usize>(r: &Rect, channels: usize, parts: [Part; N]) -> Vec<Operand> {
    parts
        .into_iter()
        .map(|p| match p {
            Rows(t) => Operand::part(t, r.touched(channels)),
            Cols(t) => Operand::part(t, r.cols.clone()),
        })
        .collect()
}

/// `y = (x - mean) / sqrt(var + eps) · gamma + beta` for `x` `[B, C]`.
pub(crate) fn batchnorm_forward(
    l: &mut Launches,
    eps: f32,
    [x, gamma, beta]: [Region; 3],
    stats: Stats,
    y: Region,
) -> Result<()> {
    const K: &str = "batchnorm_forward";
    let (batch, channels) = batchnorm_dims(K, x.len, gamma.len).map_err(backend_error)?;
    check_len(K, "beta", beta, channels)?;
    check_len(K, "y", y, x.len)?;
    if channels == 0 {
        return Ok(());
    }
    let blocks = rects(batch, channels, l.span(), LOOP_BUDGET);
    let (mean, var) = match stats {
        Stats::Batch { mean, var } => {
            check_len(K, "mean", mean, channels)?;
            check_len(K, "var", var, channels)?;
            let inv_batch = 1.0 / batch as f32;
            sum_rows(l, x, batch, channels, mean, inv_batch);
            for r in &blocks {
                let ops = vec![
                    Operand::part(x, r.touched(channels)),
                    Operand::part(mean, r.cols.clone()),
                    Operand::part(var, r.cols.clone()),
                ];
                let values = reduction_values(r, batch, channels, inv_batch);
                l.push(&BATCHNORM_FORWARD_VAR, ops, values, r.cols.len());
            }
            (mean, var)
        }
        Stats::Running { mean, var } => {
            check_len(K, "running_mean", mean, channels)?;
            check_len(K, "running_var", var, channels)?;
            (mean, var)
        }
    };
    for r in &blocks {
        let parts = [
            Rows(x),
            Cols(gamma),
            Cols(beta),
            Cols(mean),
            Cols(var),
            Rows(y),
        ];
        let ops = block_operands(r, channels, parts);
        let mut values = block_values(r, channels);
        values.push(bits(eps));
        l.push(&BATCHNORM_FORWARD, ops, values, r.len());
    }
    Ok(())
}

/// The inputs of `Op::BatchNormBackward` (see `tensorfit_core::args`).
type BackwardInputs = args::BatchNormBackwardInputs<Region>;

/// Gradients of [`batchnorm_forward`]: `dbeta = Σ_b dy`, `dgamma = Σ_b dy·x̂`, and `dx`
/// (through the statistics in training; see shaders/batchnorm.wgsl).
pub(crate) fn batchnorm_backward(
    l: &mut Launches,
    eps: f32,
    training: bool,
    inp: &BackwardInputs,
    [dx, dgamma, dbeta]: [Region; 3],
) -> Result<()> {
    const K: &str = "batchnorm_backward";
    let (x, mean, var, dy) = (inp.x, inp.mean, inp.var, inp.dy);
    let (batch, channels) = batchnorm_dims(K, x.len, inp.gamma.len).map_err(backend_error)?;
    for (what, r, want) in [
        ("mean", mean, channels),
        ("var", var, channels),
        ("dy", dy, x.len),
        ("dx", dx, x.len),
        ("dgamma", dgamma, channels),
        ("dbeta", dbeta, channels),
    ] {
        check_len(K, what, r, want)?;
    }
    if channels == 0 {
        return Ok(());
    }
    let blocks = rects(batch, channels, l.span(), LOOP_BUDGET);
    if blocks.is_empty() {
        // No rows: both sums are empty.
        fill(l, 0.0, dgamma);
        fill(l, 0.0, dbeta);
    }
    for r in &blocks {
        let parts = [
            Rows(x),
            Cols(mean),
            Cols(var),
            Rows(dy),
            Cols(dgamma),
            Cols(dbeta),
        ];
        let ops = block_operands(r, channels, parts);
        let mut values = block_values(r, channels);
        values.extend([u32::from(r.rows.start > 0), bits(eps)]);
        l.push(&BATCHNORM_BACKWARD_SUMS, ops, values, r.cols.len());
    }
    for r in &blocks {
        let parts = [
            Rows(x),
            Cols(inp.gamma),
            Cols(mean),
            Cols(var),
            Rows(dy),
            Cols(dgamma),
            Cols(dbeta),
            Rows(dx),
        ];
        let ops = block_operands(r, channels, parts);
        let mut values = block_values(r, channels);
        values.extend([u32::from(training), word(batch), bits(eps)]);
        l.push(&BATCHNORM_BACKWARD, ops, values, r.len());
    }
    Ok(())
}

/// Update op: `running = (1 - momentum)·running + momentum·stat`, the variance made
/// unbiased by `unbias = B / (B - 1)` first.
pub(crate) fn batchnorm_stats_update(
    l: &mut Launches,
    momentum: f32,
    unbias: f32,
    [mean, var]: [Region; 2],
    [running_mean, running_var]: [Region; 2],
) -> Result<()> {
    const K: &str = "batchnorm_stats_update";
    check_len(K, "var", var, mean.len)?;
    check_len(K, "running_mean", running_mean, mean.len)?;
    check_len(K, "running_var", running_var, mean.len)?;
    per_element(
        l,
        &BATCHNORM_STATS_UPDATE,
        &[mean, var, running_mean, running_var],
        mean.len,
        &[bits(momentum), bits(unbias)],
    );
    Ok(())
}
