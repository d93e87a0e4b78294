//! A batch as the trainer takes it: time-major inputs padded only to the longest sequence
//! of the batch, with every sequence's length, its labels and its id; and the byte size
//! of batches, for the host section of a memory plan.

use tensorfit_core::HostTensor;

use crate::dataset::{Dataset, Example, Inputs, LabelsPer, Values};
use crate::error::{DataError, Result};

/// The inputs of a batch, time-major.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchInputs {
    /// [T, B, F] f32.
    Dense(HostTensor),
    /// [T, B] token ids.
    Tokens(Vec<u32>),
}

/// One batch of `lengths.len()` sequences padded (with zeros) to `steps`.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// T: the longest sequence of the batch.
    pub steps: usize,
    pub inputs: BatchInputs,
    /// `[B]` (one per sequence) or `[T, B]` (one per step, time-major): class ids or f32
    /// targets. Padded steps hold 0; `lengths` says which steps are real.
    pub labels: Values,
    /// Steps of each sequence (≤ `steps`).
    pub lengths: Vec<usize>,
    /// Each sequence's index in its source (file order).
    pub ids: Vec<usize>,
    /// True when row `b` continues row `b` of the previous batch (windows of a long text):
    /// the trainer carries the recurrent state over instead of resetting it.
    pub continues: bool,
}

const U32: usize = std::mem::size_of::<u32>();
const USIZE: usize = std::mem::size_of::<usize>();

impl Batch {
    /// Sequences in the batch.
    pub fn size(&self) -> usize {
        self.lengths.len()
    }

    /// Bytes of the batch's values (inputs, labels, lengths, ids).
    pub fn bytes(&self) -> usize {
        let inputs = match &self.inputs {
            BatchInputs::Dense(x) => x.data.len() * U32,
            BatchInputs::Tokens(t) => t.len() * U32,
        };
        inputs + self.labels.len() * U32 + self.size() * 2 * USIZE
    }

    /// Assembles `examples` (with their `ids`) of `dataset` into one batch.
    pub(crate) fn assemble(
        dataset: &Dataset,
        examples: Vec<(usize, Example)>,
        continues: bool,
    ) -> Result<Batch> {
        let b = examples.len();
        let steps = examples.iter().map(|(_, e)| e.len).max().unwrap_or(0);
        let width = match dataset.inputs {
            Inputs::Dense { features } => features,
            Inputs::Tokens { .. } => 1,
        };
        let per_step = dataset.labels_per == LabelsPer::Step;
        let label_count = if per_step { steps * b } else { b };
        let (mut x, mut tokens) = (Vec::new(), Vec::new());
        match dataset.inputs {
            Inputs::Dense { .. } => x = vec![0f32; steps * b * width],
            Inputs::Tokens { .. } => tokens = vec![0u32; steps * b],
        }
        let (mut label_f32, mut label_ids) = (Vec::new(), Vec::new());
        let mut lengths = Vec::with_capacity(b);
        let mut ids = Vec::with_capacity(b);
        for (row, (id, e)) in examples.into_iter().enumerate() {
            let mismatch = || {
                DataError::Settings(format!(
                    "sequence {id}: its reader returned values that do not match its length {}",
                    e.len
                ))
            };
            // Step t of row `row` starts at (t * b + row) * width.
            match &e.inputs {
                Values::F32(v) if v.len() == e.len * width && !x.is_empty() => {
                    for (t, step) in v.chunks_exact(width).enumerate() {
                        let at = (t * b + row) * width;
                        x[at..at + width].copy_from_slice(step);
                    }
                }
                Values::Ids(v) if v.len() == e.len && !tokens.is_empty() => {
                    for (t, &id) in v.iter().enumerate() {
                        tokens[t * b + row] = id;
                    }
                }
                _ => return Err(mismatch()),
            }
            let expect = if per_step { e.len } else { 1 };
            if e.labels.len() != expect {
                return Err(mismatch());
            }
            match e.labels {
                Values::F32(v) => {
                    label_f32.resize(label_count, 0.0);
                    place_labels(&mut label_f32, &v, row, b, per_step)
                }
                Values::Ids(v) => {
                    label_ids.resize(label_count, 0);
                    place_labels(&mut label_ids, &v, row, b, per_step)
                }
            }
            lengths.push(e.len);
            ids.push(id);
        }
        let inputs = if tokens.is_empty() {
            BatchInputs::Dense(
                HostTensor::new([steps, b, width], x)
                    .map_err(|e| DataError::Settings(e.to_string()))?,
            )
        } else {
            BatchInputs::Tokens(tokens)
        };
        let labels = if label_f32.is_empty() {
            Values::Ids(label_ids)
        } else {
            Values::F32(label_f32)
        };
        Ok(Batch {
            steps,
            inputs,
            labels,
            lengths,
            ids,
            continues,
        })
    }
}

fn place_labels<T: Copy>(out: &mut [T], values: &[T], row: usize, b: usize, per_step: bool) {
    if per_step {
        for (t, &v) in values.iter().enumerate() {
            out[t * b + row] = v;
        }
    } else {
        out[row] = values[0];
    }
}

/// The largest [`Batch::bytes`] a batch of `batch` sequences of `dataset` can have (all
/// of them as long as its longest sequence): what the host section of a memory plan
/// counts per batch.
pub fn max_batch_bytes(dataset: &Dataset, batch: usize) -> usize {
    let t = dataset.max_len;
    let width = match dataset.inputs {
        Inputs::Dense { features } => features,
        Inputs::Tokens { .. } => 1,
    };
    let labels = match dataset.labels_per {
        LabelsPer::Sequence => batch,
        LabelsPer::Step => batch * t,
    };
    (t * batch * width + labels) * U32 + batch * 2 * USIZE
}
