//! Mean squared error: `mse_loss_forward` and `mse_loss_backward` (shaders/mse.wgsl), as
//! on the CPU.
//!
//! The forward is one workgroup per chunk of at most one binding and [`LOOP_BUDGET`]
//! elements per invocation, the chunks accumulating in order (as `sum_squares`); the
//! backward is elementwise, in chunks of at most one binding.

use tensorfit_core::Result;

use super::elementwise::check_len;
use super::{word, Launches};
use crate::shaders::{MSE_LOSS_BACKWARD, MSE_LOSS_FORWARD, WG};
use crate::window::{chunks, Operand, Region, LOOP_BUDGET};

/// `loss[0] = mean over all elements of (pred - target)²`.
pub(crate) fn mse_loss_forward(
    l: &mut Launches,
    pred: Region,
    target: Region,
    loss: Region,
) -> Result<()> {
    const K: &str = "mse_loss_forward";
    check_len(K, "target", target, pred.len)?;
    check_len(K, "loss", loss, 1)?;
    let most = l.span().min(WG as usize * LOOP_BUDGET);
    let n = pred.len;
    for (k, c) in chunks(n, most).enumerate() {
        let ops = vec![
            Operand::part(pred, c.clone()),
            Operand::part(target, c.clone()),
            Operand::whole(loss),
        ];
        let values = vec![
            word(c.start),
            word(c.len()),
            u32::from(k > 0),
            u32::from(c.end == n),
            word(n),
        ];
        l.push(&MSE_LOSS_FORWARD, ops, values, WG as usize);
    }
    Ok(())
}

/// `dpred = 2 (pred - target) · dloss[0] / numel`.
pub(crate) fn mse_loss_backward(
    l: &mut Launches,
    pred: Region,
    target: Region,
    dloss: Region,
    dpred: Region,
) -> Result<()> {
    const K: &str = "mse_loss_backward";
    check_len(K, "target", target, pred.len)?;
    check_len(K, "dloss", dloss, 1)?;
    check_len(K, "dpred", dpred, pred.len)?;
    for c in chunks(pred.len, l.span()) {
        let part = |r: Region| Operand::part(r, c.clone());
        let ops = vec![part(pred), part(target), Operand::whole(dloss), part(dpred)];
        let values = vec![word(c.start), word(c.len()), word(pred.len)];
        l.push(&MSE_LOSS_BACKWARD, ops, values, c.len());
    }
    Ok(())
}
