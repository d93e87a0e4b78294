//! Batch normalisation over the batch of a `[B, C]` input: `batchnorm_forward`,
//! `batchnorm_backward`, `batchnorm_stats_update` (kernels in `batchnorm.cu`).
//!
//! Training computes the batch mean and *biased* variance into the op's outputs, then
//! normalises with them; inference normalises with the running statistics. The backward
//! pass is one kernel per channel that forms the sums in double precision and writes `dx`,
//! as the CPU reference does.

use tensorfit_core::{args, Result};

use super::{count, int, Gpu};
use super::{
    BATCHNORM_BACKWARD, BATCHNORM_FORWARD_APPLY, BATCHNORM_FORWARD_STATS, BATCHNORM_STATS_UPDATE,
};
use crate::driver::{Arg, DevPtr};

/// Where the statistics of [`batchnorm_forward`] come from (see
/// [`args::BatchNormStats`]).
pub type BatchNormStats = args::BatchNormStats<DevPtr, DevPtr>;

/// Threads per block of the per-channel kernels.
const CHANNEL_BLOCK: u32 = 128;

/// `y = (x - mean) / sqrt(var + eps) · gamma + beta` for `x` `[batch, channels]`.
pub fn batchnorm_forward(
    g: &Gpu<'_>,
    eps: f32,
    [x, gamma, beta]: [DevPtr; 3],
    stats: BatchNormStats,
    y: DevPtr,
    (batch, channels): (usize, usize),
) -> Result<()> {
    if channels == 0 {
        return Ok(());
    }
    let (b, c) = (int("batch", batch)?, int("channels", channels)?);
    let (mean, var) = match stats {
        BatchNormStats::Batch { mean, var } => {
            g.launch(
                BATCHNORM_FORWARD_STATS,
                (channels.div_ceil(CHANNEL_BLOCK as usize) as u32, 1, 1),
                (CHANNEL_BLOCK, 1, 1),
                &[
                    Arg::Ptr(x),
                    Arg::Ptr(mean),
                    Arg::Ptr(var),
                    Arg::I32(b),
                    Arg::I32(c),
                ],
            )?;
            (mean, var)
        }
        BatchNormStats::Running { mean, var } => (mean, var),
    };
    let n = count(batch * channels);
    g.launch_1d(
        BATCHNORM_FORWARD_APPLY,
        n,
        &[
            Arg::Ptr(x),
            Arg::Ptr(gamma),
            Arg::Ptr(beta),
            Arg::Ptr(mean),
            Arg::Ptr(var),
            Arg::Ptr(y),
            Arg::F32(eps),
            Arg::I64(n),
            Arg::I32(c),
        ],
    )
}

/// Gradients of [`batchnorm_forward`]: `dx`, `dgamma`, `dbeta`.
pub fn batchnorm_backward(
    g: &Gpu<'_>,
    (eps, training): (f32, bool),
    inp: &args::BatchNormBackwardInputs<DevPtr>,
    out: &args::BatchNormBackwardOutputs<DevPtr>,
    (batch, channels): (usize, usize),
) -> Result<()> {
    if channels == 0 {
        return Ok(());
    }
    let (b, c) = (int("batch", batch)?, int("channels", channels)?);
    g.launch(
        BATCHNORM_BACKWARD,
        (channels.div_ceil(CHANNEL_BLOCK as usize) as u32, 1, 1),
        (CHANNEL_BLOCK, 1, 1),
        &[
            Arg::Ptr(inp.x),
            Arg::Ptr(inp.gamma),
            Arg::Ptr(inp.mean),
            Arg::Ptr(inp.var),
            Arg::Ptr(inp.dy),
            Arg::Ptr(out.dx),
            Arg::Ptr(out.dgamma),
            Arg::Ptr(out.dbeta),
            Arg::F32(eps),
            Arg::I32(i32::from(training)),
            Arg::I32(b),
            Arg::I32(c),
        ],
    )
}

/// Update op: `running = (1 - momentum)·running + momentum·stat` over `n` channels, the
/// batch variance made unbiased by `unbias` first.
pub fn batchnorm_stats_update(
    g: &Gpu<'_>,
    (momentum, unbias): (f32, f32),
    inp: &args::StatsUpdateInputs<DevPtr>,
    targets: &args::StatsUpdateTargets<DevPtr>,
    n: usize,
) -> Result<()> {
    g.launch_1d(
        BATCHNORM_STATS_UPDATE,
        count(n),
        &[
            Arg::Ptr(inp.mean),
            Arg::Ptr(inp.var),
            Arg::Ptr(targets.running_mean),
            Arg::Ptr(targets.running_var),
            Arg::F32(momentum),
            Arg::F32(unbias),
            Arg::I64(count(n)),
        ],
    )
}
