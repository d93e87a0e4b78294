//! Softmax cross-entropy, the loss of a classifier: `softmax_cross_entropy_forward` and
//! `softmax_cross_entropy_backward` (shaders/softmax.wgsl).
//!
//! Fused as on the CPU: the gradient of the pair is `probs - onehot`, and the loss is
//! formed stably from the logits. The mean over rows is one workgroup's ordered sum per
//! block of rows; blocks (only when the logits exceed one binding) add up in order.
//! Invalid labels cannot be reported from inside a kernel: their rows give NaN (see the
//! shader), where the CPU returns an input error.

use tensorfit_core::Result;

use super::elementwise::{check_len, fill};
use super::{word, Launches};
use crate::backend_error;
use crate::shaders::{SOFTMAX_CROSS_ENTROPY_BACKWARD, SOFTMAX_CROSS_ENTROPY_FORWARD};
use crate::window::{chunks, row_chunks, Operand, Region, LOOP_BUDGET};

/// K for a `[B, K]` tensor with `B = labels.len`.
fn classes(kernel: &str, logits: Region, labels: Region) -> Result<usize> {
    if labels.len == 0 {
        return Ok(0);
    }
    if logits.len == 0 || !logits.len.is_multiple_of(labels.len) {
        return Err(backend_error(format!(
            "{kernel}: {} logits do not make {} rows",
            logits.len, labels.len
        )));
    }
    Ok(logits.len / labels.len)
}

/// `probs = softmax(logits)` row by row for `logits` `[B, K]`, and
/// `loss[0] = mean over rows of -ln probs[row, label[row]]`.
pub(crate) fn softmax_cross_entropy_forward(
    l: &mut Launches,
    logits: Region,
    labels: Region,
    loss: Region,
    probs: Region,
) -> Result<()> {
    const K: &str = "softmax_cross_entropy_forward";
    let k = classes(K, logits, labels)?;
    check_len(K, "loss", loss, 1)?;
    check_len(K, "probs", probs, logits.len)?;
    let batch = labels.len;
    if batch == 0 {
        fill(l, 0.0, loss);
        return Ok(());
    }
    // Each invocation loops over its rows (one per 256) and each row's classes three
    // times: rows per launch keep that within the loop budget.
    let per_launch = 256 * (LOOP_BUDGET / (3 * k + 2)).max(1);
    let blocks = row_chunks(batch, k, l.span(), K)?
        .into_iter()
        .flat_map(|r| chunks(r.len(), per_launch).map(move |c| r.start + c.start..r.start + c.end));
    for (i, rows) in blocks.enumerate() {
        let elements = rows.start * k..rows.end * k;
        let ops = vec![
            Operand::part(logits, elements.clone()),
            Operand::part(labels, rows.clone()),
            Operand::whole(loss),
            Operand::part(probs, elements),
        ];
        let values = vec![
            word(rows.start),
            word(rows.len()),
            word(k),
            u32::from(i > 0),
            u32::from(rows.end == batch),
            word(batch),
        ];
        l.push_groups(&SOFTMAX_CROSS_ENTROPY_FORWARD, ops, values, [1, 1, 1]);
    }
    Ok(())
}

/// `dlogits = (probs - onehot(labels)) · dloss[0] / B`.
pub(crate) fn softmax_cross_entropy_backward(
    l: &mut Launches,
    probs: Region,
    labels: Region,
    dloss: Region,
    dlogits: Region,
) -> Result<()> {
    const K: &str = "softmax_cross_entropy_backward";
    let k = classes(K, probs, labels)?;
    check_len(K, "dloss", dloss, 1)?;
    check_len(K, "dlogits", dlogits, probs.len)?;
    let batch = labels.len;
    if batch == 0 {
        return Ok(());
    }
    for rows in row_chunks(batch, k, l.span(), K)? {
        let elements = rows.start * k..rows.end * k;
        let ops = vec![
            Operand::part(probs, elements.clone()),
            Operand::part(labels, rows.clone()),
            Operand::whole(dloss),
            Operand::part(dlogits, elements.clone()),
        ];
        let values = vec![
            word(elements.start),
            word(elements.len()),
            word(k),
            word(batch),
        ];
        l.push(&SOFTMAX_CROSS_ENTROPY_BACKWARD, ops, values, elements.len());
    }
    Ok(())
}
