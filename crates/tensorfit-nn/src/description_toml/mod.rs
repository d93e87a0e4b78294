//! Model description files: [`ModelDescription::from_toml`] reads the TOML format that
//! [`crate::description`] documents, [`ModelDescription::to_toml`] writes it back.
//!
//! The layers may also be one ordered `[[layers]]` list in place of `[recurrent]` and
//! `[head]` (see `layer_list`).
//!
//! Reading checks the file's shape and values, not whether the model makes sense as a
//! whole (that is `ModelDescription::validate`'s): every key is known, every value has
//! its type, sizes are whole numbers of at least 1, `kind`/`cell`/`on`/`activation` name
//! one of their accepted values, keys fit their kind (`embedding` only with token input,
//! `classes` only with cross-entropy, ...), and head layer names are distinct. Each
//! failure is a [`DescriptionError`] naming the file, the line and column, and the key
//! path (`head.layers[2].units`); no input makes it panic (`tests/fuzz.rs`).
//!
//! A `[training]` table is not part of the model (a checkpoint carries the model alone):
//! [`DescriptionFile`] reads it as `tensorfit train` settings, whose keys and values the
//! command line checks.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use tensorfit_core::Activation;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

mod file;
mod from_data;
mod layer_list;
mod table;
mod write;

pub use file::{DescriptionFile, TrainingEntry, TrainingValue};
pub use from_data::{DataFigures, Figure, FromData};

use table::{line_column, Source, Table};

use crate::description::{
    BodyLayer, Cell, HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec,
    ModelDescription, RecurrentSpec,
};

/// Largest description file read: a description is a few dozen lines.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The spelling of each cell in a file.
const CELLS: [(&str, Cell); 2] = [("lstm", Cell::Lstm), ("gru", Cell::Gru)];
/// The spelling of each `head.on`.
/// The kinds of head layer, as a file spells them.
#[derive(Debug, Clone, Copy)]
enum HeadKind {
    BatchNorm,
    LayerNorm,
    Dense,
    Dropout,
}
const HEAD_KINDS: [(&str, HeadKind); 4] = [
    ("batchnorm", HeadKind::BatchNorm),
    ("layernorm", HeadKind::LayerNorm),
    ("dense", HeadKind::Dense),
    ("dropout", HeadKind::Dropout),
];
/// Names the network gives its other layers (see [`crate::description`]); a head layer
/// named so would share their tensors' names.
const RESERVED_NAMES: [&str; 4] = ["lstm", "gru", "embedding", "out"];

/// A description file that cannot be read, with where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptionError {
    /// The file as the caller named it.
    pub path: String,
    /// 1-based line and column (in characters) of the offending key or value.
    pub line: usize,
    pub column: usize,
    /// The key path (`head.layers[2].units`); empty for TOML syntax errors.
    pub key: String,
    /// What is wrong, starting with the key when there is one.
    pub message: String,
}

impl std::fmt::Display for DescriptionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let DescriptionError {
            path,
            line,
            column,
            message,
            ..
        } = self;
        write!(f, "{path}:{line}:{column}: {message}")
    }
}

impl std::error::Error for DescriptionError {}

// Not `From`: a second `From<_> for tensorfit_core::Error` leaves `?` in closures
// whose error type was inferred from the only one (crates/tensorfit-engine/src/calibrate.rs) ambiguous.
impl DescriptionError {
    /// As the libraries' error: [`tensorfit_core::Error::File`], still naming the line,
    /// column and key.
    pub fn into_error(self) -> tensorfit_core::Error {
        tensorfit_core::Error::File {
            path: self.path,
            message: format!(
                "line {}, column {}: {}",
                self.line, self.column, self.message
            ),
        }
    }
}

impl ModelDescription {
    /// Reads a description file (at most 1 MiB of UTF-8 TOML).
    pub fn load(path: &Path) -> Result<ModelDescription, DescriptionError> {
        ModelDescription::from_toml(&read_text(path)?, path)
    }

    /// Parses `text`, the contents of the description file `path` (used in errors). A
    /// figure left to the data (`vocab = "data"`) is refused here: only a reader of data
    /// fills it in ([`DescriptionFile::load_leaving_to_data`]).
    pub fn from_toml(text: &str, path: &Path) -> Result<ModelDescription, DescriptionError> {
        let (model, pending) = parse_model(text, path)?;
        match pending.first() {
            Some(p) => Err(p.no_data()),
            None => Ok(model),
        }
    }
}

/// The model `text` describes, with [`from_data::PLACEHOLDER`] in the figures it leaves
/// to the data, and those figures.
fn parse_model(
    text: &str,
    path: &Path,
) -> Result<(ModelDescription, Vec<FromData>), DescriptionError> {
    let file = Source { text, path };
    let doc = parse(file)?;
    let root = Table {
        file,
        table: doc.get_ref(),
        span: doc.span(),
        path: String::new(),
    };
    root.known_keys(&["input", "layers", "recurrent", "head", "loss", "training"])?;
    let mut pending = Vec::new();
    let mut input = input(&root.table_at("input")?, &mut pending)?;
    let (body, head) = match root.table.get("layers") {
        None => (
            vec![BodyLayer::Recurrent(recurrent(
                &root.table_at("recurrent")?,
            )?)],
            head(&root.table_at("head")?)?,
        ),
        Some(_) => {
            one_form_of_layers(&root)?;
            layer_list::read(&root, &mut input)?
        }
    };
    let model = ModelDescription {
        input,
        body,
        head,
        loss: loss(&root.table_at("loss")?, &mut pending)?,
    };
    Ok((model, pending))
}

/// Refuses `[recurrent]` or `[head]` beside `[[layers]]`: one list says it all.
fn one_form_of_layers(root: &Table) -> Result<(), DescriptionError> {
    let table_form = root
        .table
        .keys()
        .find(|k| ["recurrent", "head"].contains(&k.get_ref().as_ref()));
    match table_form {
        Some(k) => {
            let key = k.get_ref();
            let message = format!(
                "`{key}` beside `layers`: give the layers either as one `[[layers]]` list or as `[recurrent]` and `[head]`, not both"
            );
            Err(root.file.error(k.span().start, key, message))
        }
        None => Ok(()),
    }
}

/// The file's TOML document.
fn parse(file: Source) -> Result<Spanned<DeTable>, DescriptionError> {
    DeTable::parse(file.text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        let message = e.message().trim_end();
        // The parser's "duplicate key" spans the key but does not say it.
        let named = e
            .span()
            .and_then(|s| file.text.get(s))
            .filter(|key| message == "duplicate key" && !key.trim().is_empty());
        let message = match named {
            Some(key) => format!(
                "{message} `{}`: each table and key is given once",
                key.trim()
            ),
            None => message.to_string(),
        };
        file.error(at, "", format!("not valid TOML: {message}"))
    })
}

/// The text of a description file (at most 1 MiB of UTF-8).
fn read_text(path: &Path) -> Result<String, DescriptionError> {
    let at_start = |message: String| DescriptionError {
        path: path.display().to_string(),
        line: 1,
        column: 1,
        key: String::new(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| at_start(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| at_start(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(at_start(format!(
            "larger than {MAX_FILE_BYTES} bytes; a model description is a few dozen lines"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = e
            .as_bytes()
            .get(..e.utf8_error().valid_up_to())
            .unwrap_or(&[]);
        let (line, column) = line_column(&String::from_utf8_lossy(valid), usize::MAX);
        DescriptionError {
            line,
            column,
            ..at_start("not UTF-8 text (TOML files are UTF-8)".into())
        }
    })?;
    Ok(text)
}

fn input(t: &Table, pending: &mut Vec<FromData>) -> Result<InputSpec, DescriptionError> {
    match t.choice("kind", &[("dense", false), ("tokens", true)])? {
        false => {
            t.known_keys(&["kind", "features"])?;
            Ok(InputSpec::Dense {
                features: t.figure("features", Figure::Features, pending)?,
            })
        }
        true => {
            t.known_keys(&["kind", "vocab", "embedding"])?;
            Ok(InputSpec::Tokens {
                vocab: t.figure("vocab", Figure::Vocab, pending)?,
                embedding: t.optional_size("embedding")?,
            })
        }
    }
}

fn recurrent(t: &Table) -> Result<RecurrentSpec, DescriptionError> {
    t.known_keys(&["cell", "hidden", "layers", "dropout", "bidirectional"])?;
    Ok(RecurrentSpec {
        cell: t.choice("cell", &CELLS)?,
        hidden: t.size("hidden")?,
        layers: t.size("layers")?,
        dropout: t.dropout("dropout")?,
        bidirectional: t.flag("bidirectional")?,
    })
}

fn head(t: &Table) -> Result<HeadSpec, DescriptionError> {
    t.known_keys(&["on", "layers"])?;
    let on = t.choice("on", &HeadOn::SPELLINGS)?;
    let layers = head_layers(&tables_in(t, "layers")?)?;
    Ok(HeadSpec { on, layers })
}

/// The tables of the array `key` of `t` (none when it is not given), each with its key
/// path (`head.layers[2]`).
fn tables_in<'a>(t: &Table<'a>, key: &str) -> Result<Vec<Table<'a>>, DescriptionError> {
    let entries = match t.table.get(key) {
        None => &[][..],
        Some(v) => match v.get_ref() {
            DeValue::Array(a) => a.as_ref(),
            other => return Err(t.wrong_type(key, v, "an array of tables", other)),
        },
    };
    let mut tables = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("{}[{i}]", t.key(key));
        let DeValue::Table(table) = entry.get_ref() else {
            return Err(t.file.error(
                entry.span().start,
                &path,
                format!(
                    "`{path}` must be a table like {{ kind = \"dense\", units = 100 }}, \
                     not {}",
                    entry.get_ref().type_str()
                ),
            ));
        };
        tables.push(Table {
            file: t.file,
            table,
            span: entry.span(),
            path,
        });
    }
    Ok(tables)
}

/// The head's layers from their tables, in order; one without a `name` is called
/// `head.{i}`, its index among them. Names are distinct.
fn head_layers<'t, 'a: 't>(
    tables: impl IntoIterator<Item = &'t Table<'a>>,
) -> Result<Vec<HeadLayer>, DescriptionError> {
    let mut layers = Vec::new();
    // Where each name was first given, for duplicates.
    let mut named: HashMap<String, (String, usize)> = HashMap::new();
    for (i, layer) in tables.into_iter().enumerate() {
        let kind = match layer.choice("kind", &HEAD_KINDS)? {
            HeadKind::BatchNorm => {
                layer.known_keys(&["kind", "name", "residual"])?;
                HeadLayerKind::BatchNorm
            }
            HeadKind::LayerNorm => {
                layer.known_keys(&["kind", "name", "residual"])?;
                HeadLayerKind::LayerNorm
            }
            HeadKind::Dropout => {
                layer.known_keys(&["kind", "p", "name", "residual"])?;
                layer.required("p")?;
                HeadLayerKind::Dropout {
                    p: layer.dropout("p")?,
                }
            }
            HeadKind::Dense => {
                layer.known_keys(&["kind", "units", "activation", "name", "residual"])?;
                HeadLayerKind::Dense {
                    units: layer.size("units")?,
                    activation: activation(layer)?,
                }
            }
        };
        let (name, at) = match layer.table.get("name") {
            None => (default_head_name(i), layer.span.start),
            Some(v) => (layer_name(layer, v)?, v.span().start),
        };
        if let Some((other, line)) = named.get(&name) {
            let key = layer.key("name");
            let given = if layer.table.contains_key("name") {
                format!("`{key}` = {name:?}")
            } else {
                format!("`{}` is named {name:?} by default, and that", layer.path)
            };
            let message = format!("{given} is also the name of `{other}` (line {line})");
            return Err(layer.file.error(at, &key, message));
        }
        let line = layer.file.line_column(layer.span.start).0;
        named.insert(name.clone(), (layer.path.clone(), line));
        layers.push(HeadLayer {
            name,
            kind,
            residual: layer.flag("residual")?,
        });
    }
    Ok(layers)
}

/// A given head layer name: dot-separated words of ASCII letters, digits and `_` (as
/// PyTorch module paths are), not the name of a layer outside the head.
fn layer_name(layer: &Table, v: &Spanned<DeValue>) -> Result<String, DescriptionError> {
    let key = layer.key("name");
    let at = v.span().start;
    let DeValue::String(name) = v.get_ref() else {
        return Err(layer.wrong_type("name", v, "a string", v.get_ref()));
    };
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name.split('.').all(word) {
        return Err(layer.file.error(
            at,
            &key,
            format!(
                "`{key}` = {name:?}: a name is words of letters, digits and `_` joined by `.` \
                 (its tensors are `{name}.weight`, ...)"
            ),
        ));
    }
    if RESERVED_NAMES.contains(&name.as_ref()) {
        return Err(layer.file.error(
            at,
            &key,
            format!(
                "`{key}` = {name:?} is the name of another part of the network \
                 ({} are taken)",
                RESERVED_NAMES.join(", ")
            ),
        ));
    }
    Ok(name.to_string())
}

/// A layer's `activation`: identity when not given (PyTorch's `nn.Linear` and
/// `nn.Conv1d` have none, Keras's default).
fn activation(layer: &Table) -> Result<Activation, DescriptionError> {
    match layer.table.get("activation") {
        None => Ok(Activation::Identity),
        Some(_) => layer.choice("activation", &Activation::ALL.map(|a| (a.name(), a))),
    }
}

/// A body layer's name when none is given: its index in the body.
fn default_body_name(index: usize) -> String {
    format!("body.{index}")
}

/// A head layer's name when none is given: its index, as `nn.Sequential` names it.
fn default_head_name(index: usize) -> String {
    format!("head.{index}")
}

fn loss(t: &Table, pending: &mut Vec<FromData>) -> Result<LossSpec, DescriptionError> {
    match t.choice("kind", &[("cross_entropy", false), ("mse", true)])? {
        false => {
            t.known_keys(&["kind", "classes"])?;
            Ok(LossSpec::SoftmaxCrossEntropy {
                classes: t.figure("classes", Figure::Classes, pending)?,
            })
        }
        true => {
            t.known_keys(&["kind", "outputs"])?;
            Ok(LossSpec::MeanSquaredError {
                outputs: t.figure("outputs", Figure::Outputs, pending)?,
            })
        }
    }
}
