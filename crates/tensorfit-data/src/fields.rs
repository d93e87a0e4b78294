//! Reading numeric CSV line by line: lines with their number and byte offset (checked as
//! UTF-8), split into fields, and each field parsed as a finite f32 or a label.

use std::io::BufRead;
use std::path::Path;

use crate::dataset::ReadSettings;
use crate::error::{DataError, Place, Result};

/// UTF-8's byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The lines of a text file, one at a time, with their 1-based number and the byte offset
/// of their start. Only the current line is held.
#[derive(Debug)]
pub(crate) struct Lines<'p, R> {
    reader: R,
    path: &'p Path,
    /// The current line, checked as UTF-8 once.
    buf: String,
    /// Number of the line last read.
    line: usize,
    /// Byte offset of the line last read.
    offset: u64,
    next_offset: u64,
}

impl<'p, R: BufRead> Lines<'p, R> {
    /// Lines of `reader` (the file `path`), whose first byte is at `offset` and first line
    /// is number `line`.
    pub fn new(reader: R, path: &'p Path, offset: u64, line: usize) -> Self {
        Lines {
            reader,
            path,
            buf: String::with_capacity(256),
            line: line.saturating_sub(1),
            offset,
            next_offset: offset,
        }
    }

    /// The next line (without its line ending) with its number and byte offset, `None`
    /// at the end of the file.
    pub fn next_line(&mut self) -> Result<Option<(usize, u64, &str)>> {
        if !self.advance()? {
            return Ok(None);
        }
        Ok(Some((self.line, self.offset, self.text())))
    }

    /// The next line that is not blank, as [`Lines::next_line`].
    pub fn next_nonblank(&mut self) -> Result<Option<(usize, u64, &str)>> {
        while self.advance()? {
            if !self.text().trim().is_empty() {
                return Ok(Some((self.line, self.offset, self.text())));
            }
        }
        Ok(None)
    }

    /// Reads the next line into `buf` and checks it is UTF-8; false at the end.
    fn advance(&mut self) -> Result<bool> {
        // The line's bytes go into the String's own buffer, checked once and kept.
        let mut bytes = std::mem::take(&mut self.buf).into_bytes();
        bytes.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut bytes)
            .map_err(DataError::io(self.path))?;
        if n == 0 {
            return Ok(false);
        }
        self.line += 1;
        self.offset = self.next_offset;
        self.next_offset += n as u64;
        while matches!(bytes.last(), Some(b'\n' | b'\r')) {
            bytes.pop();
        }
        // A byte-order mark at the start of the file (Excel's "CSV UTF-8" writes one) is
        // not part of the first line's text.
        let bom = usize::from(self.offset == 0 && bytes.starts_with(BOM)) * BOM.len();
        bytes.drain(..bom);
        match String::from_utf8(bytes) {
            Ok(text) => {
                self.buf = text;
                Ok(true)
            }
            Err(e) => Err(DataError::InvalidUtf8 {
                place: Place {
                    byte: Some(self.offset + (bom + e.utf8_error().valid_up_to()) as u64),
                    ..Place::line(self.path, self.line)
                },
            }),
        }
    }

    fn text(&self) -> &str {
        &self.buf
    }
}

/// The comma-separated fields of a line, trimmed, and a field in double quotes without
/// them (`"0.5"` is 0.5, as a CSV reader reads it; a quoted field holding a comma is not
/// read as one field).
pub(crate) fn fields(line: &str) -> impl Iterator<Item = &str> {
    line.split(',').map(|f| {
        let f = f.trim();
        f.strip_prefix('"')
            .and_then(|f| f.strip_suffix('"'))
            .map_or(f, str::trim)
    })
}

/// True when no field of `line` is a number: a header row.
pub(crate) fn is_header(line: &str) -> bool {
    fields(line).all(|f| f.parse::<f64>().is_err())
}

/// Checks that the first line of a CSV file (`path`) separates its fields with commas:
/// one split into more fields by `;`, a TAB or `|` than by commas is refused, naming the
/// separator found (Excel writes `;` where the decimal mark is a comma).
pub(crate) fn check_separator(path: &Path, number: usize, line: &str) -> Result<()> {
    let commas = line.split(',').count();
    let found = [(';', "`;`"), ('\t', "TAB"), ('|', "`|`")]
        .into_iter()
        .find(|(c, _)| line.split(*c).count() > commas);
    match found {
        Some((_, name)) => Err(DataError::format(
            Place::line(path, number),
            format!("fields are separated by {name}, and a CSV is read comma-separated with a decimal point (pandas: df.to_csv(path, sep=',', decimal='.'))"),
        )),
        None => Ok(()),
    }
}

/// `result` of reading a CSV file, an error noting the line skipped as a header when one
/// was and the error may come of it: at the line after it, or of the file as a whole
/// (too few lines, or labels) but not one it could not read.
pub(crate) fn noting_header<T>(result: Result<T>, header: Option<String>) -> Result<T> {
    match (result, header) {
        (Err(error), Some(header))
            if !matches!(error, DataError::Io { .. }) && error.line().is_none_or(|l| l <= 2) =>
        {
            const SHOWN: usize = 60;
            let header = match header.char_indices().nth(SHOWN) {
                Some((cut, _)) => format!("{}...", &header[..cut]),
                None => header,
            };
            Err(DataError::AfterHeader {
                error: Box::new(error),
                header,
            })
        }
        (result, _) => result,
    }
}

/// `text` as a finite f32.
pub(crate) fn parse_value(text: &str, place: impl FnOnce() -> Place) -> Result<f32> {
    if let Some(v) = plain_decimal(text) {
        return Ok(v);
    }
    match text.parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(DataError::NotFinite {
            place: place(),
            value: text.to_string(),
        }),
        Err(_) => Err(DataError::NotANumber {
            place: place(),
            text: text.to_string(),
        }),
    }
}

/// The digits of a decimal that an f32 holds exactly (below 2^24), and the powers of ten
/// an f32 holds exactly (up to 10^10).
const EXACT_DIGITS: u32 = 1 << 24;
const EXACT_POWERS: [f32; 11] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// `text` read directly when it is a plain decimal (an optional sign, digits, an optional
/// point and digits: `-0.12345`, `3`, `.5`) whose digits make an integer below 2^24 with at
/// most 10 after the point — what CSV exports write. The integer and the power of ten are
/// both exact in an f32, so their quotient is one correctly rounded division: the value
/// `str::parse` gives, bit for bit, at a fraction of its cost. `None` for anything else
/// (exponents, more digits, words, empty text), which goes through `str::parse`.
fn plain_decimal(text: &str) -> Option<f32> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first()? {
        b'-' => (true, &bytes[1..]),
        b'+' => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let mut integer: u32 = 0;
    let mut seen_digit = false;
    let mut after_point: Option<usize> = None;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                integer = integer * 10 + u32::from(b - b'0');
                if integer >= EXACT_DIGITS {
                    return None;
                }
                seen_digit = true;
                if let Some(n) = after_point.as_mut() {
                    *n += 1;
                }
            }
            b'.' if after_point.is_none() => after_point = Some(0),
            _ => return None,
        }
    }
    let power = *EXACT_POWERS.get(after_point.unwrap_or(0))?;
    if !seen_digit {
        return None;
    }
    let magnitude = integer as f32 / power;
    Some(if negative { -magnitude } else { magnitude })
}

/// A label as read from a file: a class id or a target value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Label {
    Class(u32),
    Value(f32),
}

/// `text` as a label under `settings` (a class id below `settings.classes`, written as an
/// integer or as a float with a whole value such as `1.0`; or a finite f32 target for
/// regression).
pub(crate) fn parse_label(
    text: &str,
    settings: &ReadSettings,
    place: impl Fn() -> Place,
) -> Result<Label> {
    if settings.regression {
        return parse_value(text, place).map(Label::Value);
    }
    let out_of_range = |classes| DataError::LabelOutOfRange {
        place: place(),
        label: text.to_string(),
        classes,
    };
    // A whole number written as a float (`1.0`: pandas writes a column of class ids with
    // blanks so) is that class id, as PyTorch's `.long()` takes it.
    let whole = || {
        text.parse::<f64>()
            .ok()
            .filter(|v| v.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(v))
            .map(|v| v as u32)
    };
    match text.parse::<u32>().ok().or_else(whole) {
        Some(id) => match settings.classes {
            Some(classes) if id as usize >= classes => Err(out_of_range(Some(classes))),
            _ => Ok(Label::Class(id)),
        },
        None if text.parse::<f64>().is_ok_and(|v| v.fract() == 0.0) => {
            Err(out_of_range(settings.classes))
        }
        None if text.parse::<f64>().is_ok() => Err(DataError::LabelKind {
            place: place(),
            message: format!(
                "label `{text}` is not a class id (a whole number from 0); f32 targets are read as regression"
            ),
        }),
        None => Err(DataError::NotANumber {
            place: place(),
            text: text.to_string(),
        }),
    }
}

/// Labels of one sequence, collected as read.
#[derive(Debug, Default)]
pub(crate) struct LabelColumn {
    pub classes: Vec<u32>,
    pub values: Vec<f32>,
}

impl LabelColumn {
    pub fn push(&mut self, label: Label) {
        match label {
            Label::Class(c) => self.classes.push(c),
            Label::Value(v) => self.values.push(v),
        }
    }

    pub fn largest(&self) -> Option<u32> {
        self.classes.iter().copied().max()
    }

    pub fn into_values(self, regression: bool) -> crate::dataset::Values {
        if regression {
            crate::dataset::Values::F32(self.values)
        } else {
            crate::dataset::Values::Ids(self.classes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::plain_decimal;

    /// The direct reading gives `str::parse`'s value, bit for bit, wherever it answers, and
    /// answers for the decimals CSV exports write.
    #[test]
    fn plain_decimals_read_as_str_parse_reads_them() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut answered = 0;
        for _ in 0..200_000 {
            let r = next();
            let digits = (r % 9) as usize + 1;
            let mantissa = (r >> 8) % 10u64.pow(digits as u32);
            let mut text = format!("{mantissa:0digits$}");
            let point = (r >> 40) as usize % (digits + 2);
            if point <= digits {
                text.insert(digits - point.min(digits), '.');
            }
            if r >> 60 & 1 == 1 {
                text.insert(0, '-');
            }
            let expected: f32 = text.parse().unwrap();
            if let Some(v) = plain_decimal(&text) {
                assert_eq!(v.to_bits(), expected.to_bits(), "{text}");
                answered += 1;
            }
        }
        assert!(
            answered > 140_000,
            "only {answered} of 200000 read directly"
        );
        for text in [
            "0",
            "1",
            "-0.0",
            "+2.5",
            ".5",
            "5.",
            "0.10000",
            "16777215",
            "0.0000000001",
        ] {
            let v = plain_decimal(text).unwrap_or_else(|| panic!("{text} not read directly"));
            assert_eq!(
                v.to_bits(),
                text.parse::<f32>().unwrap().to_bits(),
                "{text}"
            );
        }
        for text in [
            "",
            "-",
            ".",
            "+.",
            "1e5",
            "1.2.3",
            "16777216",
            "0.00000000001",
            "nan",
            "inf",
            "1 2",
            "0x1",
        ] {
            assert_eq!(plain_decimal(text), None, "{text}");
        }
    }
}
