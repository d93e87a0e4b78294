//! The vocabularies of a text file (a TSV of `label<TAB>text` lines, or a corpus for a
//! character language model), kept in every checkpoint trained on one under the one key
//! [`VOCAB_KEY`], so that evaluation, prediction and further training read text with the
//! ids the model learned.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;
use tensorfit::checkpoint_dir::checkpoint_path;
use tensorfit::data::{CharVocab, LabelVocab};
use tensorfit::nn::Checkpoint;

/// The checkpoint entry (`extra`) holding a text's vocabularies, as JSON:
/// `{"chars": {"unknown_id": 0, "chars": "…"}, "labels": ["neg", "pos"]}` (`labels` only
/// for a TSV).
pub const VOCAB_KEY: &str = "data.vocabulary";

/// A text's characters, and a TSV's labels.
#[derive(Debug, Clone, PartialEq)]
pub struct TextVocab {
    pub chars: CharVocab,
    pub labels: Option<LabelVocab>,
}

impl TextVocab {
    /// Writes the vocabularies into a checkpoint's `extra`.
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let mut v = json!({ "chars": self.chars.to_json() });
        if let Some(l) = &self.labels {
            v["labels"] = l.to_json();
        }
        extra.insert(VOCAB_KEY.to_string(), v.to_string());
    }

    /// The vocabularies a checkpoint's `extra` holds, if any.
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<TextVocab>> {
        let Some(text) = extra.get(VOCAB_KEY) else {
            return Ok(None);
        };
        let v: serde_json::Value =
            serde_json::from_str(text).with_context(|| format!("`{VOCAB_KEY}` is not JSON"))?;
        let chars = CharVocab::from_json(&v["chars"]).context(VOCAB_KEY)?;
        let labels = match v.get("labels") {
            Some(l) => Some(LabelVocab::from_json(l).context(VOCAB_KEY)?),
            None => None,
        };
        Ok(Some(TextVocab { chars, labels }))
    }

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
}

/// Whether `data` is read as text (`tensorfit_data::open`'s rule: not a directory, and
/// not a tensor or CSV file).
pub fn is_text(data: &Path) -> bool {
    let ext = data.extension().and_then(|e| e.to_str()).unwrap_or("");
    !data.is_dir() && !matches!(ext, "safetensors" | "npy" | "npz" | "csv")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vocabulary_comes_back_from_a_checkpoints_extra_as_it_was_stored() {
        let v = TextVocab {
            chars: CharVocab::new("héllo".chars().collect()),
            labels: Some(LabelVocab::new(
                ["neg".to_string(), "pos".to_string()].into(),
            )),
        };
        let mut extra = HashMap::new();
        assert_eq!(TextVocab::load(&extra).unwrap(), None);
        v.store(&mut extra);
        assert_eq!(TextVocab::load(&extra).unwrap(), Some(v));
        extra.insert(VOCAB_KEY.into(), "{".into());
        assert!(TextVocab::load(&extra).is_err());
    }
}
