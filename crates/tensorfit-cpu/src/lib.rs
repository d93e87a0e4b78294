//! tensorfit-cpu: the reference backend, on the CPU.
//!
//! [`CpuBackend`] implements [`tensorfit_core::Backend`] with buffers that are plain
//! `Vec<f32>`s, GEMMs through `ndarray::linalg::general_mat_mul` (matrixmultiply's
//! threaded sgemm underneath) or, on CPUs with AVX-512, tensorfit's own packed
//! micro-kernels (`kernels::gemm_fast`), and rayon for the wide fused passes.
//!
//! Why it exists: it is the backend that runs everywhere, the last fallback of a session
//! whose GPU is too small, and above all the *reference* every GPU kernel is tested
//! against. So its kernels are written to be read: one file per op family under
//! [`kernels`], one function per [`tensorfit_core::Op`] with the op's kernel name
//! (`Op::name`), and the LSTM organised exactly as cuDNN organises it (one GEMM for the
//! input projection of all steps, then one GEMM and one fused pass per step), so that a
//! GPU kernel and this code can be compared step by step.
//!
//! Kernels run on a pool of threads of their own (`threads`), whose threads flush
//! subnormal floats to zero so that long sequences do not fall off a speed cliff; a
//! kernel too small to split runs on the caller's thread, with the same mode set for its
//! duration. The packed weights of inference calls of recurrent layers are kept from one
//! call to the next (`kernels::packs`) until the backend writes or frees them.
//!
//! The crate's only `unsafe` is the instructions that read and set that mode, fenced in the
//! `denormals` module with `// SAFETY:` lines. Tensors that share an arena buffer are
//! handed to kernels as disjoint slices by the `regions` module, which splits each
//! buffer with `split_at_mut`.

#![deny(unsafe_code)]

pub mod backend;
pub mod denormals;
pub mod host_memory;
pub mod kernel_memory;
pub mod kernels;
mod profile;
mod provider;
mod regions;
pub mod threads;

pub use backend::{assumed_info, CpuBackend};
pub use provider::{CpuProvider, HARDWARE, PROVIDER};

use tensorfit_core::Error;

/// An [`Error::Backend`] from this backend.
pub(crate) fn backend_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "cpu",
        message: message.into(),
    }
}
