//! The one error type of the library front door: the cases an app acts on differently.

use std::fmt;
use std::path::PathBuf;

use tensorfit_data::DataError;

pub use super::bad_input::BadInput;

/// What went wrong, as an app matches on it. Every message names the tensor, file, flag or
/// device concerned. New cases may come in later versions (`#[non_exhaustive]`): a
/// `match` ends with a catch-all arm.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{DeviceKind, DevicePolicy, Error, Job, Model};
/// // The seed model capped at 1 MiB of the CPU fits nowhere.
/// let policy = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20);
/// match Model::seed().open(Job::Eval { batch: 1, seq_len: 10 }, &policy) {
///     Err(Error::OutOfMemory { device, requested, available, .. }) => {
///         assert_eq!(device, "cpu");
///         assert!(requested > available);
///     }
///     Err(other) => return Err(other),
///     Ok(_) => panic!("it fits"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The job fits on no device (even streamed or in micro-batches), or a device ran out
    /// of memory during the run and no other plan or device was left to move to.
    OutOfMemory {
        /// The device that ran out, or where the job's smallest plan is (`cpu`,
        /// `cuda:0`).
        device: String,
        /// Bytes needed: the allocation that failed, or the smallest plan.
        requested: u64,
        /// Bytes there were: on that device, or the largest usable capacity of any
        /// allowed device when nothing fits.
        available: u64,
        /// For people: the smallest plan's strategy, the device with the most memory and
        /// where its figure comes from, what the job's memory grows with; empty where
        /// there is nothing to add.
        detail: String,
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
    BadInput(BadInput),
    /// A data file that cannot be read as data: which file, and where in it
    /// ([`DataError::line`]).
    Data(DataError),
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
                detail,
            } => {
                write!(
                    f,
                    "out of memory on {device}: {requested} bytes needed, {available} bytes available"
                )?;
                match detail.is_empty() {
                    true => Ok(()),
                    false => write!(f, " ({detail})"),
                }
            }
            Error::DeviceLost { device, message } => {
                write!(f, "device lost: {device}: {message}")
            }
            Error::NoDevice(message) => write!(f, "no device: {message}"),
            Error::BadInput(b) => write!(f, "bad input: {b}"),
            Error::Data(e) => e.fmt(f),
            Error::File { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Data(e) => Some(e),
            _ => None,
        }
    }
}

impl Error {
    /// Bad input described by `message` alone ([`BadInput::new`]).
    ///
    /// ```
    /// use tensorfit::Error;
    /// let e = Error::bad_input("no labels");
    /// assert!(matches!(&e, Error::BadInput(b) if b.argument.is_none()));
    /// assert_eq!(e.to_string(), "bad input: no labels");
    /// ```
    pub fn bad_input(message: impl Into<String>) -> Error {
        Error::BadInput(BadInput::new(message))
    }
}

impl From<DataError> for Error {
    fn from(e: DataError) -> Self {
        Error::Data(e)
    }
}

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
                detail: String::new(),
            },
            E::DeviceLost { device, message } => Error::DeviceLost { device, message },
            E::File { path, message } => Error::File {
                path: path.into(),
                message,
            },
            e @ (E::Input(_) | E::TokenOutOfRange { .. } | E::Shape { .. }) => Error::bad_input(
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
