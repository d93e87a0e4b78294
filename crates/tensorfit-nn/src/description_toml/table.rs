//! The parser's view of the file: byte offsets as lines and columns, and tables with
//! their key paths and typed getters whose errors say where and what.

use std::ops::Range;
use std::path::Path;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::from_data::{Figure, FromData, PLACEHOLDER};
use super::DescriptionError;
use crate::layers::DropoutRate;

/// The text being parsed and its file name.
#[derive(Clone, Copy)]
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) path: &'a Path,
}

impl Source<'_> {
    pub(super) fn line_column(&self, at: usize) -> (usize, usize) {
        line_column(self.text, at)
    }

    pub(super) fn error(&self, at: usize, key: &str, message: String) -> DescriptionError {
        let (line, column) = self.line_column(at);
        DescriptionError {
            path: self.path.display().to_string(),
            line,
            column,
            key: key.to_string(),
            message,
        }
    }
}

/// 1-based line and character column of byte offset `at` in `text` (clamped to its end).
pub(super) fn line_column(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// A table of the file with its key path (`head.layers[2]`) and span.
pub(super) struct Table<'a> {
    pub(super) file: Source<'a>,
    pub(super) table: &'a DeTable<'a>,
    pub(super) span: Range<usize>,
    pub(super) path: String,
}

impl<'a> Table<'a> {
    /// The key path of `key` in this table.
    pub(super) fn key(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(super) fn known_keys(&self, known: &[&str]) -> Result<(), DescriptionError> {
        match self
            .table
            .iter()
            .find(|(k, _)| !known.contains(&k.get_ref().as_ref()))
        {
            None => Ok(()),
            Some((k, _)) => {
                let key = self.key(k.get_ref());
                let message = format!(
                    "unknown key `{key}`; {} takes {}",
                    self.described(),
                    quoted(known)
                );
                Err(self.file.error(k.span().start, &key, message))
            }
        }
    }

    /// This table in words, for messages.
    pub(super) fn described(&self) -> String {
        let kind = self.table.get("kind").and_then(|k| k.get_ref().as_str());
        match kind {
            _ if self.path.is_empty() => "a model description".into(),
            Some(kind) => format!("`{}` of kind {kind:?}", self.path),
            None => format!("`{}`", self.path),
        }
    }

    pub(super) fn required(&self, key: &str) -> Result<&'a Spanned<DeValue<'a>>, DescriptionError> {
        self.table.get(key).ok_or_else(|| {
            let path = self.key(key);
            let message = format!("missing key `{path}` in {}", self.described());
            self.file.error(self.span.start, &path, message)
        })
    }

    pub(super) fn table_at(&self, key: &str) -> Result<Table<'a>, DescriptionError> {
        let v = self.required(key)?;
        match v.get_ref() {
            DeValue::Table(table) => Ok(Table {
                file: self.file,
                table,
                span: v.span(),
                path: self.key(key),
            }),
            other => Err(self.wrong_type(key, v, "a table", other)),
        }
    }

    pub(super) fn wrong_type(
        &self,
        key: &str,
        v: &Spanned<DeValue>,
        wanted: &str,
        got: &DeValue,
    ) -> DescriptionError {
        let path = self.key(key);
        let message = format!("`{path}` must be {wanted}, not {}", got.type_str());
        self.file.error(v.span().start, &path, message)
    }

    /// The string value of `key`, which must be one of `choices` (listed if not).
    pub(super) fn choice<T: Copy>(
        &self,
        key: &str,
        choices: &[(&str, T)],
    ) -> Result<T, DescriptionError> {
        let v = self.required(key)?;
        let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
        let DeValue::String(s) = v.get_ref() else {
            let wanted = format!("a string, one of {}", quoted(&names));
            return Err(self.wrong_type(key, v, &wanted, v.get_ref()));
        };
        choices
            .iter()
            .find(|(n, _)| n == s)
            .map(|(_, c)| *c)
            .ok_or_else(|| {
                let path = self.key(key);
                let message = format!("`{path}` = {s:?} is not one of {}", quoted(&names));
                self.file.error(v.span().start, &path, message)
            })
    }

    /// A size: a whole number of at least 1.
    pub(super) fn size(&self, key: &str) -> Result<usize, DescriptionError> {
        let v = self.required(key)?;
        self.size_value(key, v)
    }

    pub(super) fn optional_size(&self, key: &str) -> Result<Option<usize>, DescriptionError> {
        self.table
            .get(key)
            .map(|v| self.size_value(key, v))
            .transpose()
    }

    /// A size the file may leave to the data (`"data"`): then [`PLACEHOLDER`], and the
    /// key is added to `pending` with where it is.
    pub(super) fn figure(
        &self,
        key: &str,
        figure: Figure,
        pending: &mut Vec<FromData>,
    ) -> Result<usize, DescriptionError> {
        let v = self.required(key)?;
        match v.get_ref() {
            DeValue::String(s) if s.as_ref() == "data" => {
                let (line, column) = self.file.line_column(v.span().start);
                pending.push(FromData {
                    figure,
                    key: self.key(key),
                    line,
                    column,
                    path: self.file.path.display().to_string(),
                });
                Ok(PLACEHOLDER)
            }
            DeValue::String(_) => Err(self.wrong_type(
                key,
                v,
                "a whole number of at least 1, or \"data\" (the data's)",
                v.get_ref(),
            )),
            _ => self.size_value(key, v),
        }
    }

    pub(super) fn size_value(
        &self,
        key: &str,
        v: &Spanned<DeValue>,
    ) -> Result<usize, DescriptionError> {
        let path = self.key(key);
        let fail = |why: String| {
            self.file
                .error(v.span().start, &path, format!("`{path}` {why}"))
        };
        let DeValue::Integer(i) = v.get_ref() else {
            return Err(self.wrong_type(key, v, "a whole number of at least 1", v.get_ref()));
        };
        match i64::from_str_radix(i.as_str(), i.radix()) {
            Ok(n) if n < 1 => Err(fail(format!("must be at least 1, got {n}"))),
            Ok(n) => usize::try_from(n).map_err(|_| fail(format!("= {n} is too large"))),
            Err(_) => Err(fail(format!("= {i} is too large"))),
        }
    }

    /// A dropout probability (`0 <= p < 1`; 0 when the key is absent).
    /// A boolean that is false when not given.
    pub(super) fn flag(&self, key: &str) -> Result<bool, DescriptionError> {
        match self.table.get(key) {
            None => Ok(false),
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => Ok(*b),
                other => Err(self.wrong_type(key, v, "true or false", other)),
            },
        }
    }

    pub(super) fn dropout(&self, key: &str) -> Result<DropoutRate, DescriptionError> {
        let Some(v) = self.table.get(key) else {
            return Ok(DropoutRate::NONE);
        };
        let path = self.key(key);
        let text = match v.get_ref() {
            DeValue::Float(f) => f.as_str(),
            DeValue::Integer(i) => i.as_str(),
            other => return Err(self.wrong_type(key, v, "a number in [0, 1)", other)),
        };
        let p = text.replace('_', "").parse::<f64>().unwrap_or(f64::NAN);
        DropoutRate::from_f64(p).map_err(|why| {
            self.file
                .error(v.span().start, &path, format!("`{path}` {why}"))
        })
    }
}

/// `"a", "b" or "c"`.
fn quoted(names: &[&str]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    match q.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => q.join(""),
    }
}
