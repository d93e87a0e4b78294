//! tensorfit-wgpu: the backend for any GPU, through wgpu (Vulkan, Metal, DX12) and WGSL
//! compute shaders.
//!
//! [`WgpuBackend`] implements [`tensorfit_core::Backend`] with the same semantics as the
//! CPU reference (`tensorfit_cpu::CpuBackend`), op for op: each [`tensorfit_core::Op`]
//! has a kernel of the same name in `src/shaders/*.wgsl` (the file named like the CPU's
//! `kernels/*.rs`), and the host side that launches it in `kernels`, organised like the
//! CPU code so the two can be read side by side. The LSTM keeps cuDNN's structure: one
//! input-projection GEMM, then per step one GEMM and one fused gate kernel, and weight
//! gradients as GEMMs over all steps.
//!
//! Why wgpu: a GTX 750 (the seed report's card) is no longer a CUDA target, and Vulkan
//! reaches it, AMD and Intel GPUs, and Apple's GPUs through Metal. In CI the backend runs
//! on Mesa's software Vulkan driver (lavapipe).
//!
//! How the pieces fit:
//! - `context`: picks the adapter, opens the device with the adapter's own limits, and
//!   turns wgpu's error callbacks into [`tensorfit_core::Error`]s (nothing panics when
//!   there is no adapter or the device is lost);
//! - `capacity` (with the fenced `vk_memory` module, the crate's only `unsafe`): how much
//!   memory the device has, for [`tensorfit_core::DeviceInfo`];
//! - `window`: storage bindings are limited (often to 128 MiB) while buffers and tensors
//!   can be larger, so every kernel launch binds *windows* of the planner's arena buffers
//!   and large work is split into launches whose windows fit;
//! - `record`: launches are recorded into one command encoder, with their parameters in
//!   a uniform ring buffer, and submitted when the host next needs the device;
//! - `shaders`, `pipelines`: the WGSL sources, the table of kernels, pipelines compiled
//!   once and cached.

#![deny(unsafe_code)]

mod assumed;
mod backend;
mod capacity;
mod context;
mod kernels;
mod pipelines;
mod provider;
mod record;
mod shaders;
mod vk_memory;
mod window;

pub use assumed::assumed_info;
pub use backend::WgpuBackend;
pub use context::AdapterSummary;
pub use provider::{WgpuProvider, PROVIDER, SOFTWARE_DRIVER_BYTES};

use tensorfit_core::Error;

/// An [`Error::Backend`] from this backend.
pub(crate) fn backend_error(message: impl Into<String>) -> Error {
    Error::Backend {
        backend: "wgpu",
        message: message.into(),
    }
}
