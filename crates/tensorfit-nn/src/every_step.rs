//! A head on every step (DL4J's `RnnOutputLayer`; a PyTorch language model's `Linear`
//! over the whole LSTM output): what differs from a head on the last step.
//!
//! The head's layers read the top recurrent layer's `y` `[T, B, H]` as `T·B` rows
//! (`tensorfit_core::rows`: no reshape, no copy); BatchNorm's statistics are over all of
//! them (`nn.BatchNorm1d` on the flattened rows). Labels are `[T, B]` class ids for
//! cross-entropy, targets `[T, B, K]` for mean squared error, and predictions come out
//! `[T, B, C]`.
//!
//! A step labelled [`IGNORE_LABEL`] counts neither in the loss nor in the gradient
//! (PyTorch's `ignore_index`): the steps of a padded batch past a sequence's end. The
//! softmax op divides its sum by all `T·B` rows; the graph multiplies that by a `[1]`
//! input `loss_scale` the host writes ([`loss_scale`]: rows / rows counted), so the loss
//! is the mean over the real steps, as PyTorch's masked mean. BatchNorm statistics and
//! mean squared error have no such mask here: over a padded batch they are refused
//! (`check_padded`).

use tensorfit_core::args::BinaryInputs;
pub use tensorfit_core::rows::IGNORE_LABEL;
use tensorfit_core::{BinaryOp, Error, Graph, Op, Result, TensorId};

use crate::description::{HeadOn, LossSpec, ModelDescription};
use crate::model::Mode;
use crate::network::Network;

/// `loss · loss_scale`, with the `[1]` input `loss_scale`: (scaled loss, the input).
pub(crate) fn scaled(g: &mut Graph, loss: TensorId) -> Result<(TensorId, TensorId)> {
    let scale = g.input("loss_scale", [1]);
    let inputs = BinaryInputs { a: loss, b: scale };
    let out = g.apply("loss.over_counted_rows", Op::Binary(BinaryOp::Mul), inputs)?;
    Ok((out.out, scale))
}

/// The value of `loss_scale` for `labels`: rows / rows not ignored (0 when all are).
pub fn loss_scale(labels: &[f32]) -> f32 {
    let counted = labels.iter().filter(|&&l| l != IGNORE_LABEL).count();
    if counted == 0 {
        0.0
    } else {
        (labels.len() as f64 / counted as f64) as f32
    }
}

/// `check_padded` for `model` in `mode`: what a run over padded batches checks before
/// planning.
pub fn check_padded_model(model: &ModelDescription, mode: Mode) -> Result<()> {
    check_padded(&model.network()?, mode)
}

/// Refuses, over a padded batch, what a head on every step cannot mask: a layer that
/// mixes the rows of its batch (BatchNorm) in training (its batch statistics would
/// include the padding; inference normalises each row by the running statistics) and
/// mean squared error.
pub(crate) fn check_padded(net: &Network, mode: Mode) -> Result<()> {
    if net.head_on != HeadOn::EveryStep {
        return Ok(());
    }
    let mixing = net.head_layers().find(|l| l.traits().mixes_rows);
    if let Some(layer) = mixing.filter(|_| mode == Mode::Train) {
        return Err(Error::input(format!(
            "head layer `{}` ({}) mixes the rows of its batch: in a head on every step it cannot train over a padded batch (its statistics would count the padding); drop it or give sequences of one length",
            layer.name(),
            layer.kind()
        )));
    }
    if let LossSpec::MeanSquaredError { .. } = net.out.loss {
        return Err(Error::input(
            "loss \"mse\" on every step cannot run over a padded batch (no target marks a padded step); give sequences of one length",
        ));
    }
    Ok(())
}

/// Accuracy and mean loss over the rows of a classifier's outputs that count: `probs`
/// `[rows, classes]` against `labels` `[rows]`, ignored rows left out.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Tally {
    pub correct: usize,
    pub counted: usize,
}

impl Tally {
    pub fn add(&mut self, probs: &[f32], labels: &[f32], classes: usize) {
        for (row, &l) in probs.chunks_exact(classes).zip(labels) {
            if l == IGNORE_LABEL {
                continue;
            }
            self.counted += 1;
            if crate::trainer::argmax(row) == l as usize {
                self.correct += 1;
            }
        }
    }

    /// The fraction right (0 when nothing counted).
    pub fn accuracy(&self) -> f32 {
        if self.counted == 0 {
            0.0
        } else {
            (self.correct as f64 / self.counted as f64) as f32
        }
    }
}

/// Perplexity `exp(mean cross-entropy)`; `bits` per step is `loss / ln 2`.
pub fn perplexity(loss: f32) -> f32 {
    loss.exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_scale_turns_a_mean_over_all_rows_into_one_over_the_rows_counted() {
        assert_eq!(loss_scale(&[0.0, 1.0, 2.0, 3.0]), 1.0);
        assert_eq!(loss_scale(&[0.0, IGNORE_LABEL, 2.0, IGNORE_LABEL]), 2.0);
        assert_eq!(loss_scale(&[IGNORE_LABEL; 3]), 0.0);
    }

    #[test]
    fn over_a_padded_batch_a_batchnorm_or_mse_on_every_step_is_refused_by_name() {
        use crate::model::classifier_at_lengths;
        let mut d = crate::description::ModelDescription::seed();
        d.head.on = HeadOn::EveryStep;
        let build = |d: &crate::description::ModelDescription| {
            let mut g = Graph::new();
            classifier_at_lengths(&mut g, d, (3, 4), Mode::Train, true).map(|_| ())
        };
        let e = build(&d).unwrap_err().to_string();
        assert!(
            e.contains("head layer `bn1`") && e.contains("cannot train over a padded batch"),
            "{e}"
        );
        d.head.layers.retain(|l| l.name == "dense");
        build(&d).unwrap();
        d.loss = LossSpec::MeanSquaredError { outputs: 2 };
        let e = build(&d).unwrap_err().to_string();
        assert!(e.contains("\"mse\" on every step"), "{e}");
        // Not padded: both are fine.
        let mut g = Graph::new();
        classifier_at_lengths(&mut g, &d, (3, 4), Mode::Train, false).unwrap();
    }

    #[test]
    fn inference_over_a_padded_batch_takes_a_batchnorm_on_every_step() {
        use crate::model::classifier_at_lengths;
        let mut d = crate::description::ModelDescription::seed();
        d.head.on = HeadOn::EveryStep;
        let mut g = Graph::new();
        classifier_at_lengths(&mut g, &d, (3, 4), Mode::Infer, true).unwrap();
    }

    #[test]
    fn a_tally_leaves_ignored_rows_out() {
        let mut t = Tally::default();
        let probs = [0.9, 0.1, 0.2, 0.8, 0.6, 0.4];
        t.add(&probs, &[0.0, IGNORE_LABEL, 1.0], 2);
        assert_eq!((t.correct, t.counted), (1, 2));
        assert_eq!(t.accuracy(), 0.5);
    }
}
