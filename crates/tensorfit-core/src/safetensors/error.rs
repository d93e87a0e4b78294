//! Why bytes are not a safetensors file tensorfit reads, or tensors not one it can write.

use std::fmt;
use std::path::Path;

use super::{Dtype, MAX_HEADER_BYTES};

/// What is wrong with a safetensors file or header; each names the tensor concerned, and
/// [`SafetensorsError::in_file`] adds the file.
#[derive(Debug)]
pub enum SafetensorsError {
    /// The bytes end inside `what` (the header length, the header).
    Truncated { what: &'static str },
    /// A header length outside 2 (the smallest object, `{}`) to [`MAX_HEADER_BYTES`].
    HeaderLength { length: u64 },
    /// A header longer than the whole file.
    HeaderPastEnd { length: u64, file_len: u64 },
    /// The header is not UTF-8: `at` is the offset of the first bad byte in it.
    NotUtf8 { at: usize },
    /// The header is not JSON (serde_json's message, with line and column).
    Json(String),
    /// The header is JSON but not an object.
    NotAnObject { found: &'static str },
    /// The header names this tensor twice (JSON maps would keep one silently).
    RepeatedTensor(String),
    /// The `__metadata__` entry is not an object of strings, or gives a key twice.
    Metadata(String),
    /// A tensor's entry is not `{"dtype", "shape", "data_offsets"}` as the format has it.
    Tensor { tensor: String, message: String },
    /// A dtype the format does not have.
    UnknownDtype { tensor: String, dtype: String },
    /// A tensor's bytes do not start where the previous tensor's end (`expected`), or
    /// end before they begin: an overlap or a hole.
    InvalidOffset {
        tensor: String,
        begin: u64,
        end: u64,
        expected: u64,
    },
    /// A tensor's shape whose element or byte count overflows.
    Overflow { tensor: String },
    /// A tensor whose byte range is not the size of its shape and dtype (`needed` is
    /// `None` when that size is not a whole number of bytes).
    ByteCount {
        tensor: String,
        dtype: Dtype,
        shape: Vec<usize>,
        needed: Option<u64>,
        found: u64,
    },
    /// The header's length and data do not end where the file does.
    FileLength { described: u64, found: u64 },
    /// The header and data together are more bytes than a u64 counts.
    TooLarge,
    /// A tensor name no file can hold (writing): empty, `__metadata__`, or repeated.
    Name(String),
    /// Tensor data whose length is not its shape's and dtype's (writing).
    DataLength {
        tensor: String,
        needed: u64,
        found: u64,
    },
    /// The file could not be read. The message includes the system's reason, so the
    /// reason is not also a `source` (a chain printer would say it twice).
    Io(std::io::Error),
}

impl SafetensorsError {
    /// As the libraries' error, naming the file: [`crate::Error::File`], its message
    /// "not a valid safetensors file (why)" (or the system's reason when it could not be
    /// read).
    pub fn in_file(self, path: &Path) -> crate::Error {
        let message = match self {
            SafetensorsError::Io(e) => e.to_string(),
            e => format!("not a valid safetensors file ({e})"),
        };
        crate::Error::File {
            path: path.display().to_string(),
            message,
        }
    }
}

impl fmt::Display for SafetensorsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use SafetensorsError as E;
        match self {
            E::Truncated { what } => write!(f, "it ends inside {what}"),
            E::HeaderLength { length } => write!(
                f,
                "header length {length}; a header is 2 to {MAX_HEADER_BYTES} bytes"
            ),
            E::HeaderPastEnd { length, file_len } => write!(
                f,
                "its header claims {length} bytes, the file has {file_len} in all"
            ),
            E::NotUtf8 { at } => write!(f, "the header is not UTF-8 (at its byte {at})"),
            E::Json(message) => write!(f, "header: {message}"),
            E::NotAnObject { found } => write!(f, "the header is {found}, not a JSON object"),
            E::RepeatedTensor(name) => write!(f, "the header names `{name}` twice"),
            E::Metadata(message) => write!(f, "`__metadata__` {message}"),
            E::Tensor { tensor, message } => write!(f, "tensor `{tensor}`: {message}"),
            E::UnknownDtype { tensor, dtype } => write!(
                f,
                "tensor `{tensor}` has dtype `{dtype}`, which the safetensors format does not have"
            ),
            E::InvalidOffset {
                tensor,
                begin,
                end,
                expected,
            } => {
                write!(f, "invalid offset for tensor `{tensor}`: ")?;
                if end < begin {
                    write!(f, "its bytes {begin}..{end} end before they begin")
                } else {
                    write!(
                        f,
                        "bytes {begin}..{end} where the tensors before it end at {expected} \
                         (each tensor's bytes follow the previous one's from byte 0, with no \
                         overlap and no hole)"
                    )
                }
            }
            E::Overflow { tensor } => write!(
                f,
                "tensor `{tensor}`: the byte count of its shape overflows"
            ),
            E::ByteCount {
                tensor,
                dtype,
                shape,
                needed,
                found,
            } => match needed {
                Some(needed) => write!(
                    f,
                    "tensor `{tensor}`: shape {shape:?} of {dtype} is {needed} bytes, its data offsets hold {found}"
                ),
                None => write!(
                    f,
                    "tensor `{tensor}`: shape {shape:?} of {dtype} is not a whole number of bytes"
                ),
            },
            E::FileLength { described, found } => {
                write!(
                    f,
                    "its header describes {described} bytes, the file has {found}: truncated or padded "
                )?;
                if found < described {
                    write!(f, "({} bytes missing)", described - found)
                } else {
                    write!(f, "({} bytes no tensor covers, at its end)", found - described)
                }
            }
            E::TooLarge => write!(f, "its header describes more bytes than any file holds"),
            E::Name(name) => write!(
                f,
                "a safetensors file cannot hold a tensor named `{name}` (empty, reserved or repeated)"
            ),
            E::DataLength {
                tensor,
                needed,
                found,
            } => write!(
                f,
                "tensor `{tensor}`: {found} bytes of data where its shape and dtype need {needed}"
            ),
            E::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SafetensorsError {}
