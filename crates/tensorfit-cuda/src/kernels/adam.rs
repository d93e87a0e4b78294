//! The optimizer step: `adam_update` (kernel in `adam.cu`), one Adam step with PyTorch's
//! formula, the bias corrections folded by the host into the two `scalars`.

use tensorfit_core::{AdamParams, Result};

use super::{count, Gpu};
use crate::driver::{Arg, DevPtr};

/// Update op over `n` parameters: `param`, `m`, `v` read and overwritten in place.
#[allow(clippy::too_many_arguments)]
pub fn adam_update(
    g: &Gpu<'_>,
    p: AdamParams,
    grad: DevPtr,
    scalars: DevPtr,
    param: DevPtr,
    m: DevPtr,
    v: DevPtr,
    n: usize,
) -> Result<()> {
    g.launch_1d(
        "adam_update",
        count(n),
        &[
            Arg::Ptr(grad),
            Arg::Ptr(scalars),
            Arg::Ptr(param),
            Arg::Ptr(m),
            Arg::Ptr(v),
            Arg::I64(count(n)),
            Arg::F32(p.beta1),
            Arg::F32(p.beta2),
            Arg::F32(p.eps),
            Arg::F32(p.weight_decay),
        ],
    )
}
