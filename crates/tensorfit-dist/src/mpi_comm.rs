//! MPI ranks through rsmpi, with every collective bounded in time.
//!
//! Why raw non-blocking calls rather than rsmpi's blocking ones: a blocking `MPI_Allreduce`
//! waits forever for a rank that hangs. Here each collective is started non-blocking
//! (`MPI_Iallreduce`, `MPI_Ibcast`, `MPI_Ibarrier`) on buffers this communicator owns and
//! polled with `MPI_Test` against a deadline. MPI cannot cancel a started collective, so
//! on timeout the staging buffers are leaked (MPI may still write into them: never into
//! the caller's memory), the communicator is marked broken, and dropping it skips
//! `MPI_Finalize` (which would wait for the lost rank too). The caller reports the error
//! and exits non-zero; `mpirun` then stops the other ranks.
//!
//! Every rank gets the same bytes from `MPI_Iallreduce`'s sum in practice: IEEE addition
//! is commutative, and Open MPI's algorithms (ring, recursive doubling, with the extra
//! ranks of a non-power-of-two folded in first) combine identical partial sums on both
//! sides of each exchange. MPI only advises it, so the rank tests compare a hash of the
//! results across 2 and 3 ranks. (Reducing to rank 0 and broadcasting would guarantee it,
//! but Open MPI's pipelined `MPI_Ireduce` + `MPI_Ibcast` made a 5.7 MB average ~8x slower
//! on 2 ranks: docs/distributed.md.)
//!
//! One of the crate's two modules allowed `unsafe`: every block states its invariant in a
//! `// SAFETY:` line.
use std::ffi::c_int;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::traits::{Communicator as _, Equivalence};

use crate::{Communicator, DistError};

/// `MPI_COMM_WORLD` of this process, through rsmpi.
pub struct MpiCommunicator {
    /// Finalises MPI when dropped (skipped when broken).
    universe: Option<mpi::environment::Universe>,
    comm: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    timeout: Duration,
    /// Staging buffers the non-blocking calls read and write.
    send: Vec<f32>,
    recv: Vec<f32>,
    bytes: Vec<u8>,
    /// Set when a collective timed out.
    broken: bool,
}

impl std::fmt::Debug for MpiCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCommunicator")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("timeout", &self.timeout)
            .field("broken", &self.broken)
            .finish()
    }
}

impl MpiCommunicator {
    /// Initialises MPI (once per process) and takes its world.
    pub fn init(timeout: Duration) -> Result<Self, DistError> {
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| DistError::Init("MPI was already initialised in this process".into()))?;
        let world = universe.world();
        Ok(MpiCommunicator {
            comm: world.as_raw(),
            rank: world.rank() as usize,
            size: world.size() as usize,
            universe: Some(universe),
            timeout,
            send: Vec::new(),
            recv: Vec::new(),
            bytes: Vec::new(),
            broken: false,
        })
    }

    fn usable(&self, op: &'static str) -> Result<(), DistError> {
        if self.broken {
            Err(DistError::Broken {
                op,
                rank: self.rank,
            })
        } else {
            Ok(())
        }
    }

    fn root(&self, op: &'static str, root: usize) -> Result<c_int, DistError> {
        if root < self.size {
            Ok(root as c_int)
        } else {
            Err(DistError::BadRoot {
                op,
                root,
                size: self.size,
            })
        }
    }

    fn check(&self, op: &'static str, code: c_int) -> Result<(), DistError> {
        if code == ffi::MPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(DistError::Mpi {
                op,
                rank: self.rank,
                code,
            })
        }
    }

    /// Polls `request` until it completes or `start + timeout` passes.
    fn wait(
        &mut self,
        op: &'static str,
        len: usize,
        request: &mut ffi::MPI_Request,
        start: Instant,
    ) -> Result<(), DistError> {
        loop {
            let mut done: c_int = 0;
            // SAFETY: `request` came from a non-blocking call that succeeded and has not
            // completed yet (MPI_Test sets it to MPI_REQUEST_NULL when it does, and this
            // loop stops then); `done` is valid for a write; MPI_STATUS_IGNORE is allowed.
            let code = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
            if let Err(e) = self.check(op, code) {
                // The request may still be pending: its buffers must outlive it.
                self.fail();
                return Err(e);
            }
            if done != 0 {
                return Ok(());
            }
            if start.elapsed() > self.timeout {
                self.fail();
                return Err(DistError::Timeout {
                    op: format!("{op} of {len} values"),
                    rank: self.rank,
                    size: self.size,
                    timeout: self.timeout,
                });
            }
            // Open MPI progresses a non-blocking collective only inside MPI calls, one
            // step per call, so the wait spins as MPI's blocking calls do. Sleeping
            // between polls made a 5.7 MB average ~3x slower on 2 ranks; yielding
            // (sched_yield) starved ranks that mpirun had bound to busy cores — the same
            // average took over a minute at load 20 (docs/distributed.md).
            std::hint::spin_loop();
        }
    }

    /// After a timeout (or a failed poll): the pending request may still write into the
    /// staging buffers, so they are leaked rather than freed, and MPI is not finalised.
    fn fail(&mut self) {
        std::mem::forget(std::mem::take(&mut self.send));
        std::mem::forget(std::mem::take(&mut self.recv));
        std::mem::forget(std::mem::take(&mut self.bytes));
        self.broken = true;
    }

    /// Broadcasts `root`'s `data` through the staging buffer `stage` picks.
    fn broadcast<T: Equivalence + Copy>(
        &mut self,
        data: &mut [T],
        root: usize,
        stage: fn(&mut Self) -> &mut Vec<T>,
    ) -> Result<(), DistError> {
        const OP: &str = "broadcast";
        self.usable(OP)?;
        let root = self.root(OP, root)?;
        let count = count(OP, data.len())?;
        let start = Instant::now();
        let staged = stage(self);
        staged.clear();
        staged.extend_from_slice(data);
        let buf = staged.as_mut_ptr();
        let mut request = null_request();
        // SAFETY: `buf` is a staging buffer of this communicator holding `count` elements
        // of `T`, which `T::equivalent_datatype()` describes; it is neither touched nor
        // freed until the request completes (`fail` leaks it otherwise); `comm` is
        // MPI_COMM_WORLD of the live universe.
        let code = unsafe {
            ffi::MPI_Ibcast(
                buf.cast(),
                count,
                T::equivalent_datatype().as_raw(),
                root,
                self.comm,
                &mut request,
            )
        };
        self.check(OP, code)?;
        self.wait(OP, data.len(), &mut request, start)?;
        data.copy_from_slice(stage(self));
        Ok(())
    }
}

impl Communicator for MpiCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_reduce_sum(&mut self, data: &mut [f32]) -> Result<(), DistError> {
        const OP: &str = "all_reduce_sum";
        self.usable(OP)?;
        let count = count(OP, data.len())?;
        let start = Instant::now();
        self.send.clear();
        self.send.extend_from_slice(data);
        self.recv.clear();
        self.recv.resize(data.len(), 0.0);
        let mut request = null_request();
        // SAFETY: `send` and `recv` hold `count` f32s (MPI_FLOAT) and are neither touched
        // nor freed until the request completes (`fail` leaks them otherwise); the sum
        // operation and MPI_COMM_WORLD are rsmpi's handles of the live universe.
        let code = unsafe {
            ffi::MPI_Iallreduce(
                self.send.as_ptr().cast(),
                self.recv.as_mut_ptr().cast(),
                count,
                f32::equivalent_datatype().as_raw(),
                SystemOperation::sum().as_raw(),
                self.comm,
                &mut request,
            )
        };
        self.check(OP, code)?;
        self.wait(OP, data.len(), &mut request, start)?;
        data.copy_from_slice(&self.recv);
        Ok(())
    }

    fn broadcast_bytes(&mut self, data: &mut [u8], root: usize) -> Result<(), DistError> {
        self.broadcast(data, root, |c| &mut c.bytes)
    }

    fn broadcast_f32(&mut self, data: &mut [f32], root: usize) -> Result<(), DistError> {
        self.broadcast(data, root, |c| &mut c.recv)
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        const OP: &str = "barrier";
        self.usable(OP)?;
        let start = Instant::now();
        let mut request = null_request();
        // SAFETY: a barrier has no buffers; `comm` is MPI_COMM_WORLD of the live universe.
        let code = unsafe { ffi::MPI_Ibarrier(self.comm, &mut request) };
        self.check(OP, code)?;
        self.wait(OP, 0, &mut request, start)
    }
}

impl Drop for MpiCommunicator {
    fn drop(&mut self) {
        if self.broken {
            // MPI_Finalize would wait for the collective that never completed.
            std::mem::forget(self.universe.take());
        }
    }
}

/// A buffer length as MPI's element count.
fn count(op: &'static str, len: usize) -> Result<c_int, DistError> {
    c_int::try_from(len).map_err(|_| DistError::TooLarge { op, len })
}

fn null_request() -> ffi::MPI_Request {
    // SAFETY: reads a constant rsmpi's C shim initialises (MPI_REQUEST_NULL).
    unsafe { ffi::RSMPI_REQUEST_NULL }
}
