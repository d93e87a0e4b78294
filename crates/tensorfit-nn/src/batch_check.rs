//! The checks of a minibatch before it is written to the device: the input's shape and
//! values, and the targets the loss expects (class ids, or finite regression targets).

use tensorfit_core::{Error, HostTensor, Result};

use crate::description::ModelDescription;

/// `(steps, batch)` of `x` `[T, B, input]` when it and `labels` suit `model`; the error
/// names the sequence, step and feature, or label, that does not.
pub(crate) fn check_batch(
    model: &ModelDescription,
    x: &HostTensor,
    labels: &[f32],
) -> Result<(usize, usize)> {
    let d = x.shape.dims();
    let features = model.input_features();
    if d.len() != 3 || d[2] != features {
        return Err(Error::input(format!(
            "input has shape {}, expected [time, batch, {features}]",
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
    if let Some(i) = x.data.iter().position(|v| !v.is_finite()) {
        let f = features;
        return Err(Error::input(format!(
            "input contains {} at time {}, sequence {}, feature {}",
            x.data[i],
            i / (batch * f),
            (i / f) % batch,
            i % f
        )));
    }
    let per_row = model.loss.targets_per_row();
    if labels.len() != batch * per_row {
        return Err(Error::input(format!(
            "{} labels for a batch of {batch} with {per_row} per sequence",
            labels.len()
        )));
    }
    if !model.loss.is_classification() {
        if let Some(i) = labels.iter().position(|v| !v.is_finite()) {
            return Err(Error::input(format!(
                "target {} of sequence {} is {}",
                i % per_row,
                i / per_row,
                labels[i]
            )));
        }
        return Ok((steps, batch));
    }
    let classes = model.loss.outputs();
    if let Some((i, l)) = labels
        .iter()
        .enumerate()
        .find(|(_, &l)| !(l >= 0.0 && l < classes as f32 && l.fract() == 0.0))
    {
        return Err(Error::input(format!(
            "label {i} is {l}, expected a class index in 0..{classes}"
        )));
    }
    Ok((steps, batch))
}
