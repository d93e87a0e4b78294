//! A batch as the trainer takes it: time-major inputs padded only to the longest sequence
//! of the batch, with every sequence's length, its labels and its id; the byte size of
//! batches, for the host section of a memory plan; and the buffers a reader's batches are
//! built in, made once and used again.

use std::sync::{Arc, Mutex};

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
    /// targets, `[B, K]` or `[T, B, K]` for a regression of K outputs. Padded steps hold
    /// 0; `lengths` says which steps are real.
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
}

/// A batch being filled one sequence at a time: the reader holds the batch and the one
/// sequence it has just read, never the batch's sequences besides the batch (a second
/// copy of it, which no plan counts).
pub(crate) struct Assembly {
    b: usize,
    steps: usize,
    width: usize,
    per_step: bool,
    /// Values per label (a regression's outputs).
    label_width: usize,
    x: Vec<f32>,
    tokens: Vec<u32>,
    label_f32: Vec<f32>,
    label_ids: Vec<u32>,
    lengths: Vec<usize>,
    ids: Vec<usize>,
}

/// The dense input buffers of a reader's batches: `count` of them, each of `len` values
/// (the largest batch of the reading), made and written once when the reader starts and
/// then used again for batch after batch. So the host memory the plan counts for the
/// batches in flight is resident from the first batch — the plan is the allocation, as on
/// the device — whether or not the reader ever gets that far ahead, and no batch pays for
/// fresh pages. A batch's consumer gives its input back ([`InputBuffers::give_back`]) when
/// the step is done with it; one that does not only costs a new buffer for a later batch.
#[derive(Debug, Clone, Default)]
pub struct InputBuffers {
    free: Arc<Mutex<Vec<Vec<f32>>>>,
    count: usize,
    len: usize,
}

impl InputBuffers {
    /// Room for `count` buffers of `len` values; none is made before [`InputBuffers::fill`].
    pub(crate) fn new(count: usize, len: usize) -> InputBuffers {
        InputBuffers {
            free: Arc::default(),
            count,
            len,
        }
    }

    /// Makes the buffers, writing every value (an allocation's pages are not resident
    /// until written).
    pub(crate) fn fill(&self) {
        let made: Vec<Vec<f32>> = (0..self.count)
            .map(|_| vec_of(self.len, self.len))
            .collect();
        self.lock().extend(made);
    }

    /// `n` zeros in a free buffer, or in a new one when none is free.
    fn take(&self, n: usize) -> Vec<f32> {
        match self.lock().pop() {
            Some(mut v) => {
                v.clear();
                v.resize(n, 0.0);
                v
            }
            None => vec_of(n, n),
        }
    }

    /// Takes back the input values of a batch that is done with them, as a free buffer
    /// (values from elsewhere, smaller than the buffers, are dropped).
    pub fn give_back(&self, values: Vec<f32>) {
        let mut free = self.lock();
        if values.capacity() >= self.len && free.len() < self.count {
            free.push(values);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<f32>>> {
        // A list of buffers is whole whatever a panicking holder did with it.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `n` zeros in room for `capacity` values, every value written.
fn vec_of(n: usize, capacity: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(capacity);
    v.resize(n, 0.0);
    v
}

impl Assembly {
    /// An empty batch of `b` sequences of `dataset`, the longest `steps` long, its dense
    /// input in one of `buffers`.
    pub(crate) fn new(
        dataset: &Dataset,
        b: usize,
        steps: usize,
        buffers: &InputBuffers,
    ) -> Assembly {
        let width = match dataset.inputs {
            Inputs::Dense { features } => features,
            Inputs::Tokens { .. } => 1,
        };
        let (mut x, mut tokens) = (Vec::new(), Vec::new());
        match dataset.inputs {
            Inputs::Dense { .. } => x = buffers.take(steps * b * width),
            Inputs::Tokens { .. } => tokens = vec![0u32; steps * b],
        }
        Assembly {
            b,
            steps,
            width,
            per_step: dataset.labels_per == LabelsPer::Step,
            label_width: dataset.targets.width(),
            x,
            tokens,
            label_f32: Vec::new(),
            label_ids: Vec::new(),
            lengths: Vec::with_capacity(b),
            ids: Vec::with_capacity(b),
        }
    }

    /// Places sequence `id`, `e`, in the next row.
    pub(crate) fn place(&mut self, id: usize, e: Example) -> Result<()> {
        let (b, width, row) = (self.b, self.width, self.lengths.len());
        let mismatch = || {
            DataError::Settings(format!(
                "sequence {id}: its reader returned values that do not match its length {}",
                e.len
            ))
        };
        if row >= b || e.len > self.steps {
            return Err(mismatch());
        }
        // Step t of row `row` starts at (t * b + row) * width.
        match &e.inputs {
            Values::F32(v) if v.len() == e.len * width && !self.x.is_empty() => {
                for (t, step) in v.chunks_exact(width).enumerate() {
                    let at = (t * b + row) * width;
                    self.x[at..at + width].copy_from_slice(step);
                }
            }
            Values::Ids(v) if v.len() == e.len && !self.tokens.is_empty() => {
                for (t, &id) in v.iter().enumerate() {
                    self.tokens[t * b + row] = id;
                }
            }
            _ => return Err(mismatch()),
        }
        let k = self.label_width;
        let expect = if self.per_step { e.len } else { 1 } * k;
        if e.labels.len() != expect {
            return Err(mismatch());
        }
        let label_count = if self.per_step { self.steps * b } else { b } * k;
        let at = (row, b, k);
        match e.labels {
            Values::F32(v) => {
                self.label_f32.resize(label_count, 0.0);
                place_labels(&mut self.label_f32, &v, at, self.per_step)
            }
            Values::Ids(v) => {
                self.label_ids.resize(label_count, 0);
                place_labels(&mut self.label_ids, &v, at, self.per_step)
            }
        }
        self.lengths.push(e.len);
        self.ids.push(id);
        Ok(())
    }

    /// The batch of the rows placed; `continues`: see [`Batch::continues`].
    pub(crate) fn finish(self, continues: bool) -> Result<Batch> {
        let inputs = if self.tokens.is_empty() {
            BatchInputs::Dense(
                HostTensor::new([self.steps, self.b, self.width], self.x)
                    .map_err(|e| DataError::Settings(e.to_string()))?,
            )
        } else {
            BatchInputs::Tokens(self.tokens)
        };
        let labels = if self.label_f32.is_empty() {
            Values::Ids(self.label_ids)
        } else {
            Values::F32(self.label_f32)
        };
        Ok(Batch {
            steps: self.steps,
            inputs,
            labels,
            lengths: self.lengths,
            ids: self.ids,
            continues,
        })
    }
}

/// Places the labels `values` (`k` values each, step-major) of row `row` of a batch of `b`
/// rows: at `[row]` or, per step, at `[t, row]` of the time-major `out`.
fn place_labels<T: Copy>(
    out: &mut [T],
    values: &[T],
    (row, b, k): (usize, usize, usize),
    per_step: bool,
) {
    if per_step {
        for (t, label) in values.chunks_exact(k).enumerate() {
            let at = (t * b + row) * k;
            out[at..at + k].copy_from_slice(label);
        }
    } else {
        out[row * k..(row + 1) * k].copy_from_slice(&values[..k]);
    }
}

/// The largest [`Batch::bytes`] a batch of `batch` sequences of `dataset` can have (all
/// of them as long as its longest sequence; never more sequences than the dataset has):
/// what the host section of a memory plan counts per batch. Saturates rather than
/// overflows for an absurd `batch`, which the plan then refuses.
pub fn max_batch_bytes(dataset: &Dataset, batch: usize) -> usize {
    let batch = batch.min(dataset.sequences);
    let t = dataset.max_len;
    let width = match dataset.inputs {
        Inputs::Dense { features } => features,
        Inputs::Tokens { .. } => 1,
    };
    let labels = match dataset.labels_per {
        LabelsPer::Sequence => batch,
        LabelsPer::Step => batch.saturating_mul(t),
    }
    .saturating_mul(dataset.targets.width());
    let values = t
        .saturating_mul(batch)
        .saturating_mul(width)
        .saturating_add(labels);
    values
        .saturating_mul(U32)
        .saturating_add(batch.saturating_mul(2 * USIZE))
}
