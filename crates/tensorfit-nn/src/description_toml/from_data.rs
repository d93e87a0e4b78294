//! Figures a description file leaves to the data (`features = "data"`, `vocab = "data"`,
//! `classes = "data"`, `outputs = "data"`): the values per step, the token vocabulary,
//! the classes or the regression's outputs that the command reading the data fills in,
//! so that a description fits a file without editing it to match (a corpus of 77
//! characters needs no `vocab = 77` typed after an error).

use std::fmt;

use super::DescriptionError;

/// The value a figure left to the data holds until the data gives it: a valid size for
/// every figure (classes start at 2), so the rest of the description is checked as usual.
pub(super) const PLACEHOLDER: usize = 2;

/// A figure of a model that data can give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// `input.features`: values per step.
    Features,
    /// `input.vocab`: token ids (a text's distinct characters).
    Vocab,
    /// `loss.classes`: classes of a cross-entropy head.
    Classes,
    /// `loss.outputs`: targets of a regression.
    Outputs,
}

impl fmt::Display for Figure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Figure::Features => "values per step",
            Figure::Vocab => "token vocabulary",
            Figure::Classes => "classes",
            Figure::Outputs => "regression targets",
        })
    }
}

/// What data holds, for the figures a description leaves to it (`None`: this data does
/// not say: dense data has no vocabulary, class labels no regression outputs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataFigures {
    pub features: Option<usize>,
    pub vocab: Option<usize>,
    pub classes: Option<usize>,
    pub outputs: Option<usize>,
}

impl DataFigures {
    fn get(&self, figure: Figure) -> Option<usize> {
        match figure {
            Figure::Features => self.features,
            Figure::Vocab => self.vocab,
            Figure::Classes => self.classes,
            Figure::Outputs => self.outputs,
        }
    }
}

/// A figure the file leaves to the data, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromData {
    pub figure: Figure,
    /// Its key path (`input.vocab`), line and column, for errors.
    pub key: String,
    pub line: usize,
    pub column: usize,
    /// The file, as the caller named it.
    pub path: String,
}

impl FromData {
    /// The error at this key, saying `why`.
    pub(super) fn error(&self, why: String) -> DescriptionError {
        DescriptionError {
            path: self.path.clone(),
            line: self.line,
            column: self.column,
            key: self.key.clone(),
            message: format!("`{} = \"data\"` {why}", self.key),
        }
    }

    /// Refused where nothing reads data to take the figure from.
    pub fn no_data(&self) -> DescriptionError {
        self.error(format!(
            "takes the model's {} from the data, and nothing here reads data (`tensorfit train --data` does): give a number",
            self.figure
        ))
    }

    /// The figure `figures` give, or the error saying the data has none.
    pub(super) fn value(&self, figures: &DataFigures) -> Result<usize, DescriptionError> {
        figures.get(self.figure).ok_or_else(|| {
            self.error(format!(
                "takes the model's {} from the data, and the data has none (it holds {}): give a number",
                self.figure,
                held(figures)
            ))
        })
    }
}

/// What `figures` say, in words.
fn held(figures: &DataFigures) -> String {
    let parts: Vec<String> = [
        (figures.features, "values per step"),
        (figures.vocab, "token ids"),
        (figures.classes, "classes"),
        (figures.outputs, "regression targets"),
    ]
    .iter()
    .filter_map(|(n, what)| n.map(|n| format!("{n} {what}")))
    .collect();
    match parts.is_empty() {
        true => "nothing it can give".into(),
        false => parts.join(", "),
    }
}
