//! Sequence classification from a TSV of `label<TAB>text` lines: the text's characters
//! are the tokens (ids of a [`CharVocab`]) and the label is a class (an id of a
//! [`LabelVocab`], labels numbered in sorted order). The scan keeps each line's offset
//! and length; the reader seeks to a line and reads it again.
//!
//! With labels ignored (`Labels::Ignored`, for prediction) a line is `text` alone or
//! `label<TAB>text` with any label: a line with a TAB is still `label<TAB>text` (the label
//! is skipped, not checked), a line without one is all text.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dataset::{
    Example, Inputs, LabelsPer, ReadSettings, Reader, Scanned, Source, Targets, Values,
};
use crate::error::{DataError, Place, Result};
use crate::fields::Lines;
use crate::vocab::{CharVocab, LabelVocab};

/// A scanned TSV file.
#[derive(Debug, Clone)]
pub struct TsvData {
    path: PathBuf,
    scanned: Scanned,
    /// Byte offset and number of each line.
    lines: Arc<[(u64, usize)]>,
    chars: CharVocab,
    labels: LabelVocab,
    /// With labels ignored, the layout of the placeholder labels the reader gives.
    ignored: Option<LabelsPer>,
}

impl TsvData {
    /// Scans `path`. With `vocabularies` (those of the training file, for a separate
    /// validation file) labels outside them are refused and unknown characters get id 0;
    /// without, they are made from this file. With labels ignored, no label is checked
    /// or collected (the label vocabulary is the given one, or empty).
    pub fn open(
        path: &Path,
        settings: &ReadSettings,
        vocabularies: Option<(&CharVocab, &LabelVocab)>,
    ) -> Result<TsvData> {
        let file = File::open(path).map_err(DataError::io(path))?;
        let mut lines = Lines::new(BufReader::with_capacity(1 << 16, file), path, 0, 1);
        let (mut chars, mut labels) = (BTreeSet::new(), BTreeSet::new());
        let (mut lengths, mut index) = (Vec::new(), Vec::new());
        let ignored = settings.ignored_labels();
        while let Some((number, offset, line)) = lines.next_nonblank()? {
            let (label, text) = split(line, path, number, ignored.is_some())?;
            // With labels ignored there is no label to check or collect.
            if let (None, Some((_, known))) = (ignored, vocabularies) {
                if known.id(label).is_none() {
                    return Err(DataError::LabelOutOfRange {
                        place: Place::field(path, number, 1),
                        label: format!("`{label}` (not a label of the training data)"),
                        classes: Some(known.len()),
                    });
                }
            }
            if ignored.is_none() {
                labels.insert(label.to_string());
            }
            chars.extend(text.chars());
            let len = settings.admit(text.chars().count(), || Place::field(path, number, 2))?;
            lengths.push(len);
            index.push((offset, number));
        }
        if lengths.is_empty() {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
                what: "no lines",
            });
        }
        let (chars, labels) = match vocabularies {
            Some((c, l)) => (c.clone(), l.clone()),
            None => (CharVocab::new(chars), LabelVocab::new(labels)),
        };
        let scanned = Scanned::new(
            Inputs::Tokens { vocab: chars.len() },
            Targets::Classes {
                classes: labels.len(),
            },
            ignored.unwrap_or(LabelsPer::Sequence),
            lengths,
        );
        Ok(TsvData {
            path: path.to_path_buf(),
            scanned,
            lines: index.into(),
            chars,
            labels,
            ignored,
        })
    }

    pub fn chars(&self) -> &CharVocab {
        &self.chars
    }

    pub fn labels(&self) -> &LabelVocab {
        &self.labels
    }
}

/// `label<TAB>text`, the text not empty; with `unlabelled` allowed, a line without a TAB
/// is all text (and its label empty).
fn split<'l>(
    line: &'l str,
    path: &Path,
    number: usize,
    unlabelled: bool,
) -> Result<(&'l str, &'l str)> {
    let (label, text) = match line.split_once('\t') {
        Some(parts) => parts,
        None if unlabelled => ("", line),
        None => {
            return Err(DataError::format(
                Place::line(path, number),
                "no TAB between the label and the text (a line is label<TAB>text)",
            ))
        }
    };
    if text.is_empty() {
        return Err(DataError::format(
            Place::field(path, number, 2),
            "the text is empty",
        ));
    }
    Ok((label.trim(), text))
}

impl Source for TsvData {
    fn scanned(&self) -> &Scanned {
        &self.scanned
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        let file = File::open(&self.path).map_err(DataError::io(&self.path))?;
        Ok(Box::new(TsvReader {
            data: self.clone(),
            file,
        }))
    }
}

#[derive(Debug)]
struct TsvReader {
    data: TsvData,
    file: File,
}

impl Reader for TsvReader {
    fn read(&mut self, index: usize) -> Result<Example> {
        let d = &self.data;
        let (offset, number) = d.lines[index];
        let len = d.scanned.lengths[index];
        self.file
            .seek(SeekFrom::Start(offset))
            .map_err(DataError::io(&d.path))?;
        let mut lines = Lines::new(BufReader::new(&mut self.file), &d.path, offset, number);
        let (_, _, line) = lines.next_line()?.unwrap_or_default();
        let (label, text) = split(line, &d.path, number, d.ignored.is_some())?;
        let tokens: Vec<u32> = text.chars().take(len).map(|c| d.chars.id(c)).collect();
        if let Some(per) = d.ignored {
            return Ok(Example {
                len,
                inputs: Values::Ids(tokens),
                // A TSV's labels are classes, never regression targets.
                labels: ReadSettings::default().placeholder_labels(per, len),
            });
        }
        let class = d.labels.id(label).ok_or_else(|| {
            DataError::format(
                Place::line(&d.path, number),
                "the file changed since it was scanned",
            )
        })?;
        Ok(Example {
            len,
            inputs: Values::Ids(tokens),
            labels: Values::Ids(vec![class]),
        })
    }
}
