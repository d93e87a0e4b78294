//! The threads that run the CPU kernels: one process-wide rayon pool whose threads flush
//! subnormal floats to zero (see `denormals.rs` for why).
//!
//! Every kernel runs inside [`kernel_pool`]'s `install`, so its serial parts and all of
//! its parallel parts (`par_iter`, `rayon::current_num_threads`) run on these threads
//! and nowhere else; the caller's thread only waits. The pool is built once per process
//! and shared by every [`crate::CpuBackend`], so backends made and dropped (tests, a
//! session's fallback) do not multiply threads. Its size follows rayon's rule
//! (`RAYON_NUM_THREADS`, else one thread per logical CPU), as the global pool's does.
//! Opening the CPU device (its `info` names the thread count) builds the pool, so its
//! threads exist before anything is planned.

use std::sync::OnceLock;

use rayon::{ThreadPool, ThreadPoolBuilder};
use tensorfit_core::Result;

use crate::{backend_error, denormals};

static POOL: OnceLock<std::result::Result<ThreadPool, String>> = OnceLock::new();

/// The kernel pool, built on first use. An error if the operating system refused to
/// start its threads (then every kernel call reports it).
pub fn kernel_pool() -> Result<&'static ThreadPool> {
    POOL.get_or_init(|| {
        ThreadPoolBuilder::new()
            .thread_name(|i| format!("tensorfit-cpu-{i}"))
            .start_handler(|_| {
                denormals::flush_to_zero();
            })
            .build()
            .inspect(|pool| {
                // Each thread takes its allocator arena now (glibc gives a thread its own
                // on its first allocation, reserving 64 MiB of address space), so that the
                // process's memory read before a plan (`ulimit -v` counts its address
                // space) already holds them.
                pool.broadcast(|_| drop(std::hint::black_box(Box::new(0u64))));
            })
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| backend_error(format!("cannot start the kernel threads: {e}")))
}

/// The number of threads kernels run on (1 if the pool cannot be built).
pub fn kernel_threads() -> usize {
    kernel_pool().map_or(1, ThreadPool::current_num_threads)
}

/// Whether the kernel threads flush subnormals to zero on this target.
pub fn kernels_flush_to_zero() -> bool {
    kernel_pool().is_ok_and(|pool| {
        pool.broadcast(|_| denormals::flushing_to_zero())
            .iter()
            .all(|&f| f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn every_kernel_thread_flushes_subnormals_to_zero() {
        assert!(kernels_flush_to_zero());
        let pool = kernel_pool().unwrap();
        let products =
            pool.broadcast(|_| std::hint::black_box(1e-20f32) * std::hint::black_box(1e-20f32));
        assert_eq!(products, vec![0.0; pool.current_num_threads()]);
    }
}
