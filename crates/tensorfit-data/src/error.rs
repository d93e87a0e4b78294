//! The errors of reading users' data: each names the place (file, and where known the
//! line and column, or the byte offset) so that a user can open the file and fix it.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a file something was found. Lines and columns count from 1 (as editors do);
/// a byte offset counts from 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub byte: Option<u64>,
}

impl Place {
    /// The file as a whole.
    pub fn file(file: &Path) -> Place {
        Place {
            file: file.to_path_buf(),
            line: None,
            column: None,
            byte: None,
        }
    }

    /// A line of a text file.
    pub fn line(file: &Path, line: usize) -> Place {
        Place {
            line: Some(line),
            ..Place::file(file)
        }
    }

    /// A field of a line (column = the field's 1-based number).
    pub fn field(file: &Path, line: usize, column: usize) -> Place {
        Place {
            column: Some(column),
            ..Place::line(file, line)
        }
    }

    /// A byte offset in a file.
    pub fn byte(file: &Path, byte: u64) -> Place {
        Place {
            byte: Some(byte),
            ..Place::file(file)
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        if let Some(byte) = self.byte {
            write!(f, " (byte {byte})")?;
        }
        Ok(())
    }
}

/// A file or directory that cannot be read as data, and why.
#[derive(Debug)]
pub enum DataError {
    Ragged {
        place: Place,
        found: usize,
        expected: usize,
    },

    NotANumber {
        place: Place,
        text: String,
    },

    NotFinite {
        place: Place,
        value: String,
    },

    LabelOutOfRange {
        place: Place,
        label: String,
        /// The number of classes, where the user gave it.
        classes: Option<usize>,
    },

    LabelKind {
        place: Place,
        message: String,
    },

    Empty {
        path: PathBuf,
        what: &'static str,
    },

    MissingLabels {
        features: PathBuf,
        labels: PathBuf,
    },

    MissingFeatures {
        labels: PathBuf,
        features: PathBuf,
    },

    FeatureCount {
        place: Place,
        found: usize,
        expected: usize,
        first: PathBuf,
    },

    InvalidUtf8 {
        place: Place,
    },

    TooLong {
        place: Place,
        len: usize,
        max: usize,
    },

    /// A file whose structure is wrong for its format (header, dtype, shape, order).
    Format {
        place: Place,
        message: String,
    },

    /// A file that could not be read. The message includes the system's reason, so the
    /// reason is not also a `source` (a chain printer would say it twice).
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    /// Settings that cannot be used with this data (batch of 0, fraction over 1, ...).
    Settings(String),

    /// An error with a note on what may have caused it.
    Noted {
        error: Box<DataError>,
        note: &'static str,
    },

    /// An error in a CSV file whose first line was skipped as a header (none of its
    /// fields is a number), which may be why: the line is shown.
    AfterHeader {
        error: Box<DataError>,
        header: String,
    },

    /// The background reader stopped without a word (it panicked).
    ReaderStopped,
}

impl DataError {
    pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
        move |error| DataError::Io {
            path: path.to_path_buf(),
            error,
        }
    }

    /// Whether the file could not be read at all (missing, unreadable, empty), as
    /// opposed to read and refused for what it holds.
    pub fn is_unreadable(&self) -> bool {
        match self {
            DataError::Io { .. } | DataError::Empty { .. } => true,
            DataError::Noted { error, .. } | DataError::AfterHeader { error, .. } => {
                error.is_unreadable()
            }
            _ => false,
        }
    }

    /// The line of the file the error is at, where it names one.
    pub fn line(&self) -> Option<usize> {
        match self {
            DataError::Ragged { place, .. }
            | DataError::NotANumber { place, .. }
            | DataError::NotFinite { place, .. }
            | DataError::LabelOutOfRange { place, .. }
            | DataError::LabelKind { place, .. }
            | DataError::FeatureCount { place, .. }
            | DataError::InvalidUtf8 { place }
            | DataError::TooLong { place, .. }
            | DataError::Format { place, .. } => place.line,
            DataError::Noted { error, .. } | DataError::AfterHeader { error, .. } => error.line(),
            _ => None,
        }
    }

    pub(crate) fn format(place: Place, message: impl Into<String>) -> DataError {
        DataError::Format {
            place,
            message: message.into(),
        }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DataError as E;
        match self {
            E::Ragged {
                place,
                found,
                expected,
            } => write!(
                f,
                "{place}: {found} fields where the file's first row has {expected}"
            ),
            E::NotANumber { place, text } => write!(f, "{place}: `{text}` is not a number"),
            E::NotFinite { place, value } => write!(
                f,
                "{place}: {value} is not a finite number (NaN and infinities cannot be trained on)"
            ),
            E::LabelOutOfRange {
                place,
                label,
                classes,
            } => write!(
                f,
                "{place}: label {label} is out of range ({})",
                class_range(*classes)
            ),
            E::LabelKind { place, message } | E::Format { place, message } => {
                write!(f, "{place}: {message}")
            }
            E::Empty { path, what } => write!(f, "{}: is empty ({what})", path.display()),
            E::MissingLabels { features, labels } => write!(
                f,
                "{}: has no matching label file {}",
                features.display(),
                labels.display()
            ),
            E::MissingFeatures { labels, features } => write!(
                f,
                "{}: has no matching feature file {}",
                labels.display(),
                features.display()
            ),
            E::FeatureCount {
                place,
                found,
                expected,
                first,
            } => write!(
                f,
                "{place}: {found} features per step where {} has {expected}",
                first.display()
            ),
            E::InvalidUtf8 { place } => write!(f, "{place}: invalid UTF-8"),
            E::TooLong { place, len, max } => write!(
                f,
                "{place}: sequence of {len} steps is longer than the maximum of {max} (cut long sequences instead, or raise the maximum)"
            ),
            E::Io { path, error } => write!(f, "{}: {error}", path.display()),
            E::Settings(message) => write!(f, "{message}"),
            E::Noted { error, note } => write!(f, "{error} ({note})"),
            E::AfterHeader { error, header } => write!(
                f,
                "{error} (line 1 was skipped as a header, none of its fields being a number: `{header}`)"
            ),
            E::ReaderStopped => write!(f, "the background data reader stopped unexpectedly"),
        }
    }
}

impl std::error::Error for DataError {}

fn class_range(classes: Option<usize>) -> String {
    match classes {
        Some(n) => format!("{n} classes: ids 0 to {}", n.saturating_sub(1)),
        None => "a class id is a whole number from 0".to_string(),
    }
}

/// Result alias of this crate.
pub type Result<T, E = DataError> = std::result::Result<T, E>;

impl From<DataError> for tensorfit_core::Error {
    fn from(e: DataError) -> Self {
        tensorfit_core::Error::Input(e.to_string())
    }
}
