//! [`DescriptionFile`]: a description file as `tensorfit` reads it — the model, refused
//! at the line of the field [`ModelDescription::validate`] names, and the `[training]`
//! table's entries with where each is, for the command line to check against its flags.

use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::from_data::{DataFigures, Figure, FromData};
use super::table::{Source, Table};
use super::{parse, parse_model, read_text, DescriptionError};
use crate::description::{InputSpec, LossSpec, ModelDescription};

/// A description file: a valid model and its training settings.
#[derive(Debug, Clone, PartialEq)]
pub struct DescriptionFile {
    pub model: ModelDescription,
    /// The `[training]` entries in the order written (empty without the table).
    pub training: Vec<TrainingEntry>,
    /// The figures the file leaves to the data (`vocab = "data"`), which `model` holds as
    /// placeholders until [`DescriptionFile::resolve`]: empty unless read with
    /// [`DescriptionFile::load_leaving_to_data`].
    pub from_data: Vec<FromData>,
    /// The file lists its layers as one `[[layers]]` list (not `[recurrent]` and
    /// `[head]`), the form [`DescriptionFile::model_toml`] writes the model back in.
    pub as_list: bool,
}

/// One `[training]` key, its value and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingEntry {
    pub key: String,
    pub value: TrainingValue,
    /// 1-based line and column of the key.
    pub line: usize,
    pub column: usize,
}

/// A `[training]` value: a switch, or a number or word as it would be typed after its
/// flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrainingValue {
    Bool(bool),
    Text(String),
}

impl std::fmt::Display for TrainingValue {
    /// As TOML: words quoted, numbers and switches bare.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            TrainingValue::Bool(b) => write!(f, "{b}"),
            TrainingValue::Text(t) if t.parse::<f64>().is_ok() => write!(f, "{t}"),
            TrainingValue::Text(t) => write!(f, "{t:?}"),
        }
    }
}

impl DescriptionFile {
    /// Reads and validates the file at `path`. A description this build refuses
    /// ([`ModelDescription::validate`]) is an error at the line of the field it names.
    pub fn load(path: &Path) -> Result<DescriptionFile, DescriptionError> {
        let file = DescriptionFile::load_leaving_to_data(path)?;
        match file.from_data.first() {
            Some(p) => Err(p.no_data()),
            None => Ok(file),
        }
    }

    /// [`DescriptionFile::load`] for a reader of data: the figures the file leaves to the
    /// data (`features`, `vocab`, `classes` or `outputs` = `"data"`) are listed in
    /// [`DescriptionFile::from_data`] for [`DescriptionFile::resolve`] to fill in.
    pub fn load_leaving_to_data(path: &Path) -> Result<DescriptionFile, DescriptionError> {
        let text = read_text(path)?;
        let (model, from_data) = parse_model(&text, path)?;
        let file = Source { text: &text, path };
        let doc = parse(file)?;
        if let Err(e) = model.validate() {
            let field = e.field().unwrap_or_default();
            let at = field_position(doc.get_ref(), field).unwrap_or(0);
            return Err(file.error(at, field, e.to_string()));
        }
        let training = match doc.get_ref().get("training") {
            None => Vec::new(),
            Some(v) => {
                let root = Table {
                    file,
                    table: doc.get_ref(),
                    span: doc.span(),
                    path: String::new(),
                };
                let table = match v.get_ref() {
                    DeValue::Table(t) => t,
                    other => return Err(root.wrong_type("training", v, "a table", other)),
                };
                entries(file, table)?
            }
        };
        Ok(DescriptionFile {
            model,
            training,
            from_data,
            as_list: doc.get_ref().get("layers").is_some(),
        })
    }

    /// The model as a file in the form this one was written in: one `[[layers]]` list
    /// ([`ModelDescription::to_toml_as_list`]) or tables ([`ModelDescription::to_toml`]).
    pub fn model_toml(&self) -> String {
        match self.as_list {
            true => self.model.to_toml_as_list(),
            false => self.model.to_toml(),
        }
    }

    /// Fills in the figures the file leaves to the data from `figures` (what the data
    /// holds), then checks the model again. A figure the data does not give is an error
    /// at its key.
    pub fn resolve(&mut self, figures: &DataFigures) -> Result<(), DescriptionError> {
        for p in &self.from_data {
            let n = p.value(figures)?;
            let m = &mut self.model;
            match (p.figure, &mut m.input, &mut m.loss) {
                (Figure::Features, InputSpec::Dense { features }, _) => *features = n,
                (Figure::Vocab, InputSpec::Tokens { vocab, .. }, _) => *vocab = n,
                (Figure::Classes, _, LossSpec::SoftmaxCrossEntropy { classes }) => *classes = n,
                (Figure::Outputs, _, LossSpec::MeanSquaredError { outputs }) => *outputs = n,
                // The parser lists a figure only under the kind that has it.
                _ => return Err(p.error("is not a figure of this kind".into())),
            }
        }
        if let Err(e) = self.model.validate() {
            let at = self
                .from_data
                .iter()
                .find(|p| Some(p.key.as_str()) == e.field());
            if let Some(p) = at.or(self.from_data.first()) {
                return Err(p.error(format!("takes the data's figure, and {e}")));
            }
        }
        self.from_data.clear();
        Ok(())
    }
}

/// The entries of the `[training]` table, in the order written.
fn entries(file: Source, table: &DeTable) -> Result<Vec<TrainingEntry>, DescriptionError> {
    let mut entries = table
        .iter()
        .map(|(k, v)| {
            let key = k.get_ref().to_string();
            let value = match v.get_ref() {
                DeValue::Boolean(b) => TrainingValue::Bool(*b),
                DeValue::String(s) => TrainingValue::Text(s.to_string()),
                DeValue::Integer(i) => TrainingValue::Text(
                    i64::from_str_radix(i.as_str(), i.radix())
                        .map_or_else(|_| i.as_str().to_string(), |n| n.to_string()),
                ),
                DeValue::Float(x) => TrainingValue::Text(x.as_str().replace('_', "")),
                other => {
                    let message = format!(
                        "`training.{key}` must be a number, a string or true/false, not {}",
                        other.type_str()
                    );
                    return Err(file.error(v.span().start, &format!("training.{key}"), message));
                }
            };
            let (line, column) = file.line_column(k.span().start);
            Ok(TrainingEntry {
                key,
                value,
                line,
                column,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|e| (e.line, e.column));
    Ok(entries)
}

/// The byte offset of `field` (`head.layers[2].units`, as [`InvalidDescription::field`]
/// spells it) in the document, or of the deepest part of it that is there.
///
/// [`InvalidDescription::field`]: crate::InvalidDescription::field
fn field_position(root: &DeTable, field: &str) -> Option<usize> {
    let mut table = root;
    let mut at = None;
    for part in field.split('.') {
        let (name, index) = match part.split_once('[') {
            Some((name, rest)) => (name, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let Some((k, mut v)) = table.get_key_value(name) else {
            return at;
        };
        at = Some(k.span().start);
        if let Some(i) = index {
            let DeValue::Array(items) = v.get_ref() else {
                return at;
            };
            let Some(item) = items.get(i) else {
                return at;
            };
            at = Some(item.span().start);
            v = item;
        }
        match v.get_ref() {
            DeValue::Table(t) => table = t,
            _ => return at,
        }
    }
    at
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parsed(text: &str) -> toml::Spanned<DeTable<'_>> {
        DeTable::parse(text).unwrap()
    }

    #[test]
    fn a_field_is_found_at_its_key_inside_arrays_of_tables() {
        let text = "[head]\non = \"last\"\nlayers = [\n  { kind = \"batchnorm\" },\n  { kind = \"dense\", units = 0 },\n]\n";
        let doc = parsed(text);
        let at = field_position(doc.get_ref(), "head.layers[1].units").unwrap();
        assert!(text[at..].starts_with("units = 0"), "{}", &text[at..]);
        let at = field_position(doc.get_ref(), "head.on").unwrap();
        assert!(text[at..].starts_with("on ="));
    }

    #[test]
    fn a_field_not_written_is_found_at_its_deepest_written_part() {
        let text = "[recurrent]\ncell = \"lstm\"\n";
        let doc = parsed(text);
        let at = field_position(doc.get_ref(), "recurrent.hidden").unwrap();
        assert!(text[at..].starts_with("recurrent]"), "{}", &text[at..]);
        assert_eq!(field_position(doc.get_ref(), "loss.kind"), None);
    }
}
