//! A minibatch on its way to the device: the checks it must pass on the host (shape,
//! finite features or token ids inside the vocabulary, labels) and the writes of its
//! steps into a program's input.
//!
//! A batch is `[T, B, F]` features for dense input or `[T, B]` token ids for token input;
//! ids are checked here, where the batch is uploaded, because a backend need not check
//! them itself (the wgpu kernels do not).

use std::ops::Range;

use tensorfit_core::tokens::check_ids;
use tensorfit_core::{Backend, Error, HostTensor, Result, Shape, TensorView};

use crate::description::{HeadOn, InputSpec, ModelDescription};
use crate::every_step::IGNORE_LABEL;

/// Checks `x` and `labels` against `model`; returns (steps, batch).
pub(crate) fn check_batch(
    model: &ModelDescription,
    x: &HostTensor,
    labels: &[f32],
) -> Result<(usize, usize)> {
    x.check_filled("the input")?;
    let d = x.shape.dims();
    let (fits, expected) = match model.input {
        InputSpec::Dense { features } => (
            d.len() == 3 && d[2] == features,
            format!("[time, batch, {features}]"),
        ),
        InputSpec::Tokens { vocab, .. } => (
            d.len() == 2,
            format!("[time, batch] token ids in 0..{vocab}"),
        ),
    };
    if !fits {
        return Err(Error::input(format!(
            "input has shape {}, expected {expected}",
            x.shape
        )));
    }
    let (steps, batch) = (d[0], d[1]);
    if steps == 0 || batch == 0 {
        return Err(Error::input(format!(
            "input has shape {}: time and batch must be at least 1",
            x.shape
        )));
    }
    match model.input {
        InputSpec::Tokens { vocab, .. } => check_ids("input", &x.data, vocab, batch)?,
        InputSpec::Dense { features: f } => {
            if let Some(i) = x.data.iter().position(|v| !v.is_finite()) {
                return Err(Error::input(format!(
                    "input contains {} at time {}, sequence {}, feature {}",
                    x.data[i],
                    i / (batch * f),
                    (i / f) % batch,
                    i % f
                )));
            }
        }
    }
    let per_row = model.loss.targets_per_row();
    // One label (or `per_row` targets) per sequence, or per step and sequence.
    let (rows, per) = match model.head.on {
        HeadOn::Sequence(_) => (batch, "sequence"),
        HeadOn::EveryStep => (steps * batch, "step of each sequence"),
    };
    if labels.len() != rows * per_row {
        return Err(Error::input(format!(
            "{} labels for a batch of {batch} × {steps} steps with {per_row} per {per}",
            labels.len()
        )));
    }
    if !model.loss.is_classification() {
        if let Some(i) = labels.iter().position(|v| !v.is_finite()) {
            return Err(Error::input(format!(
                "target {} of row {} is {}",
                i % per_row,
                i / per_row,
                labels[i]
            )));
        }
        return Ok((steps, batch));
    }
    let classes = model.loss.outputs();
    // A head on every step may leave steps out (padding): IGNORE_LABEL.
    let ignorable = model.head.on == HeadOn::EveryStep;
    let class = |l: f32| l >= 0.0 && l < classes as f32 && l.fract() == 0.0;
    if let Some((i, l)) = labels
        .iter()
        .enumerate()
        .find(|(_, &l)| !(class(l) || ignorable && l == IGNORE_LABEL))
    {
        let or = if ignorable { " (or -1: ignored)" } else { "" };
        return Err(Error::input(format!(
            "label {i} is {l}, expected a class index in 0..{classes}{or}"
        )));
    }
    Ok((steps, batch))
}

/// Writes steps `steps` of sequences `rows` of `x` (`[T, B, F]`, or `[T, B]` ids: F = 1)
/// into `view` `[steps.len(), rows.len(), F]`: one write when `rows` is the whole batch
/// (the steps are then contiguous in `x`), else one per step, so that a micro-batch never
/// needs a host copy of its sequences.
pub(crate) fn write_steps(
    backend: &mut dyn Backend,
    view: &TensorView,
    x: &HostTensor,
    steps: Range<usize>,
    rows: Range<usize>,
) -> Result<()> {
    let d = x.shape.dims();
    let (batch, f) = (d[1], d.get(2).copied().unwrap_or(1));
    if rows.len() == batch {
        return backend.write(
            view,
            &x.data[steps.start * batch * f..steps.end * batch * f],
        );
    }
    let step = rows.len() * f;
    for (u, t) in steps.enumerate() {
        let part = TensorView::at(view.buffer, view.offset + u * step, Shape::from([step]));
        let from = (t * batch + rows.start) * f;
        backend.write(&part, &x.data[from..from + step])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token_model(vocab: usize) -> ModelDescription {
        let mut d = ModelDescription::seed();
        d.input = InputSpec::Tokens {
            vocab,
            embedding: None,
        };
        d
    }

    #[test]
    fn token_batches_are_time_by_batch_ids_checked_against_the_vocabulary() {
        let model = token_model(5);
        let ids = HostTensor::new([3, 2], vec![0.0, 4.0, 1.0, 2.0, 3.0, 0.0]).unwrap();
        assert_eq!(check_batch(&model, &ids, &[0.0, 1.0]).unwrap(), (3, 2));
        let bad = HostTensor::new([3, 2], vec![0.0, 4.0, 1.0, 5.0, 3.0, 0.0]).unwrap();
        let e = check_batch(&model, &bad, &[0.0, 1.0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("step 1, batch row 1"), "{e}");
        let dense = HostTensor::zeros([3, 2, 5]);
        let e = check_batch(&model, &dense, &[0.0, 1.0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("[time, batch] token ids in 0..5"), "{e}");
    }

    #[test]
    fn dense_batches_name_the_first_value_that_is_not_finite() {
        let model = ModelDescription::seed();
        let mut x = HostTensor::zeros([2, 1, 152]);
        x.data[152 + 7] = f32::NAN;
        let e = check_batch(&model, &x, &[0.0]).unwrap_err().to_string();
        assert!(e.contains("time 1, sequence 0, feature 7"), "{e}");
    }
}
