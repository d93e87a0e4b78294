//! Vocabularies kept in a checkpoint: the characters of a text (id 0 for any character the
//! text did not have) and the labels of a classification (ids in sorted order).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::{DataError, Result};

/// The characters of a corpus. Id 0 is every character not in it; the others are
/// numbered from 1 in the order of their code points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharVocab {
    chars: Vec<char>,
    ids: BTreeMap<char, u32>,
}

impl CharVocab {
    /// The vocabulary of the characters `seen`.
    pub fn new(seen: BTreeSet<char>) -> CharVocab {
        let chars: Vec<char> = seen.into_iter().collect();
        let ids = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32 + 1))
            .collect();
        CharVocab { chars, ids }
    }

    /// Ids including the unknown id 0.
    pub fn len(&self) -> usize {
        self.chars.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    /// The id of `c` (0 if unknown).
    pub fn id(&self, c: char) -> u32 {
        self.ids.get(&c).copied().unwrap_or(0)
    }

    /// The character of `id` (`None` for the unknown id or an id out of range).
    pub fn char(&self, id: u32) -> Option<char> {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.chars.get(i))
            .copied()
    }

    /// `{"unknown_id": 0, "chars": "abc…"}`: the form kept in a checkpoint.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "unknown_id": 0, "chars": self.chars.iter().collect::<String>() })
    }

    /// Reads what [`CharVocab::to_json`] wrote.
    pub fn from_json(value: &serde_json::Value) -> Result<CharVocab> {
        let chars = value["chars"].as_str().ok_or_else(|| {
            DataError::Settings("a character vocabulary is {\"chars\": \"...\"}".into())
        })?;
        let seen: BTreeSet<char> = chars.chars().collect();
        if seen.len() != chars.chars().count() {
            return Err(DataError::Settings(
                "a character vocabulary repeats a character".into(),
            ));
        }
        Ok(CharVocab::new(seen))
    }
}

/// The labels of a classification, numbered in sorted order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelVocab {
    labels: Vec<String>,
}

impl LabelVocab {
    pub fn new(seen: BTreeSet<String>) -> LabelVocab {
        LabelVocab {
            labels: seen.into_iter().collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    pub fn id(&self, label: &str) -> Option<u32> {
        self.labels
            .binary_search_by(|l| l.as_str().cmp(label))
            .ok()
            .map(|i| i as u32)
    }

    pub fn label(&self, id: u32) -> Option<&str> {
        self.labels.get(id as usize).map(String::as_str)
    }

    /// `["label0", "label1", …]`: the form kept in a checkpoint.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!(self.labels)
    }

    pub fn from_json(value: &serde_json::Value) -> Result<LabelVocab> {
        let labels: Option<BTreeSet<String>> = value
            .as_array()
            .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect());
        labels
            .map(LabelVocab::new)
            .ok_or_else(|| DataError::Settings("a label vocabulary is a list of strings".into()))
    }
}

/// The checkpoint metadata key under which a text's vocabularies are kept, as JSON:
/// `{"chars": {"unknown_id": 0, "chars": "…"}, "labels": ["neg", "pos"]}` (`labels` only
/// for a TSV): training writes it, and evaluation, prediction, further training and
/// generation read text with the ids the model learned.
pub const VOCAB_KEY: &str = "data.vocabulary";

/// A text's characters, and a TSV's labels.
#[derive(Debug, Clone, PartialEq)]
pub struct TextVocab {
    pub chars: CharVocab,
    pub labels: Option<LabelVocab>,
}

impl TextVocab {
    /// Writes the vocabularies into a checkpoint's metadata under [`VOCAB_KEY`].
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let mut v = serde_json::json!({ "chars": self.chars.to_json() });
        if let Some(l) = &self.labels {
            v["labels"] = l.to_json();
        }
        extra.insert(VOCAB_KEY.to_string(), v.to_string());
    }

    /// The vocabularies a checkpoint's metadata holds, if any.
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<TextVocab>> {
        let Some(text) = extra.get(VOCAB_KEY) else {
            return Ok(None);
        };
        let bad = |e: String| DataError::Settings(format!("`{VOCAB_KEY}`: {e}"));
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let chars = CharVocab::from_json(&v["chars"]).map_err(|e| bad(e.to_string()))?;
        let labels = match v.get("labels") {
            Some(l) => Some(LabelVocab::from_json(l).map_err(|e| bad(e.to_string()))?),
            None => None,
        };
        Ok(Some(TextVocab { chars, labels }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vocabulary_comes_back_from_a_checkpoints_metadata_as_it_was_stored() {
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
