//! Layer normalisation over the features of each row of `x` `[rows, F]`:
//! `layernorm_forward`, `layernorm_backward` (kernels in `layernorm.cu`).
//!
//! The forward writes each row's mean and `rstd`, which the backward reads; the backward
//! is `dx` per row and the parameter gradients per feature, sums in double precision.

use tensorfit_core::{args, Result};

use super::{int, Gpu};
use super::{LAYERNORM_BACKWARD_DX, LAYERNORM_BACKWARD_SUMS, LAYERNORM_FORWARD};
use crate::driver::{Arg, DevPtr};

/// Threads per block: one row, or one feature, each.
const BLOCK: u32 = 128;

fn blocks(n: usize) -> (u32, u32, u32) {
    (n.div_ceil(BLOCK as usize) as u32, 1, 1)
}

/// `y = (x - mean) · rstd · gamma + beta` per row, with each row's `mean` and `rstd`.
pub fn layernorm_forward(
    g: &Gpu<'_>,
    eps: f32,
    i: &args::LayerNormInputs<DevPtr>,
    o: &args::LayerNormOutputs<DevPtr>,
    (rows, features): (usize, usize),
) -> Result<()> {
    if rows == 0 || features == 0 {
        return Ok(());
    }
    let (r, f) = (int("rows", rows)?, int("features", features)?);
    g.launch(
        LAYERNORM_FORWARD,
        blocks(rows),
        (BLOCK, 1, 1),
        &[
            Arg::Ptr(i.x),
            Arg::Ptr(i.gamma),
            Arg::Ptr(i.beta),
            Arg::Ptr(o.y),
            Arg::Ptr(o.mean),
            Arg::Ptr(o.rstd),
            Arg::F32(eps),
            Arg::I32(r),
            Arg::I32(f),
        ],
    )
}

/// Gradients of [`layernorm_forward`]: `dx` per row, `dgamma` and `dbeta` per feature.
pub fn layernorm_backward(
    g: &Gpu<'_>,
    i: &args::LayerNormBackwardInputs<DevPtr>,
    o: &args::LayerNormBackwardOutputs<DevPtr>,
    (rows, features): (usize, usize),
) -> Result<()> {
    if features == 0 {
        return Ok(());
    }
    let (r, f) = (int("rows", rows)?, int("features", features)?);
    g.launch(
        LAYERNORM_BACKWARD_SUMS,
        blocks(features),
        (BLOCK, 1, 1),
        &[
            Arg::Ptr(i.x),
            Arg::Ptr(i.mean),
            Arg::Ptr(i.rstd),
            Arg::Ptr(i.dy),
            Arg::Ptr(o.dgamma),
            Arg::Ptr(o.dbeta),
            Arg::I32(r),
            Arg::I32(f),
        ],
    )?;
    if rows == 0 {
        return Ok(());
    }
    g.launch(
        LAYERNORM_BACKWARD_DX,
        blocks(rows),
        (BLOCK, 1, 1),
        &[
            Arg::Ptr(i.x),
            Arg::Ptr(i.gamma),
            Arg::Ptr(i.mean),
            Arg::Ptr(i.rstd),
            Arg::Ptr(i.dy),
            Arg::Ptr(o.dx),
            Arg::I32(r),
            Arg::I32(f),
        ],
    )
}
