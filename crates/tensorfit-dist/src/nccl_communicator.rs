//! [`NcclCommunicator`]: the gradient bucket of an all-CUDA run summed by NCCL in device
//! memory (the path every rank chose together: `agree_path`), the other collectives left
//! to the host communicator. Built with the `nccl` feature.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::{Comm, Id, ReduceOp};

use crate::nccl::unique_id;
use crate::{Communicator, DistError};

/// NCCL's all-reduce on this rank's GPU, the host communicator for the rest.
pub struct NcclCommunicator {
    host: Box<dyn Communicator>,
    stream: Arc<CudaStream>,
    comm: Comm,
}

impl std::fmt::Debug for NcclCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCommunicator")
            .field("host", &self.host)
            .field("rank", &self.comm.rank())
            .field("ordinal", &self.comm.ordinal())
            .finish()
    }
}

fn nccl_failed(what: &str, e: impl std::fmt::Debug) -> DistError {
    DistError::NcclUnavailable(format!("{what} failed: {e:?}"))
}

impl NcclCommunicator {
    /// Joins every rank of `host` into one NCCL communicator on GPU `ordinal` (rank 0
    /// makes the id and broadcasts it over `host`). A collective call of every rank.
    pub fn join(
        mut host: Box<dyn Communicator>,
        ordinal: usize,
    ) -> Result<NcclCommunicator, DistError> {
        let id = unique_id(host.as_mut(), 0)?;
        let ctx = CudaContext::new(ordinal).map_err(|e| nccl_failed("opening the GPU", e))?;
        let stream = ctx.default_stream();
        let comm = Comm::from_rank(
            Arc::clone(&stream),
            host.rank(),
            host.size(),
            Id::uninit(id.internal()),
        )
        .map_err(|e| nccl_failed("ncclCommInitRank", e))?;
        Ok(NcclCommunicator { host, stream, comm })
    }
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> usize {
        self.host.rank()
    }

    fn size(&self) -> usize {
        self.host.size()
    }

    /// Copies `data` to the GPU, sums it there over the ranks with NCCL, and copies it
    /// back. NCCL has no time bound of its own: a lost rank is noticed by the host
    /// communicator's next collective (every step has one: the weights check, a
    /// validation's sums) or by mpirun.
    fn all_reduce_sum(&mut self, data: &mut [f32]) -> Result<(), DistError> {
        if data.is_empty() {
            return Ok(());
        }
        let mut on_device = self
            .stream
            .clone_htod(data)
            .map_err(|e| nccl_failed("copying the bucket to the GPU", e))?;
        self.comm
            .all_reduce_in_place(&mut on_device, &ReduceOp::Sum)
            .map_err(|e| nccl_failed("ncclAllReduce", e))?;
        self.stream
            .memcpy_dtoh(&on_device, data)
            .map_err(|e| nccl_failed("copying the sum back", e))?;
        self.stream
            .synchronize()
            .map_err(|e| nccl_failed("waiting for the GPU", e))
    }

    fn broadcast_bytes(&mut self, data: &mut [u8], root: usize) -> Result<(), DistError> {
        self.host.broadcast_bytes(data, root)
    }

    fn broadcast_f32(&mut self, data: &mut [f32], root: usize) -> Result<(), DistError> {
        self.host.broadcast_f32(data, root)
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        self.host.barrier()
    }
}
