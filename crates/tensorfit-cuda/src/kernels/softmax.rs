//! Softmax cross-entropy: `softmax_cross_entropy_forward` and
//! `softmax_cross_entropy_backward` (kernels in `softmax.cu`).
//!
//! A bad label (not a whole number in `[0, K)`) is found on the GPU and left in the status
//! word; the backend reports it as `Error::Input` naming the row at the next `synchronize`
//! or `read`, where the CPU reference reports it at once.

use tensorfit_core::Result;

use super::{int, Gpu};
use super::{SOFTMAX_CROSS_ENTROPY_BACKWARD, SOFTMAX_CROSS_ENTROPY_FORWARD};
use crate::driver::{Arg, DevPtr};

/// `probs = softmax(logits)` row by row for `logits` `[batch, classes]`, and
/// `loss[0]` = the mean over rows of `-ln probs[row, label[row]]`.
pub fn softmax_cross_entropy_forward(
    g: &Gpu<'_>,
    logits: DevPtr,
    labels: DevPtr,
    loss: DevPtr,
    probs: DevPtr,
    (batch, classes): (usize, usize),
) -> Result<()> {
    if batch > 0 && classes == 0 {
        // Every label is out of range: report the first row, as the CPU reference does.
        return Err(tensorfit_core::Error::Input(format!(
            "label of row 0 is not a class index in [0, {classes})"
        )));
    }
    let (b, k) = (int("batch", batch)?, int("classes", classes)?);
    g.launch(
        SOFTMAX_CROSS_ENTROPY_FORWARD,
        (1, 1, 1),
        (256, 1, 1),
        &[
            Arg::Ptr(logits),
            Arg::Ptr(labels),
            Arg::Ptr(loss),
            Arg::Ptr(probs),
            Arg::Ptr(g.status),
            Arg::I32(b),
            Arg::I32(k),
        ],
    )
}

/// `dlogits = (probs - onehot(labels)) · dloss[0] / batch`.
pub fn softmax_cross_entropy_backward(
    g: &Gpu<'_>,
    probs: DevPtr,
    labels: DevPtr,
    dloss: DevPtr,
    dlogits: DevPtr,
    (batch, classes): (usize, usize),
) -> Result<()> {
    let (b, k) = (int("batch", batch)?, int("classes", classes)?);
    g.launch_1d(
        SOFTMAX_CROSS_ENTROPY_BACKWARD,
        batch as i64 * classes as i64,
        &[
            Arg::Ptr(probs),
            Arg::Ptr(labels),
            Arg::Ptr(dloss),
            Arg::Ptr(dlogits),
            Arg::Ptr(g.status),
            Arg::I32(b),
            Arg::I32(k),
        ],
    )
}
