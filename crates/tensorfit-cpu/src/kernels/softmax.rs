//! Softmax cross-entropy, the loss of a classifier: `softmax_cross_entropy_forward` and
//! `softmax_cross_entropy_backward`.
//!
//! Fused because the gradient of the pair is simply `probs - onehot`, and because the
//! log-probability of the label can be formed stably as `x_label - max - ln Σ exp(x -
//! max)` without ever taking the log of a rounded-to-zero probability. Labels arrive as
//! `f32` class indices (DType has only F32); a label that is not a whole number in
//! `[0, K)` is bad user data and returns `Error::Input` naming the row.

use tensorfit_core::rows::IGNORE_LABEL;
use tensorfit_core::{Error, Result};

use super::check_len;
use crate::backend_error;

/// `probs = softmax(logits)` row by row for `logits` `[B, K]`, and
/// `loss[0] = mean over rows of -ln probs[row, label[row]]` (an ignored row adds 0).
pub fn softmax_cross_entropy_forward(
    logits: &[f32],
    labels: &[f32],
    loss: &mut [f32],
    probs: &mut [f32],
) -> Result<()> {
    const K: &str = "softmax_cross_entropy_forward";
    let classes = classes(K, logits, labels)?;
    check_len(K, "loss", loss, 1)?;
    check_len(K, "probs", probs, logits.len())?;
    if labels.is_empty() {
        loss[0] = 0.0;
        return Ok(());
    }
    let mut total = 0.0f64;
    let rows = probs
        .chunks_exact_mut(classes)
        .zip(logits.chunks_exact(classes));
    for (r, ((p_row, x_row), &label)) in rows.zip(labels).enumerate() {
        let label = class_index(label, r, classes)?;
        let max = x_row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f32;
        for (p, &x) in p_row.iter_mut().zip(x_row) {
            *p = (x - max).exp();
            sum += *p;
        }
        p_row.iter_mut().for_each(|p| *p /= sum);
        // -ln p[label] = ln Σ exp(x - max) - (x[label] - max)
        if let Some(label) = label {
            total += f64::from(sum.ln() - (x_row[label] - max));
        }
    }
    loss[0] = (total / labels.len() as f64) as f32;
    Ok(())
}

/// `dlogits = (probs - onehot(labels)) · dloss[0] / B`, zero on ignored rows.
pub fn softmax_cross_entropy_backward(
    probs: &[f32],
    labels: &[f32],
    dloss: &[f32],
    dlogits: &mut [f32],
) -> Result<()> {
    const K: &str = "softmax_cross_entropy_backward";
    let classes = classes(K, probs, labels)?;
    check_len(K, "dloss", dloss, 1)?;
    check_len(K, "dlogits", dlogits, probs.len())?;
    if labels.is_empty() {
        return Ok(());
    }
    let scale = dloss[0] / labels.len() as f32;
    let rows = dlogits
        .chunks_exact_mut(classes)
        .zip(probs.chunks_exact(classes));
    for (r, ((d_row, p_row), &label)) in rows.zip(labels).enumerate() {
        let Some(label) = class_index(label, r, classes)? else {
            d_row.fill(0.0);
            continue;
        };
        for (d, &p) in d_row.iter_mut().zip(p_row) {
            *d = p * scale;
        }
        d_row[label] -= scale;
    }
    Ok(())
}

/// K for a `[B, K]` tensor with `B = labels.len()`.
fn classes(kernel: &str, logits: &[f32], labels: &[f32]) -> Result<usize> {
    if labels.is_empty() {
        return Ok(0);
    }
    if logits.is_empty() || logits.len() % labels.len() != 0 {
        return Err(backend_error(format!(
            "{kernel}: {} logits do not make {} rows",
            logits.len(),
            labels.len()
        )));
    }
    Ok(logits.len() / labels.len())
}

/// The class index stored in `label`, `None` for [`IGNORE_LABEL`], or an input error
/// naming the row.
fn class_index(label: f32, row: usize, classes: usize) -> Result<Option<usize>> {
    // why: `as usize` would silently saturate NaN to 0 and truncate 2.5 to 2.
    if label.fract() == 0.0 && label >= 0.0 && (label as f64) < classes as f64 {
        Ok(Some(label as usize))
    } else if label == IGNORE_LABEL {
        Ok(None)
    } else {
        Err(Error::Input(format!(
            "label of row {row} is {label}, not a class index in [0, {classes})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_is_stable_and_matches_the_definition() {
        let logits = [1000.0, 1001.0, 1002.0, -3.0, 0.0, 3.0];
        let (mut loss, mut probs) = ([0.0], [0.0; 6]);
        softmax_cross_entropy_forward(&logits, &[2.0, 0.0], &mut loss, &mut probs).unwrap();
        // Row 0 shifted by its max: [-2, -1, 0], label 2; row 1: [-6, -3, 0], label 0.
        let z0: f64 = [-2.0f64, -1.0, 0.0].iter().map(|v| v.exp()).sum();
        let z1: f64 = [-6.0f64, -3.0, 0.0].iter().map(|v| v.exp()).sum();
        let p = |v: f64| v.exp() / z0;
        let want_loss = (-(1.0 / z0).ln() - ((-6.0f64).exp() / z1).ln()) / 2.0;
        for (got, want) in probs[..3].iter().zip([p(-2.0), p(-1.0), p(0.0)]) {
            assert!((*got as f64 - want).abs() < 1e-6);
        }
        assert!(
            (loss[0] as f64 - want_loss).abs() < 1e-4,
            "{} vs {want_loss}",
            loss[0]
        );
    }

    #[test]
    fn bad_labels_are_input_errors_naming_the_row() {
        let logits = [0.0; 6];
        let (mut loss, mut probs) = ([0.0], [0.0; 6]);
        for bad in [3.0, -2.0, 0.5, f32::NAN, f32::INFINITY] {
            let err = softmax_cross_entropy_forward(&logits, &[0.0, bad], &mut loss, &mut probs)
                .unwrap_err();
            assert!(matches!(err, Error::Input(_)), "{err}");
            assert!(err.to_string().contains("row 1"), "{err}");
            let mut d = [0.0; 6];
            assert!(softmax_cross_entropy_backward(&probs, &[bad, 0.0], &[1.0], &mut d).is_err());
        }
    }

    #[test]
    fn backward_is_probs_minus_onehot_scaled() {
        let probs = [0.2, 0.3, 0.5, 0.1, 0.1, 0.8];
        let mut d = [0.0; 6];
        softmax_cross_entropy_backward(&probs, &[1.0, 2.0], &[4.0], &mut d).unwrap();
        let want = [0.4, -1.4, 1.0, 0.2, 0.2, -0.4];
        for (g, w) in d.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{d:?}");
        }
    }

    #[test]
    fn an_ignored_row_adds_no_loss_and_gets_no_gradient() {
        let logits = [1.0, 2.0, 3.0, 9.0, -4.0, 0.5];
        let (mut both, mut probs) = ([0.0], [0.0; 6]);
        softmax_cross_entropy_forward(&logits, &[2.0, IGNORE_LABEL], &mut both, &mut probs)
            .unwrap();
        let (mut first, mut p1) = ([0.0], [0.0; 3]);
        softmax_cross_entropy_forward(&logits[..3], &[2.0], &mut first, &mut p1).unwrap();
        // The sum over counted rows, divided by all rows.
        assert_eq!(both[0], first[0] / 2.0);
        assert!(
            (probs[3] - 1.0).abs() < 1e-3,
            "probabilities still computed"
        );
        let mut d = [7.0; 6];
        softmax_cross_entropy_backward(&probs, &[2.0, IGNORE_LABEL], &[1.0], &mut d).unwrap();
        assert_eq!(&d[3..], &[0.0; 3]);
        assert!(d[2] < 0.0);
    }
}
