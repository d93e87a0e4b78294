//! The optimizer step: `adam_update` (kernel in `adam.cu`), one Adam step with PyTorch's
//! formula, the bias corrections folded by the host into the two `scalars`.

use tensorfit_core::args::{AdamInputs, AdamTargets};
use tensorfit_core::{AdamParams, Result};

use super::ADAM_UPDATE;
use super::{count, Gpu};
use crate::driver::{Arg, DevPtr};

/// Update op over `n` parameters: `param`, `m`, `v` read and overwritten in place.
pub fn adam_update(
    g: &Gpu<'_>,
    p: AdamParams,
    inp: &AdamInputs<DevPtr>,
    targets: &AdamTargets<DevPtr>,
    n: usize,
) -> Result<()> {
    g.launch_1d(
        ADAM_UPDATE,
        count(n),
        &[
            Arg::Ptr(inp.grad),
            Arg::Ptr(inp.scalars),
            Arg::Ptr(targets.param),
            Arg::Ptr(targets.m),
            Arg::Ptr(targets.v),
            Arg::I64(count(n)),
            Arg::F32(p.beta1),
            Arg::F32(p.beta2),
            Arg::F32(p.eps),
            Arg::F32(p.weight_decay),
        ],
    )
}
