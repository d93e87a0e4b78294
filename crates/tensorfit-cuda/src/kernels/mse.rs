//! Mean squared error: `mse_loss_forward` and `mse_loss_backward` (kernels in `mse.cu`),
//! PyTorch's `nn.MSELoss()`.

use tensorfit_core::args::{MseLossBackwardInputs, MseLossInputs};
use tensorfit_core::Result;

use super::{count, Gpu, BLOCK, MSE_LOSS_BACKWARD, MSE_LOSS_FORWARD};
use crate::driver::{Arg, DevPtr};

/// `loss = mean of (pred - target)²` over `n` elements, by one block.
pub fn mse_loss_forward(
    g: &Gpu<'_>,
    i: &MseLossInputs<DevPtr>,
    loss: DevPtr,
    n: usize,
) -> Result<()> {
    let args = [
        Arg::Ptr(i.pred),
        Arg::Ptr(i.target),
        Arg::Ptr(loss),
        Arg::I64(count(n)),
    ];
    g.launch(MSE_LOSS_FORWARD, (1, 1, 1), (BLOCK, 1, 1), &args)
}

/// `dpred = 2 (pred - target) · dloss / n` over `n` elements.
pub fn mse_loss_backward(
    g: &Gpu<'_>,
    i: &MseLossBackwardInputs<DevPtr>,
    dpred: DevPtr,
    n: usize,
) -> Result<()> {
    let args = [
        Arg::Ptr(i.pred),
        Arg::Ptr(i.target),
        Arg::Ptr(i.dloss),
        Arg::Ptr(dpred),
        Arg::I64(count(n)),
    ];
    g.launch_1d(MSE_LOSS_BACKWARD, count(n), &args)
}
