//! [`Sequences`]: labelled sequences held in memory, cut into training batches.

use tensorfit_core::{HostTensor, Rng};
use tensorfit_nn::Batch;

use super::error::{BadInput, Error, Result};

/// Labelled sequences of one length held in memory: each a `Vec` of `steps × features`
/// values, step after step (token ids: one value per step), with one class index per
/// sequence (a regression: `outputs` values).
///
/// ```
/// use tensorfit::Sequences;
/// // Two sequences of 3 steps of 2 features, classes 0 and 1.
/// let data = Sequences::new(vec![vec![0.0; 6], vec![1.0; 6]], vec![0.0, 1.0], 2).unwrap();
/// assert_eq!((data.len(), data.steps()), (2, 3));
/// let batch = data.batch(&[1, 0]).unwrap();
/// assert_eq!(batch.x.shape.dims(), &[3, 2, 2]); // time-major: [time, batch, features]
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sequences {
    inputs: Vec<Vec<f32>>,
    labels: Vec<f32>,
    features: usize,
    steps: usize,
    /// One label per step ([`Sequences::with_step_labels`]), laid out time-major in a batch.
    per_step: bool,
}

impl Sequences {
    /// Checks that every sequence has the same whole number of steps of `features` values
    /// and that the labels are as many per sequence.
    pub fn new(inputs: Vec<Vec<f32>>, labels: Vec<f32>, features: usize) -> Result<Sequences> {
        let steps = steps_of(&inputs, features)?;
        if labels.is_empty() || !labels.len().is_multiple_of(inputs.len()) {
            let (l, n) = (labels.len(), inputs.len());
            return Err(Error::BadInput(BadInput::of(
                "labels",
                format!("the same number for each of {n} sequences"),
                format!("{l} labels"),
                format!("{l} labels for {n} sequences: give the same number for each"),
            )));
        }
        Ok(Sequences {
            steps,
            inputs,
            labels,
            features,
            per_step: false,
        })
    }

    /// Sequences with a label per step, for a model whose head is on every step (a
    /// language model: the next token at each step). `labels[i]` holds sequence `i`'s
    /// labels, one per step; a batch lays them out time-major (`[time, batch]`) like the
    /// inputs.
    ///
    /// ```
    /// use tensorfit::Sequences;
    /// // Token ids 1 2 3 and 4 5 6; the next id at each step.
    /// let data = Sequences::with_step_labels(
    ///     vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0]],
    ///     vec![vec![2.0, 3.0, 4.0], vec![5.0, 6.0, 7.0]],
    ///     1,
    /// )
    /// .unwrap();
    /// assert_eq!(data.all().unwrap().labels, [2.0, 5.0, 3.0, 6.0, 4.0, 7.0]);
    /// ```
    pub fn with_step_labels(
        inputs: Vec<Vec<f32>>,
        labels: Vec<Vec<f32>>,
        features: usize,
    ) -> Result<Sequences> {
        if labels.len() != inputs.len() {
            let (l, n) = (labels.len(), inputs.len());
            return Err(Error::BadInput(BadInput::of(
                "labels",
                format!("{n} rows, one per sequence"),
                format!("{l} rows"),
                format!("{l} rows of labels for {n} sequences: give one row per sequence"),
            )));
        }
        // The inputs checked with a placeholder label each; the rows of labels below.
        let mut data = Sequences::new(inputs, vec![0.0; labels.len()], features)?;
        if let Some(i) = labels.iter().position(|l| l.len() != data.steps) {
            let (l, t) = (labels[i].len(), data.steps);
            return Err(Error::BadInput(BadInput::of(
                "labels",
                format!("{t} labels per sequence, one per step"),
                format!("{l} labels for sequence {i}"),
                format!("sequence {i} has {l} labels for {t} steps: give one per step"),
            )));
        }
        data.labels = labels.concat();
        data.per_step = true;
        Ok(data)
    }

    /// The number of sequences.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Whether there are no sequences (never: [`Sequences::new`] refuses none).
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Steps per sequence.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Sequences `rows`, time-major (`[time, batch, features]`; `[time, batch]` for one
    /// feature, as token models take them), with their labels.
    pub fn batch(&self, rows: &[usize]) -> Result<Batch> {
        let per_row = self.labels.len() / self.inputs.len();
        let mut seqs = Vec::with_capacity(rows.len());
        let mut labels = Vec::with_capacity(rows.len() * per_row);
        for &r in rows {
            let seq = self.inputs.get(r).ok_or_else(|| {
                let n = self.len();
                Error::BadInput(BadInput::of(
                    "rows",
                    format!("sequence numbers below {n}"),
                    format!("{r}"),
                    format!("sequence {r} does not exist: there are {n}"),
                ))
            })?;
            seqs.push(seq.as_slice());
            if !self.per_step {
                labels.extend_from_slice(&self.labels[r * per_row..(r + 1) * per_row]);
            }
        }
        if self.per_step {
            // Time-major, like the inputs: step t of row j at t·B + j.
            for t in 0..self.steps {
                labels.extend(rows.iter().map(|&r| self.labels[r * per_row + t]));
            }
        }
        let x = time_major(&seqs, self.steps, self.features)?;
        Ok(Batch { x, labels })
    }

    /// Every sequence, in order, as one batch.
    pub fn all(&self) -> Result<Batch> {
        self.batch(&(0..self.len()).collect::<Vec<_>>())
    }

    /// `epochs` passes over the sequences in batches of `batch`, shuffled each epoch from
    /// `seed`; a last batch smaller than `batch` is left out, since a training plan is
    /// for one batch size. A `batch` of 0, or of more sequences than there are, gives one
    /// error instead of no batch at all.
    pub fn batches(
        &self,
        batch: usize,
        epochs: usize,
        seed: u64,
    ) -> impl Iterator<Item = Result<Batch>> + '_ {
        let refused = match batch {
            0 => Some("a batch of 0 sequences: a batch needs at least 1".to_string()),
            b if b > self.len() => Some(format!(
                "a batch of {b} sequences, and there are only {} sequences: no batch would be made",
                self.len()
            )),
            _ => None,
        }
        .map(|m| {
            Err(Error::BadInput(BadInput::of(
                "batch",
                format!("1 to {} sequences", self.len()),
                format!("{batch}"),
                m,
            )))
        });
        let epochs = if refused.is_some() { 0 } else { epochs };
        let mut rng = Rng::new(seed);
        let per_epoch = self.len() / batch.max(1);
        refused.into_iter().chain((0..epochs).flat_map(move |_| {
            let mut order: Vec<usize> = (0..self.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.int_inclusive(0, i));
            }
            (0..per_epoch)
                .map(|k| self.batch(&order[k * batch..(k + 1) * batch]))
                .collect::<Vec<_>>()
        }))
    }
}

/// The steps of every sequence of `inputs`, after checking there is one, that `features`
/// is at least 1, and that every sequence holds the same whole number of steps of
/// `features` values.
pub(crate) fn steps_of(inputs: &[Vec<f32>], features: usize) -> Result<usize> {
    if inputs.is_empty() {
        return Err(Error::BadInput(BadInput::of(
            "inputs",
            "at least one sequence",
            "no sequences",
            "no sequences given",
        )));
    }
    if features == 0 {
        return Err(Error::BadInput(BadInput::of(
            "features",
            "at least 1",
            "0",
            "features must be at least 1 (values per step; 1 for token ids)",
        )));
    }
    let first = inputs[0].len();
    if first == 0 || !first.is_multiple_of(features) {
        return Err(Error::BadInput(BadInput::of(
            "inputs",
            format!("a whole number of steps of {features} values"),
            format!("{first} values in sequence 0"),
            format!("sequence 0 has {first} values: sequences need at least one step of {features} features"),
        )));
    }
    if let Some(i) = inputs.iter().position(|s| s.len() != first) {
        let len = inputs[i].len();
        return Err(Error::BadInput(BadInput::of(
            "inputs",
            format!("{first} values per sequence, as sequence 0 has"),
            format!("{len} values in sequence {i}"),
            format!("sequence {i} has {len} values, sequence 0 has {first}: sequences must have one length"),
        )));
    }
    Ok(first / features)
}

/// `seqs` (each `steps` steps of `features` values) as one time-major batch:
/// `[time, batch, features]`, or `[time, batch]` for one value per step (token ids).
pub(crate) fn time_major(seqs: &[&[f32]], steps: usize, features: usize) -> Result<HostTensor> {
    let (f, b) = (features, seqs.len());
    let mut x = vec![0.0; steps * b * f];
    for (j, seq) in seqs.iter().enumerate() {
        for t in 0..steps {
            x[(t * b + j) * f..(t * b + j + 1) * f].copy_from_slice(&seq[t * f..(t + 1) * f]);
        }
    }
    Ok(match f {
        1 => HostTensor::new([steps, b], x)?,
        _ => HostTensor::new([steps, b, f], x)?,
    })
}
