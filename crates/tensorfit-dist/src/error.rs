//! The one error type of the crate: every way a collective, the launch or NCCL can fail.
use std::fmt;
use std::time::Duration;

/// Why a distributed operation failed. Messages name the rank, the operation and what to do.
#[derive(Debug)]
pub enum DistError {
    /// Started by a launcher (`mpirun`, `srun`) for several ranks, by a binary built
    /// without MPI: each rank would train alone, so the run is refused.
    NotBuiltWithMpi { var: &'static str, size: usize },

    /// A launcher variable that is not a count.
    BadLauncherVariable { var: &'static str, value: String },

    /// MPI could not be initialised (already initialised in this process, or the
    /// library refused).
    Init(String),

    /// A collective did not complete in time: another rank died, hangs, or lost its
    /// network. MPI (without fault-tolerance extensions) cannot cancel a collective, so
    /// this communicator is unusable afterwards and the process should exit; `mpirun`
    /// then stops the other ranks.
    Timeout {
        op: String,
        rank: usize,
        size: usize,
        timeout: Duration,
    },

    /// The ranks were started with different settings (`agree`): each that differs, with
    /// the ranks of each value.
    Disagree(String),

    /// A collective was called after an earlier one timed out.
    Broken { op: &'static str, rank: usize },

    /// An MPI call returned an error code (Open MPI's default error handler ends the job
    /// with its own message first; this is for handlers that return).
    Mpi {
        op: &'static str,
        rank: usize,
        code: i32,
    },

    /// A buffer longer than one MPI call can carry (`i32::MAX` elements).
    TooLarge { op: &'static str, len: usize },

    /// A root rank outside the communicator.
    BadRoot {
        op: &'static str,
        root: usize,
        size: usize,
    },

    /// Buffers that do not match the layout they were declared with.
    Layout { what: &'static str, detail: String },

    /// NCCL cannot be used here (no library, no CUDA driver, or it failed to start).
    NcclUnavailable(String),
}

impl fmt::Display for DistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DistError as E;
        match self {
            E::NotBuiltWithMpi { var, size } => write!(
                f,
                "started as one of {size} ranks ({var}={size}) but this binary was built without MPI: \
                 rebuild with `--features mpi` (needs Open MPI: libopenmpi-dev) or run it without mpirun"
            ),
            E::BadLauncherVariable { var, value } => write!(
                f,
                "the launcher variable {var}={value:?} is not a number of ranks"
            ),
            E::Init(message) => write!(f, "MPI could not be initialised: {message}"),
            E::Timeout {
                op,
                rank,
                size,
                timeout,
            } => write!(
                f,
                "{op} did not complete within {} s on rank {rank} of {size}: another rank stopped \
                 responding (it died, hangs, or lost its network), or waits in another collective \
                 (the ranks' runs differ); ending this rank (--collective-timeout sets the bound)",
                timeout.as_secs_f64()
            ),
            E::Disagree(settings) => write!(
                f,
                "the ranks were started with different settings: {settings}; start every rank with the same \
                 command line, model and data"
            ),
            E::Broken { op, rank } => write!(
                f,
                "rank {rank}: {op} called after an earlier collective timed out; the communicator is unusable"
            ),
            E::Mpi { op, rank, code } => {
                write!(f, "rank {rank}: {op} failed in MPI (error code {code})")
            }
            E::TooLarge { op, len } => write!(
                f,
                "{op}: {len} elements is more than one MPI call carries (2^31 - 1)"
            ),
            E::BadRoot { op, root, size } => write!(
                f,
                "{op}: root rank {root} does not exist (there are {size} ranks)"
            ),
            E::Layout { what, detail } => write!(f, "{what}: {detail}"),
            E::NcclUnavailable(message) => write!(f, "NCCL unavailable: {message}"),
        }
    }
}

impl std::error::Error for DistError {}
