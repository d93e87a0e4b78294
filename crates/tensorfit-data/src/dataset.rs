//! What a data file holds ([`Dataset`]), one sequence of it ([`Example`]), the settings
//! every reader takes ([`ReadSettings`]) and the interface every format implements
//! ([`Source`]: the result of a scan; [`Reader`]: reads one sequence on demand).

use std::sync::Arc;

use crate::error::{DataError, Place, Result};

/// The inputs of every step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// `features` f32 values per step (`input` [N, T, F]).
    Dense { features: usize },
    /// One token id per step, below `vocab` (`tokens` [N, T]).
    Tokens { vocab: usize },
}

/// What is predicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Targets {
    /// Class ids below `classes`.
    Classes { classes: usize },
    /// `outputs` f32 values per label (regression: K targets per sequence or per step).
    Values { outputs: usize },
}

impl Targets {
    /// Values of one label: a class id, or a regression's `outputs`.
    pub fn width(self) -> usize {
        match self {
            Targets::Classes { .. } => 1,
            Targets::Values { outputs } => outputs,
        }
    }
}

/// Whether there is one label per sequence or one per step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelsPer {
    Sequence,
    Step,
}

/// What a file holds, learned by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub inputs: Inputs,
    pub targets: Targets,
    pub labels_per: LabelsPer,
    /// Number of sequences.
    pub sequences: usize,
    /// Longest sequence (after any cut to `max_seq_len`).
    pub max_len: usize,
    /// Steps of all sequences together.
    pub total_steps: u64,
}

impl Dataset {
    fn new(inputs: Inputs, targets: Targets, labels_per: LabelsPer, lengths: &[usize]) -> Dataset {
        Dataset {
            inputs,
            targets,
            labels_per,
            sequences: lengths.len(),
            max_len: lengths.iter().copied().max().unwrap_or(0),
            total_steps: lengths.iter().map(|&l| l as u64).sum(),
        }
    }
}

/// What a scan finds: the description and each sequence's length (in file order, after
/// any cut), shared by a source and its readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scanned {
    pub dataset: Dataset,
    pub lengths: Arc<[usize]>,
}

impl Scanned {
    pub(crate) fn new(
        inputs: Inputs,
        targets: Targets,
        labels_per: LabelsPer,
        lengths: Vec<usize>,
    ) -> Scanned {
        Scanned {
            dataset: Dataset::new(inputs, targets, labels_per, &lengths),
            lengths: lengths.into(),
        }
    }
}

/// Values of one sequence: f32 (dense inputs, regression targets) or ids (tokens, classes).
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    Ids(Vec<u32>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::Ids(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One sequence: `len` steps of inputs (step-major: `len * features` values for dense
/// inputs) and its labels (one, or one per step; a regression's label is its `outputs`
/// values, step-major).
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    pub len: usize,
    pub inputs: Values,
    pub labels: Values,
}

/// What to do with a sequence longer than `max_seq_len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TooLong {
    /// Fail with [`DataError::TooLong`], naming the sequence.
    #[default]
    Refuse,
    /// Keep its first `max_seq_len` steps.
    Cut,
}

/// Whether a file's labels are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Labels {
    /// Every sequence has labels; they are checked and read (training, evaluation).
    #[default]
    Required,
    /// Labels are neither needed nor read (prediction): a file may have none, those it
    /// has are not checked, and each sequence carries placeholder labels laid out `per`
    /// sequence or step (the model's head decides), class 0 or 0.0, which nothing reads.
    /// They are the size real labels would be, so a batch's bytes do not change. A long
    /// CSV reads its label column either way: its last column cannot be told from a
    /// feature.
    Ignored { per: LabelsPer },
}

/// Settings every reader takes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadSettings {
    /// Labels are f32 targets (regression) rather than class ids.
    pub regression: bool,
    /// Number of classes; labels at or above it are refused. `None`: one more than the
    /// largest label found.
    pub classes: Option<usize>,
    /// Longest sequence accepted; `None`: no limit.
    pub max_seq_len: Option<usize>,
    pub too_long: TooLong,
    /// Whether labels are required and read, or ignored.
    pub labels: Labels,
    /// With `regression`: the values of one label (the model's outputs), K targets per
    /// sequence or per step. `None`: one.
    pub outputs: Option<usize>,
}

impl ReadSettings {
    /// The length a sequence of `len` steps is read at, or the error that refuses it.
    pub(crate) fn admit(&self, len: usize, place: impl FnOnce() -> Place) -> Result<usize> {
        match self.max_seq_len {
            Some(0) => Err(DataError::Settings(
                "the maximum sequence length is at least 1".into(),
            )),
            Some(max) if len > max => match self.too_long {
                TooLong::Cut => Ok(max),
                TooLong::Refuse => Err(DataError::TooLong {
                    place: place(),
                    len,
                    max,
                }),
            },
            _ => Ok(len),
        }
    }

    /// With labels ignored, the layout of the placeholder labels; `None` when they are read.
    pub(crate) fn ignored_labels(&self) -> Option<LabelsPer> {
        match self.labels {
            Labels::Required => None,
            Labels::Ignored { per } => Some(per),
        }
    }

    /// Values per label: a regression's outputs, else 1 (a class id).
    pub(crate) fn label_width(&self) -> usize {
        match self.regression {
            true => self.outputs.unwrap_or(1),
            false => 1,
        }
    }

    /// The placeholder labels of a sequence of `len` steps laid out `per` sequence or step
    /// ([`Labels::Ignored`]): class 0, or 0.0 for a regression. Nothing reads them; they
    /// fill the batch's label rows so its shape and bytes are those of labelled data.
    pub(crate) fn placeholder_labels(&self, per: LabelsPer, len: usize) -> Values {
        let count = match per {
            LabelsPer::Sequence => 1,
            LabelsPer::Step => len,
        };
        if self.regression {
            Values::F32(vec![0.0; count * self.label_width()])
        } else {
            Values::Ids(vec![0; count])
        }
    }

    /// The targets of a classification whose largest label is `largest` (None: no label).
    pub(crate) fn targets(&self, largest: Option<u32>) -> Targets {
        if self.regression {
            Targets::Values {
                outputs: self.label_width(),
            }
        } else {
            let found = largest.map_or(0, |l| l as usize + 1);
            Targets::Classes {
                classes: self.classes.unwrap_or(found),
            }
        }
    }
}

/// A scanned data set: its description and the length of each sequence.
pub trait Source: Send + Sync + std::fmt::Debug {
    fn scanned(&self) -> &Scanned;
    fn dataset(&self) -> &Dataset {
        &self.scanned().dataset
    }
    /// Steps of each sequence, in file order (after any cut).
    fn lengths(&self) -> &[usize] {
        &self.scanned().lengths
    }
    /// The id a user knows sequence `index` by (the number of a DL4J file, the first field
    /// of a long CSV); by default its index in file order.
    fn id(&self, index: usize) -> String {
        index.to_string()
    }
    /// A reader of this source's sequences (its own file handles).
    fn reader(&self) -> Result<Box<dyn Reader>>;
    /// For windows of a long text: the number of parallel streams. Their batches are
    /// read in order (row `s` of every batch continues stream `s`), never shuffled.
    fn streams(&self) -> Option<usize> {
        None
    }
}

/// Reads sequences of a [`Source`] by index.
pub trait Reader: Send {
    /// Sequence `index` of the source.
    ///
    /// # Panics
    /// If `index` is not below the number of the source's sequences
    /// ([`Source::lengths`]), as a slice does: the batchers ([`crate::epoch_order`],
    /// [`crate::Batches::in_order`]) check their indices first and return an error.
    fn read(&mut self, index: usize) -> Result<Example>;
}
