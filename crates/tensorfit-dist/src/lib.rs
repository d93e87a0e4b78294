//! tensorfit-dist: the communication layer of data-parallel training.
//!
//! - [`Communicator`]: rank, size and the host collectives a training step needs
//!   (all-reduce sum, broadcast, barrier), with [`Solo`] for one process and, with the
//!   `mpi` feature, MPI ranks through rsmpi whose every collective is bounded in time
//!   (a rank that dies or hangs ends the run with [`DistError::Timeout`], not a hang);
//! - [`agree`]: every rank checks, before its first other collective, that all were
//!   started with the same settings, and all stop together naming those that differ;
//! - [`world`]: the communicator a launch asks for (`mpirun` sets `OMPI_COMM_WORLD_SIZE`),
//!   refusing a multi-rank launch of a binary built without MPI;
//! - [`GradientBucket`]: gradients averaged over ranks, identical on every rank;
//! - [`sync_batch_stats`] / [`sync_backward_sums`]: BatchNorm over the global batch, as
//!   PyTorch's `SyncBatchNorm`;
//! - with the `nccl` feature (default), `nccl`: whether NCCL can be used here, and its
//!   unique id shared over MPI; `NcclCommunicator`: the bucket summed by NCCL on the GPUs
//!   of an all-CUDA run, chosen by every rank together ([`agree_path`]; without the
//!   feature it always chooses the host).
//!
//! `docs/distributed.md` says how to run it and how training uses it (`tensorfit`'s
//! `distributed` module).

mod agree;
mod communicator;
mod error;
mod gradients;
mod launch;
#[cfg(feature = "mpi")]
#[allow(unsafe_code)]
mod mpi_comm;
#[cfg(feature = "nccl")]
#[allow(unsafe_code)]
pub mod nccl;
mod nccl_comm;
#[cfg(feature = "nccl")]
mod nccl_communicator;
mod sync_batch_norm;

pub use agree::{agree, all_gather_bytes, all_gather_u64};
pub use communicator::{Communicator, Solo};
pub use error::DistError;
pub use gradients::{bucket_bytes, GradientBucket};
pub use launch::{launcher, world, Launch, DEFAULT_COLLECTIVE_TIMEOUT};
#[cfg(feature = "mpi")]
pub use mpi_comm::MpiCommunicator;
pub use nccl_comm::{agree_path, choose_path, AllReducePath};
#[cfg(feature = "nccl")]
pub use nccl_communicator::NcclCommunicator;
pub use sync_batch_norm::{sync_backward_sums, sync_batch_stats, BatchStats};
