//! Tensor files (safetensors, `.npy` inside an `.npz`): `input` [N, T, F] (floats) or
//! `tokens` [N, T] (integers); `labels` [N] or [N, T], class ids (integers) or, read as
//! regression, f32 targets: [N, K] or [N, T, K] for K outputs (with one output, [N] and
//! [N, T] too); optional `lengths` [N] (the steps of each sequence that are
//! real; the rest is padding). With labels ignored (`Labels::Ignored`, for prediction)
//! `labels` may be absent and is not read when present. The scan reads the file once, a
//! sequence at a time, to check every value; the reader seeks to a sequence's rows.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::arrays::{arrays, Array};
use crate::dataset::{
    Example, Inputs, LabelsPer, ReadSettings, Reader, Scanned, Source, Targets, Values,
};
use crate::error::{DataError, Place, Result};

/// A scanned tensor file.
#[derive(Debug, Clone)]
pub struct TensorData {
    path: PathBuf,
    inputs: Array,
    /// None with labels ignored: the reader gives placeholders.
    labels: Option<Array>,
    scanned: Scanned,
    /// Steps per sequence in the file (T).
    steps: usize,
    /// Values per step (F; 1 for tokens).
    width: usize,
}

impl TensorData {
    /// Scans the tensor file `path`.
    pub fn open(path: &Path, settings: &ReadSettings) -> Result<TensorData> {
        let mut all = arrays(path)?;
        let names = all_names(&all);
        let bad = |m: String| DataError::format(Place::file(path), m);
        let (inputs, tokens) = match (all.get("input"), all.get("tokens")) {
            (Some(a), _) => (a.clone(), false),
            (None, Some(a)) => (a.clone(), true),
            (None, None) => {
                return Err(bad(format!(
                    "has neither `input` [N, T, F] nor `tokens` [N, T] (it has {})",
                    names
                )))
            }
        };
        let ignored = settings.ignored_labels();
        let labels = match ignored {
            Some(_) => None,
            None => Some(
                all.remove("labels")
                    .ok_or_else(|| bad(format!("has no `labels` (it has {})", names)))?,
            ),
        };
        let (n, steps, width) = match (tokens, inputs.shape.as_slice()) {
            (false, &[n, t, f]) if inputs.dtype.is_float() => (n, t, f),
            (true, &[n, t]) if !inputs.dtype.is_float() => (n, t, 1),
            _ => {
                let want = if tokens {
                    "integer tokens [N, T]"
                } else {
                    "float input [N, T, F]"
                };
                return Err(bad(format!(
                    "`{}` is {:?} {:?}; expected {want}",
                    inputs.name, inputs.dtype, inputs.shape
                )));
            }
        };
        if n == 0 || steps == 0 || width == 0 {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
                what: "an input tensor with no values",
            });
        }
        let labels_per = match (&labels, ignored) {
            (Some(labels), _) => labels_per(labels, (n, steps), settings, &bad)?,
            // No labels only with labels ignored.
            (None, per) => per.unwrap_or(LabelsPer::Sequence),
        };
        let floats = |l: &&Array| l.dtype.is_float() && !settings.regression;
        if let Some(l) = labels.as_ref().filter(floats) {
            return Err(DataError::LabelKind {
                place: Place::file(path),
                message: format!("`labels` holds {:?} values, not class ids (integers); f32 targets are read as regression", l.dtype),
            });
        }
        let mut file = File::open(path).map_err(DataError::io(path))?;
        let mut buf = Vec::new();
        let mut lengths = vec![steps; n];
        if let Some(l) = all.get("lengths") {
            if l.shape != [n] || l.dtype.is_float() {
                return Err(bad(format!(
                    "`lengths` is {:?} {:?}; expected integers [{n}]",
                    l.dtype, l.shape
                )));
            }
            l.read(&mut file, 0, n, &mut buf)?;
            for (i, len) in lengths.iter_mut().enumerate() {
                let v = l.dtype.get(&buf, i);
                if !(1.0..=steps as f64).contains(&v) {
                    return Err(DataError::format(
                        Place::byte(path, l.byte_of(i)),
                        format!("`lengths`[{i}] is {v}; a length is 1 to {steps}"),
                    ));
                }
                *len = v as usize;
            }
        }
        let mut largest_token = 0u32;
        let mut largest_label: Option<u32> = None;
        for (i, full) in lengths.iter_mut().enumerate() {
            let len = *full;
            let x = read_values(&inputs, &mut file, i * steps * width, len * width, &mut buf)?;
            if let Values::Ids(ids) = &x {
                largest_token = largest_token.max(ids.iter().copied().max().unwrap_or(0));
            }
            if let Some(labels) = &labels {
                let k = settings.label_width();
                let (start, count) = label_range(labels_per, i, (steps, len), k);
                if let Values::Ids(ids) =
                    read_labels(labels, settings, &mut file, start, count, &mut buf)?
                {
                    largest_label = largest_label.max(ids.iter().copied().max());
                }
            }
            *full = settings.admit(len, || Place::byte(path, inputs.byte_of(i * steps * width)))?;
        }
        let input_kind = if tokens {
            Inputs::Tokens {
                vocab: largest_token as usize + 1,
            }
        } else {
            Inputs::Dense { features: width }
        };
        let scanned = Scanned::new(
            input_kind,
            settings.targets(largest_label),
            labels_per,
            lengths,
        );
        Ok(TensorData {
            path: path.to_path_buf(),
            inputs,
            labels,
            scanned,
            steps,
            width,
        })
    }
}

fn all_names(all: &std::collections::BTreeMap<String, Array>) -> String {
    let names: Vec<String> = all.keys().map(|k| format!("`{k}`")).collect();
    if names.is_empty() {
        "no tensors".into()
    } else {
        names.join(", ")
    }
}

/// Whether `labels` holds one label per sequence or one per step of `n` sequences of
/// `steps`; a regression's label is its K outputs (`settings.outputs`), the last
/// dimension (which one output may leave out).
fn labels_per(
    labels: &Array,
    (n, steps): (usize, usize),
    settings: &ReadSettings,
    bad: &impl Fn(String) -> DataError,
) -> Result<LabelsPer> {
    let k = settings.label_width();
    let regression = settings.regression;
    match *labels.shape.as_slice() {
        [m] if m == n && k == 1 => Ok(LabelsPer::Sequence),
        [m, t] if m == n && t == steps && k == 1 => Ok(LabelsPer::Step),
        [m, j] if m == n && j == k && regression => Ok(LabelsPer::Sequence),
        [m, t, j] if m == n && t == steps && j == k && regression => Ok(LabelsPer::Step),
        ref s => {
            let expected = match (regression, k) {
                (false, _) => format!("[{n}] (one class id per sequence) or [{n}, {steps}] (one per step)"),
                (true, 1) => format!("[{n}] or [{n}, 1] (one target per sequence) or [{n}, {steps}] or [{n}, {steps}, 1] (one per step)"),
                (true, k) => format!("[{n}, {k}] ({k} targets per sequence, the model's outputs) or [{n}, {steps}, {k}] ({k} per step)"),
            };
            Err(bad(format!(
                "`labels` has shape {s:?}; expected {expected}"
            )))
        }
    }
}

/// The elements of sequence `i`'s labels (`len` steps of a file of `steps`, `k` values
/// each): first and count.
fn label_range(per: LabelsPer, i: usize, (steps, len): (usize, usize), k: usize) -> (usize, usize) {
    match per {
        LabelsPer::Sequence => (i * k, k),
        LabelsPer::Step => (i * steps * k, len * k),
    }
}

/// `index` [0, 7, 2] of an array of `shape`, for messages.
fn position(array: &Array, flat: usize) -> String {
    let mut rest = flat;
    let mut index = vec![0; array.shape.len()];
    for (d, &size) in array.shape.iter().enumerate().rev() {
        index[d] = rest % size.max(1);
        rest /= size.max(1);
    }
    let parts: Vec<String> = index.iter().map(usize::to_string).collect();
    format!("`{}`[{}]", array.name, parts.join(", "))
}

/// Elements `start..start + count` of inputs: finite f32 (float arrays) or token ids.
fn read_values(
    a: &Array,
    file: &mut File,
    start: usize,
    count: usize,
    buf: &mut Vec<u8>,
) -> Result<Values> {
    a.read(file, start, count, buf)?;
    if a.dtype.is_float() {
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let v = a.dtype.get(buf, i) as f32;
            if !v.is_finite() {
                return Err(DataError::NotFinite {
                    place: Place::byte(&a.file, a.byte_of(start + i)),
                    value: format!("{v} at {}", position(a, start + i)),
                });
            }
            out.push(v);
        }
        Ok(Values::F32(out))
    } else {
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            let v = a.dtype.get(buf, i);
            if !(0.0..=u32::MAX as f64).contains(&v) {
                return Err(DataError::format(
                    Place::byte(&a.file, a.byte_of(start + i)),
                    format!(
                        "{v} at {} is not an id (a whole number from 0)",
                        position(a, start + i)
                    ),
                ));
            }
            out.push(v as u32);
        }
        Ok(Values::Ids(out))
    }
}

/// Labels `start..start + count`: class ids below `settings.classes`, or f32 targets.
fn read_labels(
    a: &Array,
    settings: &ReadSettings,
    file: &mut File,
    start: usize,
    count: usize,
    buf: &mut Vec<u8>,
) -> Result<Values> {
    if settings.regression {
        return Ok(match read_values(a, file, start, count, buf)? {
            Values::Ids(ids) => Values::F32(ids.iter().map(|&v| v as f32).collect()),
            values => values,
        });
    }
    a.read(file, start, count, buf)?;
    let limit = settings.classes.map_or(u32::MAX as f64, |c| c as f64);
    let mut ids = Vec::with_capacity(count);
    for i in 0..count {
        let v = a.dtype.get(buf, i);
        if !(0.0..limit).contains(&v) {
            return Err(DataError::LabelOutOfRange {
                place: Place::byte(&a.file, a.byte_of(start + i)),
                label: format!("{v} at {}", position(a, start + i)),
                classes: settings.classes,
            });
        }
        ids.push(v as u32);
    }
    Ok(Values::Ids(ids))
}

impl Source for TensorData {
    fn scanned(&self) -> &Scanned {
        &self.scanned
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        let file = File::open(&self.path).map_err(DataError::io(&self.path))?;
        Ok(Box::new(TensorReader {
            data: self.clone(),
            file,
            buf: Vec::new(),
        }))
    }
}

#[derive(Debug)]
struct TensorReader {
    data: TensorData,
    file: File,
    buf: Vec<u8>,
}

impl Reader for TensorReader {
    fn read(&mut self, index: usize) -> Result<Example> {
        let d = &self.data;
        let len = d.scanned.lengths[index];
        let inputs = read_values(
            &d.inputs,
            &mut self.file,
            index * d.steps * d.width,
            len * d.width,
            &mut self.buf,
        )?;
        let per = d.scanned.dataset.labels_per;
        let targets = d.scanned.dataset.targets;
        let settings = ReadSettings {
            regression: matches!(targets, Targets::Values { .. }),
            outputs: Some(targets.width()),
            ..ReadSettings::default()
        };
        let labels = match &d.labels {
            Some(labels) => {
                let (start, count) = label_range(per, index, (d.steps, len), targets.width());
                read_labels(
                    labels,
                    &settings,
                    &mut self.file,
                    start,
                    count,
                    &mut self.buf,
                )?
            }
            None => settings.placeholder_labels(per, len),
        };
        Ok(Example {
            len,
            inputs,
            labels,
        })
    }
}
