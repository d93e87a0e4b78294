//! PyTorch weights in: a model's tensors from a `state_dict` saved by
//! `safetensors.torch.save_file(model.state_dict(), path)`.
//!
//! tensorfit names its tensors as PyTorch does (`lstm.weight_ih_l0`, `bn1.running_mean`,
//! `out.weight`, ...), so a state dict of the same network needs no renaming: each tensor
//! the model expects is looked up by name and shape. F32 is read as it is; F16, BF16 and
//! F64 are converted to f32 (rounded to nearest). A value that is not finite (NaN, an
//! infinity, or an F64 beyond f32's range) is refused: a model holding one computes
//! nothing but NaN. BatchNorm's `num_batches_tracked` counters are ignored: tensorfit's
//! BatchNorm uses a fixed momentum and never reads them. Anything else that does not fit
//! (a missing tensor, one the model does not have, a shape or dtype that differs) is
//! reported all at once, in one error naming every such tensor, so a user fixes the
//! export in one go.
//!
//! The way back needs no code here: a tensorfit checkpoint is a safetensors file with the
//! same names, plus Adam's moments under `adam.`, which `load_state_dict` is given
//! without (docs/models.md, "Weights from PyTorch, and back").

use std::collections::BTreeSet;
use std::path::Path;

use tensorfit_core::safetensors::{Dtype, SafeTensors, TensorBytes};
use tensorfit_core::{Error, HostTensor, Result, Shape};

use crate::layers::ParamSpec;
use crate::params::ParamStore;
use crate::safetensors_file::SafetensorsFile;

/// The last name segment of PyTorch's BatchNorm step counters, which are not imported.
pub const IGNORED_SUFFIX: &str = "num_batches_tracked";

/// Reads the tensors `specs` names from the PyTorch state dict at `path`.
///
/// Returns every tensor in `specs` as f32 with its spec's shape, or one
/// [`Error::File`] listing every missing, extra, misshapen, non-float and non-finite
/// tensor.
pub fn import_state_dict(specs: &[ParamSpec], path: &Path) -> Result<ParamStore> {
    let file_error = |message: String| Error::File {
        path: path.display().to_string(),
        message,
    };
    let bytes = SafetensorsFile::open(path)?.into_bytes()?;
    let st = SafeTensors::parse(&bytes).map_err(|e| e.in_file(path))?;
    let wanted: BTreeSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let mut problems = Vec::new();
    let mut extra: Vec<String> = st
        .tensors()
        .map(|(n, _)| n)
        .filter(|n| !wanted.contains(n) && n.rsplit('.').next() != Some(IGNORED_SUFFIX))
        .map(|n| format!("`{n}`"))
        .collect();
    extra.sort();
    let mut missing = Vec::new();
    let mut store = ParamStore::new();
    for spec in specs {
        let Some(view) = st.tensor(&spec.name) else {
            missing.push(format!("`{}` {}", spec.name, spec.shape));
            continue;
        };
        let shape = Shape::new(view.shape);
        if shape != spec.shape {
            problems.push(format!(
                "`{}` is {shape} in the file, the model needs {}",
                spec.name, spec.shape
            ));
            continue;
        }
        match to_f32(&view) {
            Some(data) => match data.iter().position(|v| !v.is_finite()) {
                Some(i) => problems.push(format!(
                    "`{}` holds {} at element {i} (of {})",
                    spec.name,
                    data[i],
                    data.len()
                )),
                None => store.insert(&spec.name, HostTensor::new(shape, data)?),
            },
            None => problems.push(format!(
                "`{}` has dtype {}; F32, F16, BF16 and F64 are read",
                spec.name, view.dtype
            )),
        }
    }
    // A stack's direction told apart, as it is the likeliest mismatch of a recurrent
    // model: the `_reverse` tensors of `bidirectional=True` on one side only.
    let reverse = |names: &[String]| names.iter().any(|n| n.contains("_reverse`"));
    let direction = match (reverse(&extra), reverse(&missing)) {
        (true, false) => Some("the state dict is of a bidirectional stack (its `_reverse` tensors): give the model's recurrent layer `bidirectional = true`"),
        (false, true) => Some("the model's stack is bidirectional and the state dict's is not (no `_reverse` tensors): drop `bidirectional = true`, or export the bidirectional module"),
        _ => None,
    };
    if !missing.is_empty() {
        problems.push(format!("missing: {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        problems.push(format!("not in the model: {}", extra.join(", ")));
    }
    problems.extend(direction.map(String::from));
    if problems.is_empty() {
        Ok(store)
    } else {
        Err(file_error(format!(
            "the state dict does not fit the model:\n  {}",
            problems.join("\n  ")
        )))
    }
}

/// The tensor's values as f32, for the floating-point dtypes PyTorch saves.
fn to_f32(view: &TensorBytes) -> Option<Vec<f32>> {
    let data = view.data;
    Some(match view.dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| tensorfit_core::half_float::f16_to_f32([b[0], b[1]]))
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| tensorfit_core::half_float::bf16_to_f32([b[0], b[1]]))
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
            .collect(),
        _ => return None,
    })
}
