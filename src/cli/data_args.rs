//! The flags that read a user's data files (`--data`), shared by `train`, `eval`,
//! `predict` (and `plan`, which takes only where the data is and how far to read
//! ahead), and what they check before any device is opened: the file against the model.
//!
//! Batches hold sequences of different lengths grouped by length
//! (`length_grouped_batches`), padded to each batch's longest, with the lengths passed to
//! the trainer (whose programs are then planned padded, so each sequence stops at its end);
//! the session is replanned when a batch's shape changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use tensorfit::core::HostTensor;
use tensorfit::data::{
    length_grouped_batches, max_batch_bytes, open, Batch, BatchInputs, BatchSettings, Batches,
    Dataset, Inputs, LabelsPer, Opened, ReadSettings, Source, Targets, TooLong, Values,
};
use tensorfit::nn::{Cell, HeadOn, InputSpec, LossSpec, ModelDescription};

/// Where the data is and how far ahead it is read.
#[derive(Args, Clone, Debug)]
pub struct DataSource {
    /// Read sequences from your own files instead of the built-in task: a `.safetensors`,
    /// `.npy` or `.npz` file (`input` [N, T, F], `labels` [N], optional `lengths`), a
    /// directory holding DL4J's `features/` and `labels/` (one CSV per sequence), or one
    /// long `.csv` (`sequence,step,f1,…,fk,label`). Sequences of different lengths are
    /// batched with others of similar length, padded to the batch's longest and masked.
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
    #[arg(long, value_name = "STEPS", requires = "data")]
    pub max_seq_len: Option<usize>,
    /// With --max-seq-len: keep the first steps of longer sequences instead of refusing.
    #[arg(long, requires = "max_seq_len")]
    pub cut_long: bool,
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
    #[arg(long, default_value_t = 10, requires = "data")]
    pub epochs: u64,
    /// With --data: stop early after this many validations in a row without a lower
    /// validation loss (`--patience` is the plateau schedule's); the checkpoint outputs
    /// hold the best model validated either way.
    #[arg(long, value_name = "VALIDATIONS", requires = "data")]
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

/// A data file checked against the model.
#[derive(Debug, Clone)]
pub struct Files {
    pub path: PathBuf,
    pub source: Arc<dyn Source>,
    pub read_ahead: usize,
    /// The sequences have different lengths: batches are padded and the programs that
    /// run them take the lengths (`Request::padded`).
    pub padded: bool,
}

impl DataSource {
    /// Opens and scans `--data` (if given) for `cfg`.
    pub fn open(&self, cfg: &ModelDescription, settings: &ReadSettings) -> Result<Option<Files>> {
        let Some(path) = &self.data else {
            return Ok(None);
        };
        Ok(Some(open_for(path, cfg, settings, self.read_ahead)?))
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

    /// Opens and scans `--data` (if given), checked against `cfg`.
    pub fn open(&self, cfg: &ModelDescription) -> Result<Option<Files>> {
        self.source.open(cfg, &self.read_settings(cfg))
    }
}

/// Read settings for `cfg`: a label at or above its classes is refused with its place.
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
    }
}

/// Opens `path` (named `--data`/`--val` in errors by the caller) and checks that `cfg`
/// can take what it holds.
pub fn open_for(
    path: &Path,
    cfg: &ModelDescription,
    settings: &ReadSettings,
    read_ahead: usize,
) -> Result<Files> {
    let opened = open(path, settings)?;
    let source = match opened {
        Opened::Sequences(s) => s,
        Opened::Corpus(_) => bail!(
            "{}: read as a text corpus (for a character language model), which training from files does not take yet; give a .safetensors, .npy, .npz, .csv file or a directory with features/ and labels/",
            path.display()
        ),
    };
    check_fits(path, source.dataset(), cfg)?;
    let lengths = source.lengths();
    let padded = lengths.iter().any(|&l| Some(&l) != lengths.first());
    if padded && cfg.recurrent.cell == Cell::Gru {
        bail!(
            "{}: sequences of different lengths are batched padded, and a GRU does not take padded batches (lengths) yet; give sequences of one length, or use an LSTM",
            path.display()
        );
    }
    Ok(Files {
        path: path.to_path_buf(),
        source,
        read_ahead,
        padded,
    })
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
        (Inputs::Tokens { .. }, _) | (_, InputSpec::Tokens { .. }) => bail!(
            "{shown}: token inputs (or a token-input model) are not read from files yet; give dense `input` [N, T, F] and a model with dense inputs"
        ),
    }
    if d.labels_per == LabelsPer::Step || cfg.head.on == HeadOn::EveryStep {
        bail!(
            "{shown}: a label per step (or a per-step head) is not trained from files yet; give one label per sequence and a model whose head reads the last step"
        );
    }
    if d.targets == Targets::Values {
        bail!("{shown}: regression targets are not trained from files yet (the trainer takes class ids)");
    }
    Ok(())
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
        let held = (self.read_ahead + 1).min(batches.saturating_sub(1));
        per_batch.saturating_mul(held as u64)
    }

    /// The batches of `indices` grouped by length, shuffled from `seed` when given, in
    /// increasing length and file order when not.
    pub fn order(
        &self,
        indices: &[usize],
        batch: usize,
        seed: Option<u64>,
    ) -> Result<Vec<Vec<usize>>> {
        let group = BatchSettings::default().group;
        let lengths = self.source.lengths();
        Ok(length_grouped_batches(
            lengths, indices, batch, group, seed,
        )?)
    }

    /// The (batch, padded steps) of the batch `indices`.
    pub fn shape(&self, indices: &[usize]) -> (usize, usize) {
        let lengths = self.source.lengths();
        let steps = indices.iter().map(|&i| lengths[i]).max().unwrap_or(1);
        (indices.len().max(1), steps)
    }

    /// Starts the background reader over `order`.
    pub fn batches(&self, order: Vec<Vec<usize>>) -> Result<Batches> {
        Batches::in_order(self.source.clone(), order, self.read_ahead)
            .with_context(|| format!("reading {}", self.path.display()))
    }
}

/// A batch as the trainer takes it: inputs [T, B, F], class ids as f32, and each
/// sequence's length.
pub struct TrainerBatch {
    pub x: HostTensor,
    pub labels: Vec<f32>,
    pub lengths: Vec<f32>,
}

/// `b` as the trainer takes it.
pub fn trainer_inputs(b: Batch) -> Result<TrainerBatch> {
    let lengths = b.lengths.iter().map(|&l| l as f32).collect();
    let x = match b.inputs {
        BatchInputs::Dense(x) => x,
        BatchInputs::Tokens(_) => bail!("token batches are not trained from files yet"),
    };
    let labels = match b.labels {
        Values::Ids(ids) => ids.into_iter().map(|l| l as f32).collect(),
        Values::F32(v) => v,
    };
    Ok(TrainerBatch { x, labels, lengths })
}
