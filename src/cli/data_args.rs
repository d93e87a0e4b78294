//! The flags that read a user's data files (`--data`), shared by `train`, `eval`,
//! `predict` (and `plan`, which takes only where the data is and how far to read
//! ahead), and what they check before any device is opened: the file against the model.
//!
//! Batches hold sequences of different lengths, padded to each batch's longest, with the
//! lengths passed to the trainer (whose programs are then planned padded, so each
//! sequence stops at its end): training batches drawn from the whole shuffled epoch
//! (`shuffled_batches`, or grouped by length with `--batch-order length-grouped`),
//! evaluation's grouped by length (`length_grouped_batches`). The session is planned for
//! a bound (the batch and the data's longest sequence) that every batch is within.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use tensorfit::core::rows::IGNORE_LABEL;
use tensorfit::core::HostTensor;
use tensorfit::data::{
    epoch_batches, format_of, length_grouped_batches, max_batch_bytes, open, padded_steps,
    stream_batches, Batch, BatchInputs, BatchOrder, BatchSettings, Batches, CharCorpus,
    CharWindows, Dataset, Format, Inputs, Labels, LabelsPer, Opened, ReadSettings, Source, Targets,
    TooLong, TsvData, Values,
};
use tensorfit::nn::{DataFigures, HeadOn, InputSpec, LossSpec, ModelDescription};

use super::data_vocab::TextVocab;

/// Where the data is and how far ahead it is read.
#[derive(Args, Clone, Debug)]
pub struct DataSource {
    /// Read sequences from your own files instead of the built-in task: a `.safetensors`,
    /// `.npy` or `.npz` file (`input` [N, T, F] or `tokens` [N, T]; `labels` [N] or
    /// [N, T], class ids or f32 regression targets, [N, K] or [N, T, K] for K outputs;
    /// optional `lengths`), a directory holding DL4J's `features/` and `labels/` (one CSV
    /// per sequence; K values per label line), one long `.csv`
    /// (`sequence,step,f1,…,fk,label`; K outputs: the last K columns), or a `.tsv` of
    /// `label<TAB>text` lines (characters
    /// as tokens; the vocabulary is kept in the checkpoint). Sequences of different lengths are
    /// padded to their batch's longest and masked (training: batches drawn from the whole
    /// shuffled epoch, see --batch-order; evaluation: batched by length).
    /// `predict` needs no labels and reads none: tensors without `labels`, `features/`
    /// without `labels/`, a `.tsv` of `text` lines (a line with a TAB is still
    /// `label<TAB>text`); only a long CSV keeps its label column (any known class; a
    /// regression's K target columns, any numbers).
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Batches the background reader prepares ahead of the one in use; the host memory of
    /// the N + 1 batches it may hold (one more it is building) is part of the plan.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "data")]
    pub read_ahead: usize,
}

/// The data flags of `train`, `eval` and `predict`.
#[derive(Args, Clone, Debug)]
pub struct DataArgs {
    #[command(flatten)]
    pub source: DataSource,
    /// Longest sequence accepted from --data: a longer one is refused, naming its file
    /// (or cut to this length with --cut-long).
    #[arg(long, value_name = "STEPS", requires = "data", value_parser = super::at_least_one::<usize>)]
    pub max_seq_len: Option<usize>,
    /// With --max-seq-len: keep the first steps of longer sequences instead of refusing.
    #[arg(long, requires = "max_seq_len")]
    pub cut_long: bool,
    /// With a text --data: start every window from a zero state. By default row b of each
    /// batch continues row b of the batch before (a contiguous part of the text) and
    /// starts from the state it left, without a gradient across the border.
    #[arg(long, requires = "data")]
    pub reset_state: bool,
}

/// The flags of `train --data` alone: validation, epochs, early stopping.
#[derive(Args, Clone, Debug)]
pub struct FitArgs {
    /// With --data: the fraction of its sequences held out for validation (chosen from
    /// --seed); 0 trains on all of them without validating.
    #[arg(
        long,
        value_name = "F",
        default_value_t = 0.1,
        requires = "data",
        conflicts_with = "val"
    )]
    pub val_fraction: f64,
    /// With --data: validate on this file instead of a part of --data (same formats).
    #[arg(long, value_name = "PATH", requires = "data")]
    pub val: Option<PathBuf>,
    /// With --data: passes over the training sequences (each shuffled from --seed and the
    /// epoch's number).
    #[arg(long, default_value_t = 10, requires = "data", value_parser = super::at_least_one::<u64>)]
    pub epochs: u64,
    /// `--steps` typed with --data: a budget of optimizer steps (Lightning's
    /// `max_steps`); the run ends at the first whole batch at or past it, or after
    /// --epochs, whichever comes first (without --epochs, the epochs the budget needs).
    #[arg(skip)]
    pub max_steps: Option<u64>,
    /// With --data: how each epoch is cut into batches. "shuffled": the whole epoch in a
    /// random order, each batch padded to its own longest sequence and run with its
    /// lengths, the last partial batch included (PyTorch's DataLoader with shuffle=True
    /// and pack_padded_sequence). "length-grouped": sequences of similar lengths batched
    /// together (in groups of 50 batches): less padding, so less work per epoch, but the
    /// batches of one length run one after another, and consecutive steps see correlated
    /// batches, which can cost much validation accuracy (docs/data.md). Either way the
    /// run is planned once, for --batch and the data's longest sequence.
    #[arg(long, value_name = "shuffled|length-grouped", value_parser = parse_batch_order, default_value = "shuffled", requires = "data")]
    pub batch_order: BatchOrder,
    /// With --data: stop early after this many validations in a row without a lower
    /// validation loss (`--patience` is the plateau schedule's); the checkpoint outputs
    /// hold the best model validated either way.
    #[arg(long, value_name = "VALIDATIONS", requires = "data", value_parser = super::at_least_one::<u64>)]
    pub stop_patience: Option<u64>,
    /// With --data: start from the model and weights of this checkpoint (a new run: its
    /// optimizer state and step are not used) instead of --model with fresh weights.
    #[arg(
        long,
        value_name = "FILE|DIR",
        requires = "data",
        conflicts_with = "resume"
    )]
    pub init: Option<PathBuf>,
}

/// `--batch-order`'s value.
fn parse_batch_order(name: &str) -> Result<BatchOrder, String> {
    BatchOrder::parse(name).map_err(|e| e.to_string())
}

/// A data file checked against the model.
#[derive(Debug, Clone)]
pub struct Files {
    pub path: PathBuf,
    pub source: Arc<dyn Source>,
    pub read_ahead: usize,
    /// The sequences have different lengths: batches are padded and the programs that
    /// run them take the lengths (`Request::padded`).
    pub padded: bool,
    /// A text's vocabularies (kept in the checkpoint).
    pub vocab: Option<TextVocab>,
    /// A text corpus, cut into windows of this many characters ([`Files::text_part`]).
    pub text: Option<(CharCorpus, usize)>,
    /// Each batch continues the one before (`Batch::continues`: a text's windows) and
    /// starts from the state it left; false with `--reset-state`.
    pub carry: bool,
}

impl DataSource {
    /// Opens and scans `--data` (if given) for `cfg`; a text with `vocab` (a checkpoint's)
    /// if given.
    pub fn open(
        &self,
        cfg: &ModelDescription,
        settings: &ReadSettings,
        vocab: Option<&TextVocab>,
    ) -> Result<Option<Files>> {
        let Some(path) = &self.data else {
            return Ok(None);
        };
        Ok(Some(open_for(path, cfg, settings, self.read_ahead, vocab)?))
    }
}

impl DataArgs {
    pub fn path(&self) -> Option<&Path> {
        self.source.data.as_deref()
    }

    /// How the files are read for `cfg`: labels checked against its classes.
    pub fn read_settings(&self, cfg: &ModelDescription) -> ReadSettings {
        read_settings(cfg, self.max_seq_len, self.cut_long)
    }

    /// Opens and scans `--data` (if given), checked against `cfg`, its labels read or
    /// ignored as `labels` says; a text with `vocab` (a checkpoint's) if given.
    pub fn open(
        &self,
        cfg: &ModelDescription,
        labels: Labels,
        vocab: Option<&TextVocab>,
    ) -> Result<Option<Files>> {
        let settings = ReadSettings {
            labels,
            ..self.read_settings(cfg)
        };
        let files = self.source.open(cfg, &settings, vocab)?;
        if let Some(f) = files
            .as_ref()
            .filter(|f| self.reset_state && f.text.is_none())
        {
            bail!(
                "{} holds sequences, not a text read in windows: drop --reset-state (each sequence starts from a zero state already)",
                f.path.display()
            );
        }
        Ok(files.map(|f| Files {
            carry: f.carry && !self.reset_state,
            ..f
        }))
    }
}

/// Read settings for `cfg`: labels required, and one at or above its classes refused with
/// its place.
pub fn read_settings(
    cfg: &ModelDescription,
    max_seq_len: Option<usize>,
    cut: bool,
) -> ReadSettings {
    ReadSettings {
        regression: matches!(cfg.loss, LossSpec::MeanSquaredError { .. }),
        classes: match cfg.loss {
            LossSpec::SoftmaxCrossEntropy { classes } => Some(classes),
            LossSpec::MeanSquaredError { .. } => None,
        },
        max_seq_len,
        too_long: if cut { TooLong::Cut } else { TooLong::Refuse },
        labels: Labels::Required,
        head: Some(head_labels(cfg)),
        outputs: Some(cfg.loss.outputs()),
    }
}

/// What the data at `path` holds, for the figures a description file leaves to it
/// (`vocab = "data"`): its values per step or token ids, classes or regression targets.
/// It is read as `cfg` (whose figures may be placeholders) reads it, without checking it
/// against them; a text's vocabulary gives both its token ids and its classes.
pub fn data_figures(
    path: &Path,
    cfg: &ModelDescription,
    max_seq_len: Option<usize>,
    cut: bool,
) -> Result<DataFigures> {
    let settings = ReadSettings {
        classes: None,
        outputs: None,
        ..read_settings(cfg, max_seq_len, cut)
    };
    let d = if format_of(path)? == Format::Tsv {
        TsvData::open(path, &settings, None)?.dataset().clone()
    } else {
        match open(path, &settings)? {
            Opened::Sequences(s) => s.dataset().clone(),
            Opened::Corpus(corpus) => {
                let ids = Some(corpus.vocab().len());
                return Ok(DataFigures {
                    vocab: ids,
                    classes: ids,
                    ..DataFigures::default()
                });
            }
        }
    };
    let (features, vocab) = match d.inputs {
        Inputs::Dense { features } => (Some(features), None),
        Inputs::Tokens { vocab } => (None, Some(vocab)),
    };
    let (classes, outputs) = match d.targets {
        Targets::Classes { classes } => (Some(classes), None),
        Targets::Values { outputs } => (None, Some(outputs)),
    };
    Ok(DataFigures {
        features,
        vocab,
        classes,
        outputs,
    })
}

/// Opens `path` (named `--data`/`--val` in errors by the caller) and checks that `cfg`
/// can take what it holds. A `.tsv` is read with `vocab` when given (the training data's,
/// or a checkpoint's), else with its own.
pub fn open_for(
    path: &Path,
    cfg: &ModelDescription,
    settings: &ReadSettings,
    read_ahead: usize,
    vocab: Option<&TextVocab>,
) -> Result<Files> {
    let is_tsv = format_of(path)? == Format::Tsv;
    let (source, vocab): (Arc<dyn Source>, _) = if is_tsv {
        let known = vocab.and_then(|v| v.labels.as_ref().map(|l| (&v.chars, l)));
        let tsv = TsvData::open(path, settings, known)?;
        let vocab = TextVocab {
            chars: tsv.chars().clone(),
            labels: Some(tsv.labels().clone()),
        };
        (Arc::new(tsv), Some(vocab))
    } else {
        match open(path, settings)? {
            Opened::Sequences(s) => (s, None),
            Opened::Corpus(corpus) => {
                let how = (settings, read_ahead);
                return language_model(path, &corpus, cfg, how, vocab);
            }
        }
    };
    check_fits(path, source.dataset(), cfg)?;
    let lengths = source.lengths();
    let padded = lengths.iter().any(|&l| Some(&l) != lengths.first());
    Ok(Files {
        path: path.to_path_buf(),
        source,
        read_ahead,
        padded,
        vocab,
        text: None,
        carry: false,
    })
}

/// A text corpus: a next-character language model. Its vocabulary (the checkpoint's if
/// given) must fit the model's token input; the windows of the text (`CharWindows`, the
/// state carried from each window of a stream to the next) are then trained with a label
/// per step, which [`per_step_labels`] decides on.
fn language_model(
    path: &Path,
    corpus: &CharCorpus,
    cfg: &ModelDescription,
    (settings, read_ahead): (&ReadSettings, usize),
    vocab: Option<&TextVocab>,
) -> Result<Files> {
    let chars = vocab.map_or_else(|| corpus.vocab(), |v| v.chars.clone());
    let shown = path.display();
    match cfg.input {
        InputSpec::Tokens { vocab, .. } if vocab >= chars.len() => {}
        _ => bail!(
            "{shown}: read as a text corpus for a character language model: {} character ids (0 for unknown characters), so the model needs token input with `vocab` at least {} and {} classes",
            chars.len(),
            chars.len(),
            chars.len()
        ),
    }
    let window = settings.max_seq_len.unwrap_or(DEFAULT_WINDOW);
    if corpus.chars < 2 {
        bail!(
            "{shown}: read as a text corpus for a character language model, and its {} character{} too short for any window: a window of n characters needs n + 1 (its inputs, and the next character of each as the target); give a text of at least 2 characters",
            corpus.chars,
            if corpus.chars == 1 { " is" } else { "s are" }
        );
    }
    // The whole text in one stream, to check it against the model; a run cuts the part
    // it reads into a stream per row of its batches (`Files::text_part`).
    let windows =
        CharWindows::new(corpus, &chars, (0, corpus.chars), 1, window).with_context(|| {
            format!(
                "{shown}: the text in windows of {window} characters (--max-seq-len: give at most {})",
                corpus.chars.saturating_sub(1)
            )
        })?;
    let source: Arc<dyn Source> = Arc::new(windows);
    check_fits(path, source.dataset(), cfg)?;
    Ok(Files {
        path: path.to_path_buf(),
        source,
        read_ahead,
        padded: false,
        vocab: Some(TextVocab {
            chars,
            labels: None,
        }),
        text: Some((corpus.clone(), window)),
        carry: true,
    })
}

/// Characters per window of a text corpus when `--max-seq-len` does not say.
pub const DEFAULT_WINDOW: usize = 100;

/// Labels per step (a language model's next characters, or a file's label per step)
/// need a head on every step, and one label per sequence a head on the last step.
pub fn per_step_labels(path: &Path, per: LabelsPer, cfg: &ModelDescription) -> Result<()> {
    let shown = path.display();
    match (per, cfg.head.on) {
        (LabelsPer::Step, HeadOn::EveryStep) | (LabelsPer::Sequence, HeadOn::Sequence(_)) => Ok(()),
        (LabelsPer::Step, HeadOn::Sequence(_)) => bail!(
            "{shown}: a label per step (a language model's next characters, or per-step labels), and the model's head reads the last step only: give it `on = \"every_step\"` in `[head]`"
        ),
        (LabelsPer::Sequence, HeadOn::EveryStep) => bail!(
            "{shown}: one label per sequence, and the model's head is on every step: give it `on = \"last\"` in `[head]`"
        ),
    }
}

/// Labels ignored (`predict --data`): a file may have none, and each sequence carries
/// placeholders laid out as `cfg`'s head reads them (one per step on every step).
pub fn ignored_labels(cfg: &ModelDescription) -> Labels {
    Labels::Ignored {
        per: head_labels(cfg),
    }
}

/// The labels `cfg`'s head takes: one per step on every step, else one per sequence.
fn head_labels(cfg: &ModelDescription) -> LabelsPer {
    match cfg.head.on {
        HeadOn::EveryStep => LabelsPer::Step,
        HeadOn::Sequence(_) => LabelsPer::Sequence,
    }
}

/// Refuses data the model cannot take, naming the file and the model's figure.
fn check_fits(path: &Path, d: &Dataset, cfg: &ModelDescription) -> Result<()> {
    let shown = path.display();
    match (d.inputs, cfg.input) {
        (Inputs::Dense { features }, InputSpec::Dense { features: wanted }) => {
            if features != wanted {
                bail!("{shown}: {features} features per step, and the model takes {wanted}");
            }
        }
        (Inputs::Tokens { vocab }, InputSpec::Tokens { vocab: wanted, .. }) => {
            if vocab > wanted {
                bail!("{shown}: token ids up to {} ({vocab} ids), and the model's `vocab` is {wanted}", vocab - 1);
            }
        }
        (Inputs::Tokens { vocab }, InputSpec::Dense { .. }) => bail!(
            "{shown}: token ids ({vocab} of them), and the model takes dense features: give it token input (`vocab` at least {vocab})"
        ),
        (Inputs::Dense { features }, InputSpec::Tokens { .. }) => bail!(
            "{shown}: {features} dense features per step, and the model takes token ids"
        ),
    }
    match (d.targets, cfg.loss) {
        (Targets::Classes { classes }, LossSpec::SoftmaxCrossEntropy { classes: wanted }) => {
            if classes > wanted {
                bail!("{shown}: {classes} classes, and the model has {wanted}");
            }
        }
        (Targets::Values { outputs: found }, LossSpec::MeanSquaredError { outputs }) => {
            if outputs != found {
                bail!("{shown}: {found} f32 targets per label, and the model's mean squared error has {outputs} outputs (labels [N, {outputs}] per sequence or [N, T, {outputs}] per step)");
            }
        }
        (Targets::Values { .. }, LossSpec::SoftmaxCrossEntropy { .. }) => {
            bail!("{shown}: f32 targets (regression), and the model is a classifier")
        }
        (Targets::Classes { .. }, LossSpec::MeanSquaredError { .. }) => {
            bail!("{shown}: class labels, and the model is a regression (mean squared error)")
        }
    }
    per_step_labels(path, d.labels_per, cfg)
}

impl Files {
    pub fn dataset(&self) -> &Dataset {
        self.source.dataset()
    }

    /// The host bytes of the batches of `batch` sequences its reader may hold besides the
    /// one in use (which `HostNeed::inputs` counts): of the `read_ahead + 2` batches that
    /// exist at once (docs/data.md), `read_ahead + 1`, and never more than the other
    /// batches of an epoch of `batches`.
    pub fn read_ahead_bytes(&self, batch: usize, batches: usize) -> u64 {
        let per_batch = max_batch_bytes(self.dataset(), batch) as u64;
        let held = self
            .read_ahead
            .saturating_add(1)
            .min(batches.saturating_sub(1));
        per_batch.saturating_mul(held as u64)
    }

    /// Characters `range` of a text cut into `streams` streams (fewer when the range has
    /// not a window for each), the batch size its batches are read in: row `s` of batch
    /// `k` is window `k` of stream `s`. The files themselves when they are not a text.
    pub fn text_part(&self, range: (u64, u64), streams: usize) -> Result<Files> {
        let (Some((corpus, window)), Some(vocab)) = (&self.text, &self.vocab) else {
            return Ok(self.clone());
        };
        let fit = range.1.saturating_sub(range.0) / (*window as u64 + 1);
        let streams = streams.min(fit.max(1) as usize);
        let windows = CharWindows::new(corpus, &vocab.chars, range, streams, *window)
            .with_context(|| {
                format!(
                    "{}: characters {}..{}, in windows of {window} (--max-seq-len)",
                    self.path.display(),
                    range.0,
                    range.1
                )
            })?;
        Ok(Files {
            source: Arc::new(windows),
            ..self.clone()
        })
    }

    /// The whole of a text cut into `streams` streams ([`Files::text_part`]); the files
    /// themselves when they are not a text.
    pub fn whole_text(&self, streams: usize) -> Result<Files> {
        let chars = self.text.as_ref().map_or(0, |(corpus, _)| corpus.chars);
        self.text_part((0, chars), streams)
    }

    /// A training epoch's batches of `indices` in `order`, shuffled from `seed`: the whole
    /// epoch at random or grouped by length ([`epoch_batches`]); a
    /// text's windows in order, batch `k` holding window `k` of every stream.
    pub fn training_order(
        &self,
        indices: &[usize],
        batch: usize,
        (order, seed): (BatchOrder, u64),
    ) -> Result<Vec<Vec<usize>>> {
        match self.source.streams() {
            None => {
                let lengths = self.source.lengths();
                Ok(epoch_batches(lengths, indices, batch, order, seed)?)
            }
            Some(_) => self.order(indices, batch, Some(seed)),
        }
    }

    /// The batches of `indices` grouped by length, shuffled from `seed` when given, in
    /// increasing length and file order when not; a text's windows in order, batch `k`
    /// holding window `k` of every stream.
    pub fn order(
        &self,
        indices: &[usize],
        batch: usize,
        seed: Option<u64>,
    ) -> Result<Vec<Vec<usize>>> {
        if let Some(streams) = self.source.streams() {
            return Ok(stream_batches(indices, streams));
        }
        let group = BatchSettings::default().group;
        let lengths = self.source.lengths();
        Ok(length_grouped_batches(
            lengths, indices, batch, group, seed,
        )?)
    }

    /// The (batch, padded steps) of the batch `indices`.
    pub fn shape(&self, indices: &[usize]) -> (usize, usize) {
        let steps = padded_steps(self.source.lengths(), indices);
        (indices.len().max(1), steps.max(1))
    }

    /// Starts the background reader over `order`.
    pub fn batches(&self, order: Vec<Vec<usize>>) -> Result<Batches> {
        Batches::in_order(self.source.clone(), order, self.read_ahead)
            .with_context(|| format!("reading {}", self.path.display()))
    }
}

/// `b` as the library's runner takes it ([`tensorfit::Batch`]): inputs `[T, B, F]` (token
/// ids `[T, B]`), class ids as f32, and each sequence's length. Class labels per step past
/// a sequence's end become [`IGNORE_LABEL`]: they count neither in the loss nor in the
/// gradient.
pub fn trainer_inputs(b: Batch) -> Result<tensorfit::Batch> {
    let (rows, steps) = (b.lengths.len(), b.steps);
    let per_step_ids = matches!(&b.labels, Values::Ids(v) if v.len() == steps * rows && steps > 1);
    let x = match b.inputs {
        BatchInputs::Dense(x) => x,
        BatchInputs::Tokens(ids) => {
            let ids = ids.into_iter().map(|t| t as f32).collect();
            HostTensor::new([b.steps, b.lengths.len()], ids)?
        }
    };
    let mut labels: Vec<f32> = match b.labels {
        Values::Ids(ids) => ids.into_iter().map(|l| l as f32).collect(),
        Values::F32(v) => v,
    };
    if per_step_ids {
        // Time-major [T, B]: step t of row r is at t·B + r.
        for (r, &len) in b.lengths.iter().enumerate() {
            for t in len..steps {
                labels[t * rows + r] = IGNORE_LABEL;
            }
        }
    }
    Ok(tensorfit::Batch {
        x,
        labels,
        lengths: Some(b.lengths),
    })
}
