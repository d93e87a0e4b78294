//! Layer normalisation over the features of each row of `x` `[rows, F]`:
//! `layernorm_forward`, `layernorm_backward` (shaders/layernorm.wgsl).
//!
//! The forward and `dx` run one invocation per row over blocks of whole rows
//! ([`row_chunks`]: a row must fit one binding, as softmax's); the parameter gradients
//! are column sums over blocks of rows ([`rects`]) in row order, so an input larger than
//! one binding still sums in order.

use tensorfit_core::kernels::batchnorm_dims;
use tensorfit_core::{args, Result};

use super::elementwise::{check_len, fill};
use super::{bits, block_values, word, Launches};
use crate::backend_error;
use crate::shaders::{LAYERNORM_BACKWARD, LAYERNORM_BACKWARD_SUMS, LAYERNORM_FORWARD};
use crate::window::{rects, row_chunks, Operand, Region, LOOP_BUDGET};

/// `y = (x - mean) · rstd · gamma + beta` per row of `x` `[rows, F]`, with each row's
/// `mean` and `rstd`.
pub(crate) fn layernorm_forward(
    l: &mut Launches,
    eps: f32,
    [x, gamma, beta]: [Region; 3],
    [y, mean, rstd]: [Region; 3],
) -> Result<()> {
    const K: &str = "layernorm_forward";
    let (rows, features) = batchnorm_dims(K, x.len, gamma.len).map_err(backend_error)?;
    check_len(K, "beta", beta, features)?;
    check_len(K, "y", y, x.len)?;
    check_len(K, "mean", mean, rows)?;
    check_len(K, "rstd", rstd, rows)?;
    if features == 0 {
        return Ok(());
    }
    for block in row_chunks(rows, features, l.span(), K)? {
        let elements = block.start * features..block.end * features;
        let ops = vec![
            Operand::part(x, elements.clone()),
            Operand::whole(gamma),
            Operand::whole(beta),
            Operand::part(y, elements),
            Operand::part(mean, block.clone()),
            Operand::part(rstd, block.clone()),
        ];
        let values = vec![
            word(block.start),
            word(block.len()),
            word(features),
            bits(eps),
        ];
        l.push(&LAYERNORM_FORWARD, ops, values, block.len());
    }
    Ok(())
}

/// Gradients of [`layernorm_forward`]: `dbeta = Σ_rows dy`, `dgamma = Σ_rows dy·x̂`,
/// and `dx` row by row (see shaders/layernorm.wgsl).
pub(crate) fn layernorm_backward(
    l: &mut Launches,
    i: &args::LayerNormBackwardInputs<Region>,
    [dx, dgamma, dbeta]: [Region; 3],
) -> Result<()> {
    const K: &str = "layernorm_backward";
    let (rows, features) = batchnorm_dims(K, i.x.len, i.gamma.len).map_err(backend_error)?;
    for (what, r, want) in [
        ("mean", i.mean, rows),
        ("rstd", i.rstd, rows),
        ("dy", i.dy, i.x.len),
        ("dx", dx, i.x.len),
        ("dgamma", dgamma, features),
        ("dbeta", dbeta, features),
    ] {
        check_len(K, what, r, want)?;
    }
    if features == 0 {
        return Ok(());
    }
    let blocks = rects(rows, features, l.span(), LOOP_BUDGET);
    if blocks.is_empty() {
        // No rows: both sums are empty.
        fill(l, 0.0, dgamma);
        fill(l, 0.0, dbeta);
    }
    for r in &blocks {
        let ops = vec![
            Operand::part(i.x, r.touched(features)),
            Operand::part(i.mean, r.rows.clone()),
            Operand::part(i.rstd, r.rows.clone()),
            Operand::part(i.dy, r.touched(features)),
            Operand::part(dgamma, r.cols.clone()),
            Operand::part(dbeta, r.cols.clone()),
        ];
        let mut values = block_values(r, features);
        values.push(u32::from(r.rows.start > 0));
        l.push(&LAYERNORM_BACKWARD_SUMS, ops, values, r.cols.len());
    }
    for block in row_chunks(rows, features, l.span(), K)? {
        let elements = block.start * features..block.end * features;
        let ops = vec![
            Operand::part(i.x, elements.clone()),
            Operand::whole(i.gamma),
            Operand::part(i.mean, block.clone()),
            Operand::part(i.rstd, block.clone()),
            Operand::part(i.dy, elements.clone()),
            Operand::part(dx, elements),
        ];
        let values = vec![word(block.start), word(block.len()), word(features)];
        l.push(&LAYERNORM_BACKWARD, ops, values, block.len());
    }
    Ok(())
}
