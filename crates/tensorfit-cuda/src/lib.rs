//! tensorfit-cuda: the backend on NVIDIA GPUs, through the CUDA driver API, kernels
//! compiled at run time by NVRTC, and cuBLAS — all loaded at run time by cudarc, so this
//! crate builds, and the workspace tests pass, on a machine with no CUDA toolkit, no
//! driver and no GPU.
//!
//! [`CudaBackend`] implements [`tensorfit_core::Backend`]. Its kernels are CUDA C files
//! under `src/kernels/` named as the CPU reference's kernels are (`lstm.cu` beside the
//! CPU's `kernels/lstm/`), and the LSTM is organised as cuDNN organises it: one
//! input-projection GEMM over all steps, then per step one GEMM and one fused gate kernel;
//! backward, one fused kernel and one GEMM per step, and the weight gradients as GEMMs over
//! all steps. Every kernel is tested against the CPU backend where a GPU is present.
//!
//! Absence is not an error of the program: [`CudaBackend::new`] and [`probe`] return the
//! reason CUDA cannot be used (`no CUDA driver found (libcuda.so)`, `the CUDA driver is too
//! old for the bindings ...`, `NVRTC 13.0 cannot target sm_50 ...`), never a panic.
//!
//! Unsafe code is fenced: the crate denies it, and only the modules that call the CUDA
//! libraries (`driver`, `blas`, `nvrtc`, `nvml`) allow it, each block with a `// SAFETY:`
//! line stating its invariant.

pub mod assumed;
pub mod backend;
#[allow(unsafe_code)]
mod blas;
#[allow(unsafe_code)]
mod driver;
pub mod kernels;
#[allow(unsafe_code)]
mod nvml;
#[allow(unsafe_code)]
mod nvrtc;
mod provider;

pub use assumed::{assumed_info, GpuModel};
pub use backend::CudaBackend;
pub use nvrtc::{select_arch, NvrtcInfo};
pub use provider::{CudaProvider, PROVIDER};

use tensorfit_core::{Backend, DeviceInfo, Error};

/// An [`Error::Backend`] from this backend.
pub(crate) fn backend_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "cuda",
        message: message.into(),
    }
}

/// The first GPU's figures for `tensorfit devices` and the planner, or why CUDA cannot be
/// used here. Opens a full backend (context, kernels, cuBLAS) to measure its overhead, and
/// releases it; about a second on a first call in a process (NVRTC), less after.
pub fn probe() -> Result<DeviceInfo, String> {
    match CudaBackend::new() {
        Ok(b) => Ok(b.info()),
        Err(Error::Backend { message, .. }) => Err(message),
        Err(other) => Err(other.to_string()),
    }
}

/// How many GPUs the CUDA driver sees (`cuda:0`, `cuda:1`, ...), or why CUDA cannot be
/// used here (no driver, a driver too old, no GPU). Never panics.
pub fn device_count() -> Result<usize, String> {
    std::panic::catch_unwind(|| {
        driver::check()?;
        driver::device_count()
    })
    .unwrap_or_else(|_| Err("the CUDA driver failed while counting devices".into()))
}

/// The NVRTC library on this machine (version and target architectures), or why there is
/// none. Needs no GPU and no driver: NVRTC is only a compiler.
pub fn nvrtc_info() -> Result<NvrtcInfo, String> {
    nvrtc::info()
}

/// Compiles every kernel source with NVRTC for `compute_{arch}` and returns, per source
/// file, its name and PTX. Needs no GPU (used by the test that checks every `.cu` file).
pub fn compile_kernels(arch: i32) -> Result<Vec<(&'static str, String)>, String> {
    nvrtc::info()?;
    let ptx = kernels::compile_all(arch)?;
    Ok(kernels::SOURCES
        .iter()
        .map(|s| s.file)
        .zip(ptx.iter().cloned())
        .collect())
}
