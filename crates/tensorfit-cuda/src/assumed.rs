//! The figures this backend would report for a GPU that is not here, so that a job can be
//! planned for hardware the user does not have (`tensorfit plan --assume h100`).
//!
//! Alignment, largest buffer and the cuBLAS workspace are this backend's own choices and
//! are the same numbers [`CudaBackend`](crate::CudaBackend) uses. The CUDA context cannot
//! be known without the GPU: the backend measures it (NVML) when it opens a device, and
//! here it is estimated from the GPU's number of streaming multiprocessors, which is what
//! it scales with (the driver reserves each resident thread's stack). The model is a line
//! through two published measurements of a bare context with lazy module loading
//! (llama.cpp PR 23604, 2026: an RTX 4060 Ti, 34 SMs, 107 MiB; an RTX PRO 6000, 188 SMs,
//! 555 MiB): 8 MiB plus 2.9 MiB per SM. Not modelled separately: our own kernel modules
//! and the cuBLAS kernels loaded at warm-up, which the backend's measurement includes.
//! Nobody has yet compared this estimate with the backend's measurement on a real GPU.

use tensorfit_core::{DeviceInfo, DeviceKind};

use crate::backend::ALIGNMENT_BYTES;

pub use tensorfit_core::GpuModel;

/// The cuBLAS workspace the backend allocates: cuBLAS's own default, 32 MiB from Hopper
/// (compute capability 9) on, 4 MiB before.
pub fn cublas_workspace_bytes(compute_capability: (i32, i32)) -> u64 {
    if compute_capability.0 >= 9 {
        32 << 20
    } else {
        4 << 20
    }
}

/// Estimated bytes of a CUDA context on `gpu` (see the module documentation).
pub fn context_bytes(gpu: GpuModel) -> u64 {
    const FIXED: u64 = 8 << 20;
    // 2.9 MiB, in bytes.
    const PER_SM: u64 = 29 * (1 << 20) / 10;
    FIXED + PER_SM * u64::from(gpu.sms)
}

/// The status word kernels report bad labels in.
pub(crate) const STATUS_BYTES: u64 = 8;

/// The [`DeviceInfo`] the backend would report on an idle `gpu` of `total_bytes` named
/// `name`: its overhead (context, cuBLAS workspace, status word) is already taken from
/// the free memory, as the driver reports it once the backend has opened the device.
pub fn assumed_info(name: String, total_bytes: u64, gpu: GpuModel) -> DeviceInfo {
    let overhead =
        context_bytes(gpu) + cublas_workspace_bytes(gpu.compute_capability) + STATUS_BYTES;
    DeviceInfo {
        kind: DeviceKind::Cuda,
        name,
        total_bytes,
        free_bytes: Some(total_bytes.saturating_sub(overhead)),
        capacity_source: "assumed".into(),
        software: false,
        max_buffer_bytes: total_bytes,
        alignment_bytes: ALIGNMENT_BYTES,
        overhead_bytes: overhead,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_estimate_passes_through_both_published_measurements() {
        let mib = |sms| {
            context_bytes(GpuModel {
                sms,
                compute_capability: (8, 9),
            }) as f64
                / (1 << 20) as f64
        };
        assert!((mib(34) - 107.0).abs() < 3.0, "{}", mib(34));
        assert!((mib(188) - 555.0).abs() < 3.0, "{}", mib(188));
    }

    #[test]
    fn an_assumed_gpu_has_its_overhead_taken_from_free_memory() {
        let h100 = GpuModel {
            sms: 132,
            compute_capability: (9, 0),
        };
        let info = assumed_info("H100".into(), 80 << 30, h100);
        assert_eq!(
            info.overhead_bytes,
            context_bytes(h100) + (32 << 20) + STATUS_BYTES
        );
        assert_eq!(info.free_bytes, Some((80 << 30) - info.overhead_bytes));
        assert_eq!(info.alignment_bytes, ALIGNMENT_BYTES);
    }
}
