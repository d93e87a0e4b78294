//! The one error type of the crate: every way a collective, the launch or NCCL can fail.
use std::time::Duration;

/// Why a distributed operation failed. Messages name the rank, the operation and what to do.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// Started by a launcher (`mpirun`, `srun`) for several ranks, by a binary built
    /// without MPI: each rank would train alone, so the run is refused.
    #[error(
        "started as one of {size} ranks ({var}={size}) but this binary was built without MPI: \
         rebuild with `--features mpi` (needs Open MPI: libopenmpi-dev) or run it without mpirun"
    )]
    NotBuiltWithMpi { var: &'static str, size: usize },

    /// A launcher variable that is not a count.
    #[error("the launcher variable {var}={value:?} is not a number of ranks")]
    BadLauncherVariable { var: &'static str, value: String },

    /// MPI could not be initialised (already initialised in this process, or the
    /// library refused).
    #[error("MPI could not be initialised: {0}")]
    Init(String),

    /// A collective did not complete in time: another rank died, hangs, or lost its
    /// network. MPI (without fault-tolerance extensions) cannot cancel a collective, so
    /// this communicator is unusable afterwards and the process should exit; `mpirun`
    /// then stops the other ranks.
    #[error(
        "{op} did not complete within {} s on rank {rank} of {size}: another rank stopped \
         responding (it died, hangs, or lost its network), or waits in another collective \
         (the ranks' runs differ); ending this rank (--collective-timeout sets the bound)",
        timeout.as_secs_f64()
    )]
    Timeout {
        op: String,
        rank: usize,
        size: usize,
        timeout: Duration,
    },

    /// The ranks were started with different settings (`agree`): each that differs, with
    /// the ranks of each value.
    #[error(
        "the ranks were started with different settings: {0}; start every rank with the same \
         command line, model and data"
    )]
    Disagree(String),

    /// A collective was called after an earlier one timed out.
    #[error("rank {rank}: {op} called after an earlier collective timed out; the communicator is unusable")]
    Broken { op: &'static str, rank: usize },

    /// An MPI call returned an error code (Open MPI's default error handler ends the job
    /// with its own message first; this is for handlers that return).
    #[error("rank {rank}: {op} failed in MPI (error code {code})")]
    Mpi {
        op: &'static str,
        rank: usize,
        code: i32,
    },

    /// A buffer longer than one MPI call can carry (`i32::MAX` elements).
    #[error("{op}: {len} elements is more than one MPI call carries (2^31 - 1)")]
    TooLarge { op: &'static str, len: usize },

    /// A root rank outside the communicator.
    #[error("{op}: root rank {root} does not exist (there are {size} ranks)")]
    BadRoot {
        op: &'static str,
        root: usize,
        size: usize,
    },

    /// Buffers that do not match the layout they were declared with.
    #[error("{what}: {detail}")]
    Layout { what: &'static str, detail: String },

    /// NCCL cannot be used here (no library, no CUDA driver, or it failed to start).
    #[error("NCCL unavailable: {0}")]
    NcclUnavailable(String),
}
