//! The interface every rank's training step talks to, and its one-process implementation.
use crate::DistError;

/// Host-side collectives among the ranks of one run. Every rank calls the same
/// collectives in the same order with buffers of the same length, and gets bitwise
/// identical results (for MPI, see `mpi_comm.rs` on why and how far that holds).
pub trait Communicator: std::fmt::Debug {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn size(&self) -> usize;

    /// Replaces `data` on every rank by the element-wise sum over all ranks.
    fn all_reduce_sum(&mut self, data: &mut [f32]) -> Result<(), DistError>;

    /// Copies `root`'s `data` into every other rank's `data`.
    fn broadcast_bytes(&mut self, data: &mut [u8], root: usize) -> Result<(), DistError>;

    /// Copies `root`'s `data` into every other rank's `data`.
    fn broadcast_f32(&mut self, data: &mut [f32], root: usize) -> Result<(), DistError>;

    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<(), DistError>;
}

/// One process, no MPI: rank 0 of 1. Every collective is the identity.
#[derive(Debug, Default, Clone, Copy)]
pub struct Solo;

impl Solo {
    fn check_root(op: &'static str, root: usize) -> Result<(), DistError> {
        if root == 0 {
            Ok(())
        } else {
            Err(DistError::BadRoot { op, root, size: 1 })
        }
    }
}

impl Communicator for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_reduce_sum(&mut self, _data: &mut [f32]) -> Result<(), DistError> {
        Ok(())
    }

    fn broadcast_bytes(&mut self, _data: &mut [u8], root: usize) -> Result<(), DistError> {
        Self::check_root("broadcast", root)
    }

    fn broadcast_f32(&mut self, _data: &mut [f32], root: usize) -> Result<(), DistError> {
        Self::check_root("broadcast", root)
    }

    fn barrier(&mut self) -> Result<(), DistError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_is_rank_zero_of_one_and_leaves_buffers_alone() {
        let mut solo = Solo;
        assert_eq!((solo.rank(), solo.size()), (0, 1));
        let mut v = vec![1.5f32, -2.0];
        solo.all_reduce_sum(&mut v).unwrap();
        solo.broadcast_f32(&mut v, 0).unwrap();
        solo.barrier().unwrap();
        assert_eq!(v, [1.5, -2.0]);
    }

    #[test]
    fn a_broadcast_from_a_rank_that_does_not_exist_is_refused() {
        let err = Solo.broadcast_bytes(&mut [0u8; 4], 1).unwrap_err();
        assert!(
            err.to_string().contains("root rank 1 does not exist"),
            "{err}"
        );
    }
}
