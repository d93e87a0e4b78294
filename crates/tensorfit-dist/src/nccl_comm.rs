//! The all-reduce of an all-CUDA run through NCCL: which path a run's gradients take
//! ([`agree_path`], decided by every rank together). With the `nccl` feature,
//! `NcclCommunicator` (in `nccl.rs`) sums over NCCL in device memory and leaves the other
//! collectives to the host communicator.
//!
//! The bucket still comes from the host (the trainer reads the gradients there, as for
//! MPI): it is copied into one device buffer on the rank's GPU, summed there by NCCL
//! (NVLink or PCIe between the GPUs of a host, its network transports between hosts), and
//! copied back. Keeping the gradients on the device from the backward program to the
//! update is not written yet (docs/distributed.md, What is left).

use crate::{Communicator, DistError};

/// How a run's gradient bucket is summed over the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllReducePath {
    /// NCCL on every rank's GPU.
    Nccl,
    /// MPI on the host; with why NCCL is not used (`None`: not every rank is on CUDA,
    /// the usual case that needs no word).
    Host(Option<String>),
}

/// The path for `ranks` ranks of which `cuda` train on CUDA and `nccl` of those can use
/// NCCL: NCCL exactly when every rank is on CUDA with NCCL; `first_reason` is a rank's
/// reason NCCL is unavailable, if one gave it.
pub fn choose_path(
    ranks: usize,
    cuda: usize,
    nccl: usize,
    first_reason: Option<String>,
) -> AllReducePath {
    match (cuda == ranks, nccl == ranks) {
        (true, true) if ranks > 0 => AllReducePath::Nccl,
        (true, _) => AllReducePath::Host(Some(format!(
            "every rank trains on CUDA, but {} of {ranks} cannot use NCCL{}; the gradients are averaged over MPI on the host",
            ranks - nccl,
            first_reason.map_or(String::new(), |r| format!(" ({r})"))
        ))),
        (false, _) => AllReducePath::Host(None),
    }
}

/// Decides the path on every rank alike: one all-reduce of (on CUDA, NCCL usable) over
/// `comm`. `on_cuda`: this rank trains on a CUDA device. The reason NCCL is unavailable
/// is this rank's own (the others learn only how many ranks lack it).
pub fn agree_path(comm: &mut dyn Communicator, on_cuda: bool) -> Result<AllReducePath, DistError> {
    let usable = if on_cuda { nccl_usable() } else { Ok(()) };
    let mine = [
        f32::from(u8::from(on_cuda)),
        f32::from(u8::from(on_cuda && usable.is_ok())),
    ];
    let mut counts = mine;
    comm.all_reduce_sum(&mut counts)?;
    let reason = usable.err().map(|e| e.to_string());
    Ok(choose_path(
        comm.size(),
        counts[0] as usize,
        counts[1] as usize,
        reason,
    ))
}

/// Whether NCCL can be used on this rank: its library loads (the `nccl` feature), or why
/// not.
fn nccl_usable() -> Result<(), DistError> {
    #[cfg(feature = "nccl")]
    {
        crate::nccl::version().map(|_| ())
    }
    #[cfg(not(feature = "nccl"))]
    {
        Err(DistError::NcclUnavailable(
            "this build has no NCCL (tensorfit-dist's `nccl` feature, which the `cuda` feature turns on)".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solo;

    #[test]
    fn every_rank_on_cuda_with_nccl_sums_over_nccl_and_any_other_rank_keeps_the_host_path() {
        assert_eq!(choose_path(4, 4, 4, None), AllReducePath::Nccl);
        assert_eq!(choose_path(1, 1, 1, None), AllReducePath::Nccl);
        // A CPU or wgpu rank among CUDA ones: MPI on the host, without a word.
        assert_eq!(choose_path(3, 2, 2, None), AllReducePath::Host(None));
        assert_eq!(choose_path(2, 0, 0, None), AllReducePath::Host(None));
    }

    #[test]
    fn all_cuda_ranks_without_nccl_keep_the_host_path_and_say_why() {
        let why = "NCCL unavailable: no NCCL library found (libnccl.so)".to_string();
        let AllReducePath::Host(Some(said)) = choose_path(2, 2, 1, Some(why.clone())) else {
            panic!("all-CUDA ranks without NCCL must keep the host path with a reason");
        };
        assert!(
            said.contains("1 of 2 cannot use NCCL") && said.contains(&why),
            "{said}"
        );
    }

    #[test]
    fn a_cpu_process_agrees_on_the_host_path_without_touching_cuda() {
        assert_eq!(
            agree_path(&mut Solo, false).unwrap(),
            AllReducePath::Host(None)
        );
    }

    #[test]
    fn a_cuda_process_without_nccl_here_is_told_why_and_keeps_the_host_path() {
        match agree_path(&mut Solo, true).unwrap() {
            AllReducePath::Nccl => println!("skipped: NCCL is usable here"),
            AllReducePath::Host(why) => {
                let why = why.expect("all-CUDA ranks without NCCL are told why");
                assert!(why.contains("NCCL unavailable"), "{why}");
            }
        }
    }
}
