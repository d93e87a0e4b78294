//! DL4J's `CSVSequenceRecordReader` layout: a directory of feature files, one sequence per
//! file and one step per line (`f1,…,fk`), and a directory of label files with one label,
//! or one label per step (a regression of K outputs: K values `y1,…,yK` on each line). Files are paired by the number in their names, as DL4J's
//! `NumberedFileInputSplit("…/%d.csv", 0, N-1)` pairs them: `features/7.csv` with
//! `labels/7.csv`. A first line with no number in it is a header and is skipped.
//!
//! The scan parses every file once (so bad data fails before training starts) and keeps
//! only each sequence's length; the reader parses a file again when its sequence is read.
//!
//! With labels ignored (`Labels::Ignored`, for prediction) the label directory need not
//! exist and is not read: each sequence carries placeholder labels.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dataset::{Example, Inputs, LabelsPer, ReadSettings, Reader, Scanned, Source, Values};
use crate::error::{DataError, Place, Result};
use crate::fields::{fields, is_header, parse_label, parse_value, LabelColumn, Lines};

/// A scanned pair of feature and label directories.
#[derive(Debug, Clone)]
pub struct CsvSequenceDir {
    scanned: Scanned,
    /// (feature file, label file) of each sequence, ordered by number; no label file
    /// with labels ignored.
    files: Arc<[(PathBuf, Option<PathBuf>)]>,
    numbers: Arc<[u64]>,
    features: usize,
    settings: ReadSettings,
}

impl CsvSequenceDir {
    /// Scans `features` and `labels` (directories of numbered files; `labels` is not
    /// read with labels ignored).
    pub fn open(features: &Path, labels: &Path, settings: &ReadSettings) -> Result<Self> {
        let feature_files = numbered_files(features)?;
        if let Some(per) = settings.ignored_labels() {
            return Self::unlabelled(features, feature_files, per, settings);
        }
        let label_files = numbered_files(labels)?;
        for (number, path) in &feature_files {
            if !label_files.contains_key(number) {
                return Err(DataError::MissingLabels {
                    features: path.clone(),
                    labels: labels.join(file_name(path)),
                });
            }
        }
        for (number, path) in &label_files {
            if !feature_files.contains_key(number) {
                return Err(DataError::MissingFeatures {
                    labels: path.clone(),
                    features: features.join(file_name(path)),
                });
            }
        }
        let mut first: Option<(usize, PathBuf)> = None;
        let mut labels_per: Option<(LabelsPer, PathBuf)> = None;
        let mut largest = None;
        let mut lengths = Vec::with_capacity(feature_files.len());
        let mut files = Vec::with_capacity(feature_files.len());
        for (number, feature_path) in &feature_files {
            let label_path = &label_files[number];
            let expected = first.as_ref().map(|(f, p)| (*f, p.as_path()));
            let (steps, width) = parse_steps(feature_path, expected, 0, &mut Vec::new())?;
            first.get_or_insert_with(|| (width, feature_path.clone()));
            let mut column = LabelColumn::default();
            let count = parse_labels(label_path, settings, usize::MAX, &mut column)?;
            let per = match count {
                1 => LabelsPer::Sequence,
                n if n == steps => LabelsPer::Step,
                n => {
                    return Err(DataError::LabelKind {
                        place: Place::file(label_path),
                        message: format!(
                            "{n} labels for a sequence of {steps} steps in {} (one label, or one per step)",
                            feature_path.display()
                        ),
                    })
                }
            };
            match &labels_per {
                Some((known, known_path)) if *known != per => {
                    return Err(DataError::LabelKind {
                        place: Place::file(label_path),
                        message: format!(
                            "{count} labels (one per {}) where {} has one per {}",
                            per_word(per),
                            known_path.display(),
                            per_word(*known)
                        ),
                    })
                }
                Some(_) => {}
                None => labels_per = Some((per, label_path.clone())),
            }
            largest = largest.max(column.largest());
            lengths.push(settings.admit(steps, || Place::file(feature_path))?);
            files.push((feature_path.clone(), Some(label_path.clone())));
        }
        let (features_per_step, labels_per) = match (first, labels_per) {
            (Some((f, _)), Some((l, _))) => (f, l),
            _ => {
                return Err(DataError::Empty {
                    path: features.to_path_buf(),
                    what: "no feature files",
                })
            }
        };
        let scanned = Scanned::new(
            Inputs::Dense {
                features: features_per_step,
            },
            settings.targets(largest),
            labels_per,
            lengths,
        );
        Ok(CsvSequenceDir {
            scanned,
            files: files.into(),
            numbers: feature_files.keys().copied().collect(),
            features: features_per_step,
            settings: settings.clone(),
        })
    }

    /// The feature files alone, each sequence's labels placeholders laid out `per`.
    fn unlabelled(
        features: &Path,
        feature_files: BTreeMap<u64, PathBuf>,
        per: LabelsPer,
        settings: &ReadSettings,
    ) -> Result<Self> {
        let mut first: Option<(usize, PathBuf)> = None;
        let mut lengths = Vec::with_capacity(feature_files.len());
        for feature_path in feature_files.values() {
            let expected = first.as_ref().map(|(f, p)| (*f, p.as_path()));
            let (steps, width) = parse_steps(feature_path, expected, 0, &mut Vec::new())?;
            first.get_or_insert_with(|| (width, feature_path.clone()));
            lengths.push(settings.admit(steps, || Place::file(feature_path))?);
        }
        let Some((width, _)) = first else {
            return Err(DataError::Empty {
                path: features.to_path_buf(),
                what: "no feature files",
            });
        };
        Ok(CsvSequenceDir {
            scanned: Scanned::new(
                Inputs::Dense { features: width },
                settings.targets(None),
                per,
                lengths,
            ),
            files: feature_files.values().map(|p| (p.clone(), None)).collect(),
            numbers: feature_files.keys().copied().collect(),
            features: width,
            settings: settings.clone(),
        })
    }

    /// The number in each sequence's file name (its id), in sequence order.
    pub fn numbers(&self) -> &[u64] {
        &self.numbers
    }
}

impl Source for CsvSequenceDir {
    fn scanned(&self) -> &Scanned {
        &self.scanned
    }

    fn id(&self, index: usize) -> String {
        self.numbers
            .get(index)
            .map_or_else(|| index.to_string(), u64::to_string)
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        Ok(Box::new(self.clone()))
    }
}

impl Reader for CsvSequenceDir {
    fn read(&mut self, index: usize) -> Result<Example> {
        let len = self.scanned.lengths[index];
        let (feature_path, label_path) = &self.files[index];
        let features = self.features;
        let mut x = Vec::with_capacity(len * features);
        parse_steps(feature_path, Some((features, feature_path)), len, &mut x)?;
        let per = self.scanned.dataset.labels_per;
        let Some(label_path) = label_path else {
            return Ok(Example {
                len,
                inputs: Values::F32(x),
                labels: self.settings.placeholder_labels(per, len),
            });
        };
        let keep = match per {
            LabelsPer::Sequence => 1,
            LabelsPer::Step => len,
        };
        let mut column = LabelColumn::default();
        parse_labels(label_path, &self.settings, keep, &mut column)?;
        Ok(Example {
            len,
            inputs: Values::F32(x),
            labels: column.into_values(self.settings.regression),
        })
    }
}

fn per_word(per: LabelsPer) -> &'static str {
    match per {
        LabelsPer::Sequence => "sequence",
        LabelsPer::Step => "step",
    }
}

fn file_name(path: &Path) -> &std::ffi::OsStr {
    path.file_name().unwrap_or(path.as_os_str())
}

/// The files of `dir` by the number in their names (the last run of digits).
fn numbered_files(dir: &Path) -> Result<BTreeMap<u64, PathBuf>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(DataError::io(dir))? {
        let path = entry.map_err(DataError::io(dir))?.path();
        if path.is_dir() {
            continue;
        }
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let digits: String = stem
            .chars()
            .rev()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let number = digits.parse::<u64>().map_err(|_| {
            DataError::format(
                Place::file(&path),
                "file name has no number to pair it by (DL4J's layout names files 0.csv, 1.csv, ...)",
            )
        })?;
        if let Some(other) = files.insert(number, path.clone()) {
            return Err(DataError::format(
                Place::file(&path),
                format!("has the same number ({number}) as {}", other.display()),
            ));
        }
    }
    if files.is_empty() {
        return Err(DataError::Empty {
            path: dir.to_path_buf(),
            what: "no files in the directory",
        });
    }
    Ok(files)
}

/// Parses every step of the feature file `path` (each line `f1,…,fk`), checking that it
/// has `expected` features (and the file that set it), and appends the first `keep`
/// steps' values to `out`. Returns the number of steps and of features per step.
fn parse_steps(
    path: &Path,
    expected: Option<(usize, &Path)>,
    keep: usize,
    out: &mut Vec<f32>,
) -> Result<(usize, usize)> {
    let file = File::open(path).map_err(DataError::io(path))?;
    let mut lines = Lines::new(BufReader::new(file), path, 0, 1);
    let mut width: Option<usize> = None;
    let mut steps = 0;
    while let Some((number, _, line)) = lines.next_nonblank()? {
        if number == 1 && is_header(line) {
            continue;
        }
        let mut count = 0;
        for (i, text) in fields(line).enumerate() {
            let v = parse_value(text, || Place::field(path, number, i + 1))?;
            if steps < keep {
                out.push(v);
            }
            count += 1;
        }
        match (width, expected) {
            (Some(w), _) if w != count => {
                return Err(DataError::Ragged {
                    place: Place::line(path, number),
                    found: count,
                    expected: w,
                })
            }
            (None, Some((e, first))) if e != count => {
                return Err(DataError::FeatureCount {
                    place: Place::line(path, number),
                    found: count,
                    expected: e,
                    first: first.to_path_buf(),
                })
            }
            _ => width = Some(count),
        }
        steps += 1;
    }
    match width {
        Some(w) => Ok((steps, w)),
        None => Err(DataError::Empty {
            path: path.to_path_buf(),
            what: "no steps",
        }),
    }
}

/// Parses every line of the label file `path` (one label each: a class id, or a
/// regression's K outputs `y1,…,yK`) and appends the first `keep` to `out`. Returns the
/// number of labels.
fn parse_labels(
    path: &Path,
    settings: &ReadSettings,
    keep: usize,
    out: &mut LabelColumn,
) -> Result<usize> {
    let file = File::open(path).map_err(DataError::io(path))?;
    let mut lines = Lines::new(BufReader::new(file), path, 0, 1);
    let mut count = 0;
    while let Some((number, _, line)) = lines.next_nonblank()? {
        if number == 1 && is_header(line) {
            continue;
        }
        let (found, expected) = (fields(line).count(), settings.label_width());
        if found != expected {
            let label = match settings.regression {
                true => {
                    format!("{expected} f32 targets `y1,...,y{expected}` (the model's outputs)")
                }
                false => "one class id".into(),
            };
            return Err(DataError::LabelKind {
                place: Place::line(path, number),
                message: format!("{found} values on a line; a line of a label file holds {label}"),
            });
        }
        for (i, text) in fields(line).enumerate() {
            let label = parse_label(text, settings, || Place::field(path, number, i + 1))?;
            if count < keep {
                out.push(label);
            }
        }
        count += 1;
    }
    if count == 0 {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            what: "no labels",
        });
    }
    Ok(count)
}
