//! tensorfit-data: users' files turned into batches.
//!
//! A format's reader first *scans* its file (checking every value, so bad data fails
//! before training starts with the file, line and column, and keeping only an index of
//! offsets and lengths, so a file larger than memory streams) and becomes a [`Source`]:
//! a [`Dataset`] description and each sequence's length. A [`Reader`] of the source reads
//! one sequence on demand. [`split`] divides the sequences into training and validation,
//! and [`Batches`] reads an epoch's batches on a background thread a bounded number
//! ahead: shuffled from (seed, epoch), grouped by length, padded only to the longest
//! sequence of each batch, time-major.
//!
//! Formats (by example in `docs/data.md`): safetensors, `.npy`/`.npz` ([`TensorData`]);
//! DL4J's directories of numbered CSV files ([`CsvSequenceDir`]); one long CSV
//! ([`LongCsv`]); a text corpus for a character language model ([`CharCorpus`],
//! [`CharWindows`]); a TSV of `label<TAB>text` lines ([`TsvData`]).
//!
//! A data run keeps its files' [`DataIdentity`] (path, size, a sampled content hash, the
//! sequences read) in its checkpoints, to refuse resuming on other data.
//!
//! What this crate does not do: know about models, devices or plans. The planner takes
//! its host figures from [`max_batch_bytes`] and [`BatchSettings::read_ahead`].

mod arrays;
mod batch;
mod csv_dir;
mod csv_long;
mod dataset;
mod error;
mod fields;
mod format;
mod identity;
mod pipeline;
mod shard;
mod tensors;
mod text;
mod tsv;
mod vocab;
mod windows;
mod zip;

use std::path::Path;
use std::sync::Arc;

pub use batch::{max_batch_bytes, Batch, BatchInputs, InputBuffers};
pub use csv_dir::CsvSequenceDir;
pub use csv_long::LongCsv;
pub use dataset::{
    Dataset, Example, Inputs, Labels, LabelsPer, ReadSettings, Reader, Scanned, Source, Targets,
    TooLong, Values,
};
pub use error::{DataError, Place, Result};
pub use format::{format_of, Format};
pub use identity::{DataIdentities, DataIdentity, IDENTITY_KEY};
pub use pipeline::{
    epoch_batches, epoch_order, epoch_seed, length_grouped_batches, padded_steps,
    same_length_batches, shuffled_batches, split, stream_batches, BatchOrder, BatchSettings,
    Batches,
};
pub use shard::{RankBatch, Shard};
pub use tensors::TensorData;
pub use text::CharCorpus;
pub use tsv::TsvData;
pub use vocab::{CharVocab, LabelVocab, TextVocab, VOCAB_KEY};
pub use windows::CharWindows;

/// What [`open`] found at a path.
#[derive(Debug)]
pub enum Opened {
    /// Sequences with their labels.
    Sequences(Arc<dyn Source>),
    /// A text corpus: cut it into [`CharWindows`] for a language model.
    Corpus(CharCorpus),
}

/// Opens `path` by its form ([`format_of`]: a file's first bytes, else its extension in
/// any case): a directory holding `features/` and `labels/` (DL4J's layout; `labels/` is
/// not read with labels ignored); safetensors, `.npy`, `.npz` (tensors); `.csv` (one long
/// CSV); `.tsv` (`label<TAB>text`); anything else is a text corpus.
pub fn open(path: &Path, settings: &ReadSettings) -> Result<Opened> {
    let source: Arc<dyn Source> = match format_of(path)? {
        Format::Directory => Arc::new(CsvSequenceDir::open_dir(path, settings)?),
        Format::Safetensors | Format::Npy | Format::Npz => {
            Arc::new(TensorData::open(path, settings)?)
        }
        Format::LongCsv => Arc::new(LongCsv::open(path, settings).map_err(|e| match settings.labels {
            // Its last column cannot be told from a feature, so it is read even when
            // labels are ignored: a file read but refused may lack it.
            Labels::Ignored { .. } if !e.is_unreadable() => DataError::Noted {
                error: Box::new(e),
                note: "a long CSV keeps its label column even to predict: sequence,step,f1,...,fk,label, any class the model knows (a regression of K outputs: its last K columns, any numbers); it is not used",
            },
            _ => e,
        })?),
        Format::Tsv => Arc::new(TsvData::open(path, settings, None)?),
        Format::Text => return Ok(Opened::Corpus(CharCorpus::open(path)?)),
    };
    Ok(Opened::Sequences(source))
}
