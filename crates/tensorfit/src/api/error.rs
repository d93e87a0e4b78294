//! The one error type of the library front door: the cases an app acts on differently.

use std::fmt;
use std::path::PathBuf;

/// What went wrong, as an app matches on it. Every message names the tensor, file, flag or
/// device concerned.
#[derive(Debug)]
pub enum Error {
    /// The job fits on no device (even streamed or in micro-batches), or a device ran out
    /// of memory during the run and no other plan or device was left to move to.
    OutOfMemory {
        /// The device, or every device with the smallest plan and largest capacity.
        device: String,
        /// Bytes the smallest plan needs.
        requested: u64,
        /// Bytes the largest usable device has.
        available: u64,
    },
    /// The device stopped working and the run could not move to another one.
    DeviceLost {
        /// The device's id (`cpu`, `wgpu:0`, `cuda:0`).
        device: String,
        /// What the driver said.
        message: String,
    },
    /// No device can run the job as asked: none is present, or the job fits only on a
    /// software device, which runs only when asked for by kind.
    NoDevice(String),
    /// The request, the model or the data is invalid (a shape, a value, a setting).
    BadInput(String),
    /// A file that could not be read, written or parsed.
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong with it (with its line where it has lines).
        message: String,
    },
    /// A fault inside tensorfit (a graph or backend inconsistency): a bug to report.
    Internal(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::OutOfMemory {
                device,
                requested,
                available,
            } => write!(
                f,
                "out of memory on {device}: {requested} bytes needed, {available} bytes available"
            ),
            Error::DeviceLost { device, message } => {
                write!(f, "device lost: {device}: {message}")
            }
            Error::NoDevice(message) => write!(f, "no device: {message}"),
            Error::BadInput(message) => write!(f, "bad input: {message}"),
            Error::File { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result of every front-door call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<tensorfit_core::Error> for Error {
    fn from(e: tensorfit_core::Error) -> Self {
        use tensorfit_core::Error as E;
        match e {
            E::OutOfMemory {
                device,
                requested,
                available,
            } => Error::OutOfMemory {
                device,
                requested,
                available,
            },
            E::DeviceLost { device, message } => Error::DeviceLost { device, message },
            E::File { path, message } => Error::File {
                path: path.into(),
                message,
            },
            e @ (E::Input(_) | E::TokenOutOfRange { .. } | E::Shape { .. }) => Error::BadInput(
                e.to_string()
                    .trim_start_matches("invalid input: ")
                    .to_string(),
            ),
            e @ (E::Graph(_) | E::Backend { .. }) => Error::Internal(e.to_string()),
        }
    }
}

impl From<tensorfit_nn::DescriptionError> for Error {
    fn from(e: tensorfit_nn::DescriptionError) -> Self {
        e.into_error().into()
    }
}

impl From<tensorfit_nn::BuildError> for Error {
    fn from(e: tensorfit_nn::BuildError) -> Self {
        tensorfit_core::Error::from(e).into()
    }
}
