//! The safetensors format, read and written here rather than by the `safetensors` crate
//! (whose serde derive would bring five proc-macro crates into every build of the
//! library; the crate stays a dev-dependency, and the tests check each against the
//! other).
//!
//! A file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object
//! naming each tensor with `{"dtype", "shape", "data_offsets": [begin, end]}`, and an
//! optional `"__metadata__"` object of strings; trailing spaces allowed), then the data
//! section, offsets counted from its start. [`read_header`] reads and checks a header
//! from a stream (data and nn read files larger than memory through it), [`SafeTensors`]
//! a whole file in memory; [`header_bytes`] and [`serialize`] write them.

mod dtype;
mod error;
mod header;
mod json;
mod read;
mod write;

pub use dtype::Dtype;
pub use error::SafetensorsError;
pub use header::{Header, TensorInfo};
pub use read::{read_header, SafeTensors, TensorBytes};
pub use write::{header_bytes, serialize, TensorSpec};

/// Largest header read or written (the `safetensors` crate's own limit).
pub const MAX_HEADER_BYTES: u64 = 100_000_000;
