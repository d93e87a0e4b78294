//! [`Sequences`]: labelled sequences held in memory, of one length or of many, cut into
//! batches padded to their longest sequence.

use tensorfit_core::rows::IGNORE_LABEL;
use tensorfit_core::HostTensor;
use tensorfit_data::{split, BatchOrder};
use tensorfit_nn::{Batch, Job};

use super::error::{BadInput, Error, Result};
use super::shapes::Shapes;

/// Labelled sequences held in memory, as apps hold them: batch-first, each a `Vec` of its
/// own `steps × features` values, step after step (token ids: one value per step), with
/// one class index per sequence (a regression: `outputs` values). Sequences may differ in
/// length: a batch is padded to its longest and carries each sequence's length
/// ([`Batch::lengths`]), so padded steps are masked, as PyTorch's
/// `pack_padded_sequence` does.
///
/// ```
/// use tensorfit::Sequences;
/// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 1).
/// let data = Sequences::new(vec![vec![0.0; 6], vec![1.0; 2]], vec![0.0, 1.0], 2).unwrap();
/// assert_eq!((data.len(), data.steps(), data.lengths()), (2, 3, &[3, 1][..]));
/// let batch = data.batch(&[1, 0]).unwrap();
/// assert_eq!(batch.x.shape.dims(), &[3, 2, 2]); // time-major: [time, batch, features]
/// assert_eq!(batch.lengths, Some(vec![1, 3]));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sequences {
    inputs: Vec<Vec<f32>>,
    /// Each sequence's labels: its targets, or one label per step
    /// ([`Sequences::with_step_labels`]).
    labels: Vec<Vec<f32>>,
    features: usize,
    /// Each sequence's number of steps.
    lengths: Vec<usize>,
    /// One label per step, laid out time-major in a batch.
    per_step: bool,
}

impl Sequences {
    /// Checks that every sequence holds a whole number (at least 1) of steps of `features`
    /// values, and that the labels are as many for each sequence.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Error, Sequences};
    /// // 2 sequences of 2 features: 2 steps (class 0) and 1 step (class 1).
    /// let data =
    ///     Sequences::new(vec![vec![0.1, 0.2, 0.3, 0.4], vec![0.5, 0.6]], vec![0.0, 1.0], 2)?;
    /// assert_eq!(data.lengths(), &[2, 1]);
    /// // 3 values are no whole number of steps of 2 features.
    /// match Sequences::new(vec![vec![0.0; 3]], vec![0.0], 2) {
    ///     Err(Error::BadInput(b)) => {
    ///         assert_eq!(b.given.as_deref(), Some("3 values in sequence 0"))
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(inputs: Vec<Vec<f32>>, labels: Vec<f32>, features: usize) -> Result<Sequences> {
        let lengths = lengths_of(&inputs, features)?;
        if labels.is_empty() || !labels.len().is_multiple_of(inputs.len()) {
            let (l, n) = (labels.len(), inputs.len());
            return Err(Error::BadInput(BadInput::of(
                "labels",
                format!("the same number for each of {n} sequences"),
                format!("{l} labels"),
                format!("{l} labels for {n} sequences: give the same number for each"),
            )));
        }
        let per_row = labels.len() / inputs.len();
        Ok(Sequences {
            labels: labels.chunks(per_row).map(<[f32]>::to_vec).collect(),
            inputs,
            features,
            lengths,
            per_step: false,
        })
    }

    /// Sequences with a label per step, for a model whose head is on every step (a
    /// language model: the next token at each step, or a tagger). `labels[i]` holds
    /// sequence `i`'s labels, one per step of it; a batch lays them out time-major
    /// (`[time, batch]`) like the inputs, a shorter sequence's padded steps labelled
    /// [`IGNORE_LABEL`] (counted in neither loss nor accuracy).
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
        let lengths = lengths_of(&inputs, features)?;
        if let Some(i) = (0..labels.len()).find(|&i| labels[i].len() != lengths[i]) {
            let (l, t) = (labels[i].len(), lengths[i]);
            return Err(Error::BadInput(BadInput::of(
                "labels",
                format!("{t} labels for sequence {i}, one per step"),
                format!("{l} labels for sequence {i}"),
                format!("sequence {i} has {l} labels for {t} steps: give one per step"),
            )));
        }
        Ok(Sequences {
            inputs,
            labels,
            features,
            lengths,
            per_step: true,
        })
    }

    /// The number of sequences.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert_eq!(data.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.inputs.len()
    }

    /// Whether there are no sequences (never: [`Sequences::new`] refuses none).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert!(!data.is_empty()); // Sequences::new refuses no sequences
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// The steps of the longest sequence.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert_eq!(data.steps(), 3); // the longest
    /// # Ok(())
    /// # }
    /// ```
    pub fn steps(&self) -> usize {
        self.lengths.iter().copied().max().unwrap_or(0)
    }

    /// Each sequence's number of steps.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert_eq!(data.lengths(), &[3, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// Whether the sequences differ in length (their batches are padded, and a run
    /// needs a plan for padded batches: [`Sequences::shapes`]).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert!(data.is_ragged());
    /// let even = Sequences::new(vec![vec![0.0; 4]; 3], vec![0.0; 3], 2)?;
    /// assert!(!even.is_ragged());
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_ragged(&self) -> bool {
        self.lengths.iter().any(|&l| l != self.lengths[0])
    }

    /// Values per step.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// // Two sequences of 2 features: 3 steps (class 0) and 1 step (class 2).
    /// let data = Sequences::new(vec![vec![0.5; 6], vec![1.0; 2]], vec![0.0, 2.0], 2)?;
    /// assert_eq!(data.features(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn features(&self) -> usize {
        self.features
    }

    /// What a plan needs to train on these sequences in batches of up to `batch`, and to
    /// evaluate them in batches of as many: every batch up to `batch` sequences of up to
    /// the longest's steps, padded when the lengths differ. Give it to
    /// [`crate::Model::plan`] or [`crate::Model::open`]; [`Shapes::holding`] widens it
    /// for a validation set.
    ///
    /// ```
    /// use tensorfit::{Job, Sequences};
    /// let data = Sequences::new(vec![vec![0.0; 5], vec![0.0; 2]], vec![0.0, 1.0], 1).unwrap();
    /// let shapes = data.shapes(8);
    /// assert_eq!(shapes.job, Job::Train { batch: 8, seq_len: 5, eval: Some((8, 5)) });
    /// assert!(shapes.padded);
    /// ```
    pub fn shapes(&self, batch: usize) -> Shapes {
        let (b, t) = (batch, self.steps());
        Shapes {
            job: Job::Train {
                batch: b,
                seq_len: t,
                eval: Some((b, t)),
            },
            padded: self.is_ragged(),
        }
    }

    /// Sequences `rows`, time-major (`[time, batch, features]`; `[time, batch]` for one
    /// feature, as token models take them), with their labels, padded with zeros to the
    /// longest of them; [`Batch::lengths`] holds each one's length when they differ.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Error, Sequences};
    /// let data =
    ///     Sequences::new(vec![vec![0.5; 6], vec![1.0; 2], vec![0.0; 6]], vec![0.0, 2.0, 1.0], 2)?;
    /// let batch = data.batch(&[1, 2])?;
    /// assert_eq!(batch.x.shape.dims(), &[3, 2, 2]); // [time, batch, features], padded to 3 steps
    /// assert_eq!(batch.labels, [2.0, 1.0]);
    /// assert_eq!(batch.lengths, Some(vec![1, 3]));
    /// match data.batch(&[3]) {
    ///     Err(Error::BadInput(b)) => assert_eq!(b.argument.as_deref(), Some("rows")),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch(&self, rows: &[usize]) -> Result<Batch> {
        if let Some(&r) = rows.iter().find(|&&r| r >= self.len()) {
            let n = self.len();
            return Err(Error::BadInput(BadInput::of(
                "rows",
                format!("sequence numbers below {n}"),
                format!("{r}"),
                format!("sequence {r} does not exist: there are {n}"),
            )));
        }
        let seqs: Vec<&[f32]> = rows.iter().map(|&r| self.inputs[r].as_slice()).collect();
        let lengths: Vec<usize> = rows.iter().map(|&r| self.lengths[r]).collect();
        let steps = lengths.iter().copied().max().unwrap_or(0);
        let labels = match self.per_step {
            // Time-major, like the inputs: step t of row j at t·B + j.
            true => (0..steps)
                .flat_map(|t| {
                    rows.iter()
                        .map(move |&r| self.labels[r].get(t).copied().unwrap_or(IGNORE_LABEL))
                })
                .collect(),
            false => rows.iter().flat_map(|&r| self.labels[r].clone()).collect(),
        };
        let x = time_major(&seqs, steps, self.features)?;
        let ragged = lengths.iter().any(|&l| l != steps);
        Ok(Batch {
            x,
            labels,
            lengths: ragged.then_some(lengths),
        })
    }

    /// Every sequence, in order, as one batch.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// let data = Sequences::new(vec![vec![0.5; 6]; 3], vec![0.0, 1.0, 2.0], 2)?;
    /// let all = data.all()?;
    /// assert_eq!(all.x.shape.dims(), &[3, 3, 2]);
    /// assert_eq!(all.labels, [0.0, 1.0, 2.0]);
    /// assert_eq!(all.lengths, None); // every sequence has all the steps
    /// # Ok(())
    /// # }
    /// ```
    pub fn all(&self) -> Result<Batch> {
        self.batch(&(0..self.len()).collect::<Vec<_>>())
    }

    /// Splits off `fraction` of the sequences, chosen from `seed`, to validate on:
    /// (training, validation), each in its original order; the split `tensorfit train
    /// --data --val-fraction` makes of a file.
    ///
    /// ```
    /// use tensorfit::Sequences;
    /// let data = Sequences::new(vec![vec![0.0; 2]; 10], vec![0.0; 10], 1).unwrap();
    /// let (train, val) = data.split(0.2, 1).unwrap();
    /// assert_eq!((train.len(), val.len()), (8, 2));
    /// ```
    pub fn split(&self, fraction: f64, seed: u64) -> Result<(Sequences, Sequences)> {
        let (train, val) = split(self.len(), fraction, seed).map_err(|e| {
            Error::BadInput(BadInput::of(
                "fraction",
                format!("in [0, 1), leaving some of {} sequences", self.len()),
                fraction.to_string(),
                e.to_string(),
            ))
        })?;
        if val.is_empty() {
            return Err(Error::BadInput(BadInput::of(
                "fraction",
                format!("enough of {} sequences for at least one", self.len()),
                fraction.to_string(),
                format!(
                    "a fraction of {fraction} of {} sequences holds out none to validate on",
                    self.len()
                ),
            )));
        }
        Ok((self.subset(&train), self.subset(&val)))
    }

    /// The sequences `rows` (existing ones), in that order.
    pub(crate) fn subset(&self, rows: &[usize]) -> Sequences {
        let pick = |v: &Vec<Vec<f32>>| rows.iter().map(|&r| v[r].clone()).collect();
        Sequences {
            inputs: pick(&self.inputs),
            labels: pick(&self.labels),
            features: self.features,
            lengths: rows.iter().map(|&r| self.lengths[r]).collect(),
            per_step: self.per_step,
        }
    }

    /// The batches of training epoch `epoch` in `order`, drawn from `seed` as `tensorfit
    /// train --data` draws them from a file: lists of sequence numbers.
    pub(crate) fn epoch_order(
        &self,
        batch: usize,
        order: BatchOrder,
        (seed, epoch): (u64, u64),
    ) -> Result<Vec<Vec<usize>>> {
        let all: Vec<usize> = (0..self.len()).collect();
        Ok(tensorfit_data::epoch_batches(
            &self.lengths,
            &all,
            batch,
            order,
            tensorfit_data::epoch_seed(seed, epoch),
        )?)
    }

    /// Every sequence in batches of up to `batch`, grouped by length (the least
    /// padding), shortest first: how evaluations run them.
    pub(crate) fn eval_order(&self, batch: usize) -> Result<Vec<Vec<usize>>> {
        let all: Vec<usize> = (0..self.len()).collect();
        Ok(tensorfit_data::length_grouped_batches(
            &self.lengths,
            &all,
            batch,
            1,
            None,
        )?)
    }

    /// `epochs` passes over the sequences in batches of `batch`, shuffled each epoch from
    /// `seed`, the last batch of an epoch smaller when `batch` does not divide the
    /// sequences (PyTorch's `drop_last=False`); each batch padded to its longest. A
    /// `batch` of 0 gives one error instead of no batch at all. [`crate::Runner::train`]
    /// runs epochs with validation and early stopping instead.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Sequences;
    /// let data = Sequences::new(vec![vec![0.0; 2]; 5], vec![0.0; 5], 1)?; // 5 sequences
    /// let batches = data.batches(2, 3, 42).collect::<Result<Vec<_>, _>>()?;
    /// assert_eq!(batches.len(), 9); // 3 epochs of 2 + 2 + 1 sequences
    /// assert_eq!(batches[2].labels.len(), 1);
    /// let refused: Vec<_> = data.batches(0, 3, 42).collect();
    /// assert!(refused.len() == 1 && refused[0].is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn batches(
        &self,
        batch: usize,
        epochs: usize,
        seed: u64,
    ) -> impl Iterator<Item = Result<Batch>> + '_ {
        let refused = (batch == 0).then(|| {
            Err(Error::BadInput(BadInput::of(
                "batch",
                "at least 1 sequence",
                "0",
                "a batch of 0 sequences: a batch needs at least 1",
            )))
        });
        let epochs = if refused.is_some() { 0 } else { epochs };
        let mut rng = tensorfit_core::Rng::new(seed);
        refused.into_iter().chain((0..epochs).flat_map(move |_| {
            let mut order: Vec<usize> = (0..self.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.int_inclusive(0, i));
            }
            order
                .chunks(batch)
                .map(|rows| self.batch(rows))
                .collect::<Vec<_>>()
        }))
    }
}

/// Each sequence's steps, after checking there is a sequence, that `features` is at
/// least 1, and that every sequence holds a whole number (at least 1) of steps of
/// `features` values.
pub(crate) fn lengths_of(inputs: &[Vec<f32>], features: usize) -> Result<Vec<usize>> {
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
    if let Some(i) = inputs
        .iter()
        .position(|s| s.is_empty() || !s.len().is_multiple_of(features))
    {
        let len = inputs[i].len();
        return Err(Error::BadInput(BadInput::of(
            "inputs",
            format!("a whole number (at least 1) of steps of {features} values"),
            format!("{len} values in sequence {i}"),
            format!("sequence {i} has {len} values: sequences need a whole number of steps (at least one) of {features} features"),
        )));
    }
    Ok(inputs.iter().map(|s| s.len() / features).collect())
}

/// `seqs` (sequence `j` its own whole number of steps of `features` values, at most
/// `steps`) as one time-major batch padded with zeros to `steps`: `[time, batch,
/// features]`, or `[time, batch]` for one value per step (token ids).
pub(crate) fn time_major(seqs: &[&[f32]], steps: usize, features: usize) -> Result<HostTensor> {
    let (f, b) = (features, seqs.len());
    let mut x = vec![0.0; steps * b * f];
    for (j, seq) in seqs.iter().enumerate() {
        for (t, step) in seq.chunks(f).take(steps).enumerate() {
            x[(t * b + j) * f..(t * b + j + 1) * f].copy_from_slice(step);
        }
    }
    Ok(match f {
        1 => HostTensor::new([steps, b], x)?,
        _ => HostTensor::new([steps, b, f], x)?,
    })
}
