//! NCCL for all-CUDA runs: whether it can be used here, and its unique id shared over
//! the host communicator (rank 0 creates it, every rank needs it to join).
//!
//! cudarc's `nccl` bindings load `libnccl.so` at run time like the rest of CUDA, and
//! panic when it is missing, so [`version`] checks the CUDA driver (through
//! tensorfit-cuda, the one place that knows how) and the library before the first call.
//!
//! One of the crate's two modules allowed `unsafe`: every block states its invariant in a
//! `// SAFETY:` line.
use crate::{Communicator, DistError};

/// Bytes of NCCL's unique id (`NCCL_UNIQUE_ID_BYTES`).
pub const ID_BYTES: usize = 128;

/// The id every rank passes to `ncclCommInitRank` to join one communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclId(pub [u8; ID_BYTES]);

impl NcclId {
    /// As cudarc's `nccl::Id` takes it.
    pub fn internal(&self) -> [std::ffi::c_char; ID_BYTES] {
        self.0.map(|b| b as std::ffi::c_char)
    }
}

/// NCCL's version code (`22703` for 2.27.3), or why NCCL cannot be used here (no CUDA
/// driver, no GPU, no `libnccl.so`). Never panics.
pub fn version() -> Result<i32, DistError> {
    let unavailable = DistError::NcclUnavailable;
    match tensorfit_cuda::device_count() {
        Err(why) => return Err(unavailable(why)),
        Ok(0) => return Err(unavailable("the CUDA driver sees no GPU".into())),
        Ok(_) => {}
    }
    // SAFETY: only tries to dlopen the candidate library names; no preconditions.
    if !unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Err(unavailable("no NCCL library found (libnccl.so)".into()));
    }
    std::panic::catch_unwind(cudarc::nccl::result::get_nccl_version)
        .map_err(|_| unavailable("the NCCL library lacks ncclGetVersion".into()))?
        .map_err(|e| unavailable(format!("ncclGetVersion failed: {e:?}")))
}

/// The unique id of a new NCCL communicator: created on `root` and broadcast over `comm`.
/// When `root` cannot create it, every rank returns [`DistError::NcclUnavailable`] with
/// root's reason (no rank is left waiting).
pub fn unique_id(comm: &mut dyn Communicator, root: usize) -> Result<NcclId, DistError> {
    share_id(comm, root, || {
        version().map_err(|e| match e {
            DistError::NcclUnavailable(why) => why,
            other => other.to_string(),
        })?;
        let id = std::panic::catch_unwind(cudarc::nccl::result::get_uniqueid)
            .map_err(|_| "the NCCL library lacks ncclGetUniqueId".to_string())?
            .map_err(|e| format!("ncclGetUniqueId failed: {e:?}"))?;
        Ok(id.internal.map(|c| c as u8))
    })
}

/// Broadcasts the id `make` creates on `root`, or its failure: one status byte, then the
/// id or the reason's first [`ID_BYTES`] bytes. [`unique_id`] with NCCL's maker; the
/// distributed tests, which have no NCCL, pass a made-up id.
pub fn share_id(
    comm: &mut dyn Communicator,
    root: usize,
    make: impl FnOnce() -> Result<[u8; ID_BYTES], String>,
) -> Result<NcclId, DistError> {
    let mut message = [0u8; 1 + ID_BYTES];
    if comm.rank() == root {
        match make() {
            Ok(id) => {
                message[0] = 1;
                message[1..].copy_from_slice(&id);
            }
            Err(why) => {
                let n = why.len().min(ID_BYTES);
                message[1..=n].copy_from_slice(&why.as_bytes()[..n]);
            }
        }
    }
    comm.broadcast_bytes(&mut message, root)?;
    let mut id = [0u8; ID_BYTES];
    id.copy_from_slice(&message[1..]);
    if message[0] == 1 {
        Ok(NcclId(id))
    } else {
        let why = String::from_utf8_lossy(&id);
        Err(DistError::NcclUnavailable(format!(
            "on rank {root}: {}",
            why.trim_end_matches('\0')
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solo;

    #[test]
    fn without_a_cuda_driver_nccl_is_unavailable_with_the_drivers_reason() {
        match tensorfit_cuda::device_count() {
            Err(why) => {
                let err = version().unwrap_err();
                assert_eq!(err.to_string(), format!("NCCL unavailable: {why}"));
                let err = unique_id(&mut Solo, 0).unwrap_err();
                assert_eq!(
                    err.to_string(),
                    format!("NCCL unavailable: on rank 0: {why}")
                );
            }
            Ok(n) => println!("skipped: a CUDA driver with {n} GPU(s) is present"),
        }
    }

    /// On a machine with a GPU and `libnccl.so` (`TENSORFIT_REQUIRE=nccl` makes its
    /// absence a failure): the library loads and makes a unique id.
    #[test]
    fn where_nccl_is_present_it_makes_a_unique_id() {
        match version() {
            Ok(v) => {
                let id = unique_id(&mut Solo, 0).unwrap();
                assert!(id.0.iter().any(|&b| b != 0), "NCCL {v} made an all-zero id");
                println!("nccl: version {v}, unique id made");
            }
            Err(e) => tensorfit_testing::skip("unique id", "nccl", &e.to_string()),
        }
    }

    #[test]
    fn roots_id_reaches_the_caller_and_its_failure_is_an_error() {
        let made = std::array::from_fn(|i| i as u8);
        assert_eq!(share_id(&mut Solo, 0, || Ok(made)).unwrap(), NcclId(made));
        let err = share_id(&mut Solo, 0, || Err("x".repeat(300))).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("NCCL unavailable: on rank 0: {}", "x".repeat(ID_BYTES))
        );
    }
}
