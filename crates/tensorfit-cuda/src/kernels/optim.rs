//! SGD and gradient clipping: `sgd_update`, `sum_squares`, `clip_grad` (kernels in
//! `optim.cu`), with PyTorch's formulas.

use tensorfit_core::args::{SgdInputs, SgdTargets};
use tensorfit_core::{Result, SgdParams};

use super::{count, Gpu, BLOCK, CLIP_GRAD, SGD_UPDATE, SUM_SQUARES};
use crate::driver::{Arg, DevPtr};

/// Update op over `n` parameters: `param` and `buf` read and overwritten in place.
pub fn sgd_update(
    g: &Gpu<'_>,
    p: SgdParams,
    inp: &SgdInputs<DevPtr>,
    targets: &SgdTargets<DevPtr>,
    n: usize,
) -> Result<()> {
    g.launch_1d(
        SGD_UPDATE,
        count(n),
        &[
            Arg::Ptr(inp.grad),
            Arg::Ptr(inp.scalars),
            Arg::Ptr(targets.param),
            Arg::Ptr(targets.buf),
            Arg::I64(count(n)),
            Arg::F32(p.momentum),
            Arg::I32(i32::from(p.nesterov)),
            Arg::F32(p.weight_decay),
        ],
    )
}

/// `total = Σ x²` over `n` elements, by one block.
pub fn sum_squares(g: &Gpu<'_>, x: DevPtr, total: DevPtr, n: usize) -> Result<()> {
    let args = [Arg::Ptr(x), Arg::Ptr(total), Arg::I64(count(n))];
    g.launch(SUM_SQUARES, (1, 1, 1), (BLOCK, 1, 1), &args)
}

/// `y = clamp(x · min(1, max_norm / (sqrt(total_sq) + 1e-6)), -value, value)` over `n`
/// elements.
pub fn clip_grad(
    g: &Gpu<'_>,
    [max_norm, value]: [f32; 2],
    [x, total_sq, y]: [DevPtr; 3],
    n: usize,
) -> Result<()> {
    g.launch_1d(
        CLIP_GRAD,
        count(n),
        &[
            Arg::Ptr(x),
            Arg::Ptr(total_sq),
            Arg::Ptr(y),
            Arg::I64(count(n)),
            Arg::F32(max_norm),
            Arg::F32(value),
        ],
    )
}
