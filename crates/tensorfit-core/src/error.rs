//! The errors of every tensorfit library crate.
//!
//! One enum so that a session can match on the cases that matter to it (above all
//! `OutOfMemory`, which triggers a fallback to another device) whatever layer raised them.
//! Display and `std::error::Error` are written out below (no derive macro: the library
//! builds without proc-macro crates).

use std::fmt;

/// Result alias used throughout tensorfit's libraries.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug)]
pub enum Error {
    /// A shape or arity mismatch found while building a graph; names the node.
    Shape {
        node: String,
        op: &'static str,
        message: String,
    },

    /// A graph that cannot be scheduled or differentiated as asked.
    Graph(String),

    /// The device could not provide the memory asked for.
    OutOfMemory {
        device: String,
        requested: u64,
        available: u64,
    },

    /// The device stopped working (driver reset, device removed, context lost). Its
    /// memory is gone; a session moves to another device from its last host snapshot.
    DeviceLost { device: String, message: String },

    /// A backend was handed a buffer, view or op it cannot use.
    Backend {
        backend: &'static str,
        message: String,
    },

    /// Invalid user input: configuration, data, sizes.
    Input(String),

    /// A token id that is not a whole number in `0..vocab` (see [`crate::tokens`]).
    TokenOutOfRange {
        tensor: String,
        position: String,
        value: f32,
        vocab: usize,
    },

    /// A file that could not be read, written or parsed.
    File { path: String, message: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { node, op, message } => write!(f, "node `{node}` ({op}): {message}"),
            Error::Graph(message) => write!(f, "invalid graph: {message}"),
            Error::OutOfMemory {
                device,
                requested,
                available,
            } => write!(
                f,
                "out of memory on {device}: asked for {requested} bytes, {available} bytes available"
            ),
            Error::DeviceLost { device, message } => {
                write!(f, "device lost on {device}: {message}")
            }
            Error::Backend { backend, message } => write!(f, "backend {backend}: {message}"),
            Error::Input(message) => write!(f, "invalid input: {message}"),
            Error::TokenOutOfRange {
                tensor,
                position,
                value,
                vocab,
            } => write!(
                f,
                "token id {value} at {position} of `{tensor}` is outside the vocabulary of {vocab} (ids are whole numbers 0..{vocab})"
            ),
            Error::File { path, message } => write!(f, "{path}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// True for failures of the device rather than of the request: out of memory, or the
    /// device lost. A session recovers from these by moving to another plan or device.
    pub fn is_device_failure(&self) -> bool {
        matches!(self, Error::OutOfMemory { .. } | Error::DeviceLost { .. })
    }

    /// Shorthand for an [`Error::Input`].
    pub fn input(msg: impl Into<String>) -> Self {
        Error::Input(msg.into())
    }
}
