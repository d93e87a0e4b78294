//! One long CSV for everyone else: `sequence,step,f1,…,fk,label`, one row per step, the
//! rows of a sequence together and in step order (0, 1, 2, …), a header row optional.
//! Labels are per step when every row has one; per sequence when only the last row of
//! each sequence has one (the other rows leave the field empty). A regression of K
//! outputs has K label columns, the last K (`sequence,step,f1,…,fk,y1,…,yK`), all filled
//! or all empty on a row.
//!
//! The scan parses the whole file once, row by row (so bad data fails before training
//! starts), and keeps per sequence only its byte offset, first line and length: files
//! larger than memory are read this way, and the reader seeks to a sequence's rows.

use std::collections::HashSet;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::dataset::{Example, Inputs, LabelsPer, ReadSettings, Reader, Scanned, Source};
use crate::error::{DataError, Place, Result};
use crate::fields::{fields, is_header, parse_label, parse_value, Label, LabelColumn, Lines};

/// Where one sequence's rows are.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    line: usize,
    /// Rows in the file (the sequence may be read cut shorter).
    rows: usize,
}

/// A scanned long CSV.
#[derive(Debug, Clone)]
pub struct LongCsv {
    path: PathBuf,
    scanned: Scanned,
    spans: Arc<[Span]>,
    ids: Arc<[String]>,
    features: usize,
    settings: ReadSettings,
}

/// The sequence being scanned.
struct Open {
    id: String,
    span: Span,
    unlabelled: usize,
    last_labelled: bool,
}

impl LongCsv {
    /// Scans `path`.
    pub fn open(path: &Path, settings: &ReadSettings) -> Result<Self> {
        let file = File::open(path).map_err(DataError::io(path))?;
        let mut lines = Lines::new(BufReader::with_capacity(1 << 16, file), path, 0, 1);
        let mut width: Option<usize> = None;
        let mut seen = HashSet::new();
        let mut open: Option<Open> = None;
        let mut scan = Scan::default();
        let mut largest: Option<u32> = None;
        let k = settings.label_width();
        while let Some((number, offset, line)) = lines.next_nonblank()? {
            if number == 1 && is_header(line) {
                continue;
            }
            let count = field_count(line);
            match width {
                Some(w) if w != count => {
                    return Err(DataError::Ragged {
                        place: Place::line(path, number),
                        found: count,
                        expected: w,
                    })
                }
                None if count < 3 + k => {
                    return Err(DataError::format(
                        Place::line(path, number),
                        format!("{count} fields; a row is {}", row_layout(k)),
                    ))
                }
                _ => width = Some(count),
            }
            let mut row = fields(line);
            let (id, step) = (row.next().unwrap_or(""), row.next().unwrap_or(""));
            let at = |column: usize| move || Place::field(path, number, column);
            if open.as_ref().is_none_or(|o| o.id != id) {
                if let Some(done) = open.take() {
                    scan.close(path, done, settings)?;
                }
                // Hashes, not ids, are kept; a hash seen before is checked against the ids.
                if !seen.insert(hash(id)) && scan.ids.iter().any(|known| known == id) {
                    return Err(DataError::format(
                        Place::field(path, number, 1),
                        format!("sequence `{id}` appears again after other sequences (the rows of a sequence must be together)"),
                    ));
                }
                open = Some(Open {
                    id: id.to_string(),
                    span: Span {
                        offset,
                        line: number,
                        rows: 0,
                    },
                    unlabelled: 0,
                    last_labelled: false,
                });
            }
            let Some(seq) = open.as_mut() else { continue };
            if step.parse::<usize>().ok() != Some(seq.span.rows) {
                return Err(DataError::format(
                    at(2)(),
                    format!("step `{step}` where {} was expected (the rows of a sequence in step order from 0)", seq.span.rows),
                ));
            }
            for (i, text) in row.by_ref().take(count - 2 - k).enumerate() {
                parse_value(text, at(i + 3))?;
            }
            let labels: Vec<&str> = row.collect();
            let filled = labels.iter().filter(|t| !t.is_empty()).count();
            seq.last_labelled = filled > 0;
            if filled == 0 {
                seq.unlabelled += 1;
            } else if filled < k {
                return Err(DataError::LabelKind {
                    place: Place::line(path, number),
                    message: format!(
                        "{filled} of the {k} label fields are filled; a row is {}, its labels all filled or all empty",
                        row_layout(k)
                    ),
                });
            }
            for (j, text) in labels.into_iter().enumerate().filter(|_| filled > 0) {
                let column = count - k + 1 + j;
                if let Label::Class(c) = parse_label(text, settings, at(column))? {
                    largest = largest.max(Some(c));
                }
            }
            seq.span.rows += 1;
        }
        if let Some(done) = open.take() {
            scan.close(path, done, settings)?;
        }
        let (Some(width), Some(per)) = (width, scan.per) else {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
                what: "no rows",
            });
        };
        let scanned = Scanned::new(
            Inputs::Dense {
                features: width - 2 - k,
            },
            settings.targets(largest),
            per,
            scan.lengths,
        );
        Ok(LongCsv {
            path: path.to_path_buf(),
            scanned,
            spans: scan.spans.into(),
            ids: scan.ids.into(),
            features: width - 2 - k,
            settings: settings.clone(),
        })
    }

    /// Each sequence's id (its first field), in sequence order.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }
}

/// What the scan has found so far.
#[derive(Default)]
struct Scan {
    per: Option<LabelsPer>,
    lengths: Vec<usize>,
    spans: Vec<Span>,
    ids: Vec<String>,
}

impl Scan {
    fn close(&mut self, path: &Path, seq: Open, settings: &ReadSettings) -> Result<()> {
        let place = || Place::line(path, seq.span.line);
        let rows = seq.span.rows;
        if !seq.last_labelled {
            return Err(DataError::LabelKind {
                place: Place::line(path, seq.span.line + rows - 1),
                message: format!("the last row of sequence `{}` has no label", seq.id),
            });
        }
        let per = if seq.unlabelled == 0 && rows > 1 {
            Some(LabelsPer::Step)
        } else if seq.unlabelled + 1 == rows && rows > 1 {
            Some(LabelsPer::Sequence)
        } else if rows == 1 {
            None
        } else {
            return Err(DataError::LabelKind {
                place: place(),
                message: format!(
                    "sequence `{}` has labels on {} of its {rows} rows (every row, or only the last)",
                    seq.id,
                    rows - seq.unlabelled
                ),
            });
        };
        match (self.per, per) {
            (Some(known), Some(found)) if known != found => {
                return Err(DataError::LabelKind {
                    place: place(),
                    message: format!(
                        "sequence `{}` has labels {} where earlier sequences have them {}",
                        seq.id,
                        describe(found),
                        describe(known)
                    ),
                })
            }
            (None, found) => self.per = found.or(Some(LabelsPer::Sequence)),
            _ => {}
        }
        self.lengths.push(settings.admit(rows, place)?);
        self.spans.push(seq.span);
        self.ids.push(seq.id);
        Ok(())
    }
}

fn hash(id: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// A row's fields with `k` labels (a regression's outputs), for messages.
fn row_layout(k: usize) -> String {
    match k {
        1 => "sequence,step,f1,...,fk,label (k >= 1)".into(),
        k => format!(
            "sequence,step,f1,...,fk,y1,...,y{k} (k >= 1 features, then the model's {k} outputs)"
        ),
    }
}

/// Fields of a CSV line (commas + 1).
fn field_count(line: &str) -> usize {
    line.bytes().filter(|&b| b == b',').count() + 1
}

fn describe(per: LabelsPer) -> &'static str {
    match per {
        LabelsPer::Sequence => "on the last row only",
        LabelsPer::Step => "on every row",
    }
}

impl Source for LongCsv {
    fn scanned(&self) -> &Scanned {
        &self.scanned
    }

    fn id(&self, index: usize) -> String {
        self.ids
            .get(index)
            .cloned()
            .unwrap_or_else(|| index.to_string())
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        let file = File::open(&self.path).map_err(DataError::io(&self.path))?;
        Ok(Box::new(LongCsvReader {
            source: self.clone(),
            file,
        }))
    }
}

#[derive(Debug)]
struct LongCsvReader {
    source: LongCsv,
    file: File,
}

impl Reader for LongCsvReader {
    fn read(&mut self, index: usize) -> Result<Example> {
        let s = &self.source;
        let (span, len, path) = (s.spans[index], s.scanned.lengths[index], s.path.as_path());
        self.file
            .seek(SeekFrom::Start(span.offset))
            .map_err(DataError::io(path))?;
        let mut lines = Lines::new(BufReader::new(&mut self.file), path, span.offset, span.line);
        let mut x = Vec::with_capacity(len * s.features);
        let mut labels = LabelColumn::default();
        // A cut sequence with a label per step ends at its cut; one labelled on its last
        // row is read to that row.
        let rows = match s.scanned.dataset.labels_per {
            LabelsPer::Step => len,
            LabelsPer::Sequence => span.rows,
        };
        for row in 0..rows {
            let Some((number, _, line)) = lines.next_nonblank()? else {
                return Err(DataError::format(
                    Place::line(path, span.line),
                    "the file changed since it was scanned (ends early)",
                ));
            };
            let mut row_fields = fields(line).skip(2);
            let width = s.features;
            for (i, text) in row_fields.by_ref().take(width).enumerate() {
                if row < len {
                    x.push(parse_value(text, || Place::field(path, number, i + 3))?);
                }
            }
            let keep = match s.scanned.dataset.labels_per {
                LabelsPer::Step => row < len,
                LabelsPer::Sequence => row + 1 == span.rows,
            };
            if keep {
                for (j, label) in row_fields.enumerate() {
                    let at = || Place::field(path, number, width + 3 + j);
                    labels.push(parse_label(label, &s.settings, at)?);
                }
            }
        }
        Ok(Example {
            len,
            inputs: crate::dataset::Values::F32(x),
            labels: labels.into_values(s.settings.regression),
        })
    }
}
