//! The vocabularies of a text file (a TSV of `label<TAB>text` lines, or a corpus for a
//! character language model), kept in every checkpoint trained on one under the one key
//! `data.vocabulary` (`tensorfit_data::TextVocab`, `VOCAB_KEY`), so that evaluation, prediction, further
//! training and generation read text with the ids the model learned.

use std::path::Path;

use anyhow::{Context, Result};
use tensorfit::checkpoint_dir::checkpoint_path;
use tensorfit::nn::Checkpoint;

pub use tensorfit::data::TextVocab;

/// The vocabularies of the checkpoint at `path` (a file or a checkpoint directory),
/// read only when `data` is text (a `.tsv` or a corpus): other files need none.
pub fn of_checkpoint(path: Option<&Path>, data: Option<&Path>) -> Result<Option<TextVocab>> {
    let (Some(path), Some(data)) = (path, data) else {
        return Ok(None);
    };
    if !is_text(data) {
        return Ok(None);
    }
    let ck = Checkpoint::load(&checkpoint_path(path)).context("--checkpoint")?;
    TextVocab::load(&ck.extra).context("--checkpoint")
}

/// Whether `data` is read as text (a TSV or a corpus, as `tensorfit_data::format_of`
/// decides); a path that cannot be read is not (opening it says why).
pub fn is_text(data: &Path) -> bool {
    tensorfit::data::format_of(data).is_ok_and(|f| f.is_text())
}
