//! [`CudaBackend`]: buffers in GPU memory with exact byte accounting, and one exhaustive
//! dispatch from [`Op`] to the kernels.
//!
//! **Opening** checks, in order and without touching anything that could panic: the
//! driver library and every entry point used (`no CUDA driver found (libcuda.so)`, `the
//! CUDA driver is too old for the bindings ...`), NVRTC and cuBLAS likewise, that the
//! driver sees a GPU, and that NVRTC can target its architecture (`NVRTC 13.0 cannot
//! target sm_50 ...`). Then it creates the context and stream, compiles the kernels
//! (cached per architecture in the process), creates the cuBLAS handle with its workspace
//! and the status word. Any failure is an [`Error::Backend`] whose message is the reason.
//!
//! **Accounting** is the [`Ledger`]'s, as on every backend: the bytes asked for in
//! [`Backend::allocate`] and not yet freed, so a plan's estimate can be compared with a
//! measured peak to the byte. Memory the backend holds
//! besides (context, cuBLAS workspace, loaded modules, status word) is
//! [`DeviceInfo::overhead_bytes`], measured once at creation as the drop in the device's
//! free memory from before the context to after setup. "Before the context" needs NVML
//! (the driver cannot report free memory without a context); where NVML is missing, the
//! drop is measured from just after the context was created, which leaves the context
//! itself out (a few hundred MB on a large GPU). cuBLAS may load a few more kernels on
//! first use of a new GEMM shape (lazy module loading); that is not in the figure.
//!
//! **Out of memory** is an error, not an abort: a request beyond the user's cap, or one the
//! driver refuses with `CUDA_ERROR_OUT_OF_MEMORY`, returns [`Error::OutOfMemory`] with
//! device `cuda`, so a session can fall back to another device.
//!
//! **Execution** has the ledger check the call (shapes against [`Op::infer_shapes`],
//! bounds, and that no output overlaps another view) before anything is launched, then
//! dispatches to the launcher named `Op::name` (`kernels::Gpu` implements
//! `tensorfit_core::OpKernels`). Everything runs in order on one stream; `execute` returns
//! once the work is queued, `synchronize` and `read` wait for it. Bad labels found by the
//! softmax kernels are reported as [`Error::Input`] by the next `synchronize` or `read`.

use std::fmt;

use tensorfit_core::{
    dispatch, Backend, BufferId, Capacity, DType, DeviceInfo, DeviceKind, Error, Ledger,
    MemoryInfo, Op, Result, TensorView,
};

use crate::blas::{self, Blas};
use crate::driver::{self, describe, DevPtr, Device, DeviceMemory};
use crate::kernels::gemm::gemm;
use crate::kernels::{self, Gpu, Kernels};
use crate::{backend_error, nvml, nvrtc};

/// Alignment of every buffer (cuMemAlloc gives at least 256 bytes) and the alignment the
/// planner should keep view offsets at, so that cuBLAS gets aligned operands.
pub const ALIGNMENT_BYTES: u64 = 256;

/// What was learnt about the device when the backend was opened.
#[derive(Debug, Clone)]
struct Facts {
    ordinal: usize,
    name: String,
    compute_capability: (i32, i32),
    arch: i32,
    driver_version: i32,
    nvrtc_version: (i32, i32),
    total_bytes: u64,
    overhead_bytes: u64,
    overhead_measured_with: &'static str,
}

/// The CUDA backend: one GPU, one stream, NVRTC-compiled kernels and cuBLAS.
pub struct CudaBackend {
    // Field order is drop order: buffers and the status word are freed first, then the
    // cuBLAS handle and its workspace, then the device (modules, stream, context).
    /// Each buffer holds the bytes asked for rounded up to whole `f32`s.
    buffers: Ledger<DeviceMemory>,
    /// Two i32s where kernels report bad user data (see `kernels/common.cuh`).
    status: DeviceMemory,
    kernels: Kernels,
    blas: Blas,
    device: Device,
    facts: Facts,
}

impl fmt::Debug for CudaBackend {
    // why: the derived form would print every buffer and raw driver handles.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.facts.name)
            .field("ordinal", &self.facts.ordinal)
            .field("sm", &self.facts.compute_capability)
            .field("buffers", &self.buffers.len())
            .field("allocated", &self.buffers.allocated())
            .field("peak", &self.buffers.peak())
            .field("cap", &self.buffers.cap())
            .field("overhead_bytes", &self.facts.overhead_bytes)
            .finish()
    }
}

/// The reason a device is unavailable, as the facade shows it.
fn unavailable(message: String) -> Error {
    backend_error(message)
}

impl CudaBackend {
    /// The first GPU, limited only by its memory. An error (never a panic) says why CUDA
    /// cannot be used on this machine.
    pub fn new() -> Result<Self> {
        Self::open(0, None)
    }

    /// The first GPU, refusing to hold more than `bytes` of allocations at once (to
    /// rehearse a smaller device, or to share the GPU).
    pub fn with_capacity_cap(bytes: u64) -> Result<Self> {
        Self::open(0, Some(bytes))
    }

    /// GPU `ordinal` (as the driver numbers them), with an optional cap.
    pub fn open(ordinal: usize, cap: Option<u64>) -> Result<Self> {
        // The checks in `open_unguarded` keep cudarc from panicking; this is the last net
        // should a library still misbehave, so that a broken CUDA installation reads as
        // "unavailable" rather than taking the process down.
        match std::panic::catch_unwind(|| Self::open_unguarded(ordinal, cap)) {
            Ok(result) => result.map_err(unavailable),
            Err(panic) => {
                let what = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(unavailable(format!(
                    "the CUDA libraries failed while opening the device: {what}"
                )))
            }
        }
    }

    fn open_unguarded(ordinal: usize, cap: Option<u64>) -> std::result::Result<Self, String> {
        let driver_version = driver::check()?;
        let nvrtc_info = nvrtc::info()?;
        blas::check()?;
        let uuid = driver::device_uuid(ordinal)?;
        let nvml_before = nvml::free_bytes(&uuid);

        let mut device = Device::open(ordinal)?;
        let cc = device.compute_capability().map_err(describe)?;
        let arch = nvrtc::select_arch(cc, &nvrtc_info)?;
        let name = device.name().map_err(describe)?;
        let (free_after_context, total_bytes) = device.mem_info().map_err(describe)?;

        let ptx = kernels::compile_all(arch)?;
        let kernels = Kernels::load(&mut device, &ptx)?;
        let workspace = crate::assumed::cublas_workspace_bytes(cc) as usize;
        let blas = Blas::new(&device, workspace)?;
        let status = device
            .alloc_zeroed(crate::assumed::STATUS_BYTES as usize)
            .map_err(describe)?;
        warm_up(&device, &blas, &kernels, status.ptr())?;
        device.synchronize().map_err(describe)?;

        let (free_after_setup, _) = device.mem_info().map_err(describe)?;
        let (overhead_bytes, overhead_measured_with) = match (nvml_before, nvml::free_bytes(&uuid))
        {
            (Some(before), Some(after)) => (before.saturating_sub(after), "NVML"),
            _ => (
                free_after_context.saturating_sub(free_after_setup),
                "the driver, from after the context was created",
            ),
        };
        Ok(CudaBackend {
            buffers: Ledger::new("cuda", cap),
            status,
            kernels,
            blas,
            device,
            facts: Facts {
                ordinal,
                name,
                compute_capability: cc,
                arch,
                driver_version,
                nvrtc_version: nvrtc_info.version,
                total_bytes,
                overhead_bytes,
                overhead_measured_with,
            },
        })
    }

    /// A line for logs: device, architecture and library versions.
    pub fn describe(&self) -> String {
        let f = &self.facts;
        format!(
            "cuda:{} {} (sm_{}{}, kernels compiled for compute_{}; driver CUDA {}, NVRTC {}.{}; overhead {} bytes measured with {})",
            f.ordinal,
            f.name,
            f.compute_capability.0,
            f.compute_capability.1,
            f.arch,
            driver::version_text(f.driver_version),
            f.nvrtc_version.0,
            f.nvrtc_version.1,
            f.overhead_bytes,
            f.overhead_measured_with
        )
    }

    /// The device's memory before the user's cap: the driver's total and free figures.
    fn device_memory(&self) -> Capacity {
        Capacity {
            total: Some(self.facts.total_bytes),
            free: self.device.mem_info().ok().map(|(free, _)| free),
        }
    }

    /// Free bytes now: the driver's free memory, and no more than is left of the cap.
    fn free_now(&self) -> Option<u64> {
        self.buffers.capacity(self.device_memory()).1
    }

    fn gpu(&self) -> Gpu<'_> {
        Gpu {
            device: &self.device,
            blas: &self.blas,
            kernels: &self.kernels,
            status: self.status.ptr(),
        }
    }

    /// The device address of a view the ledger has checked.
    fn address(&self, view: &TensorView) -> Result<DevPtr> {
        Ok(self.buffers.get(view.buffer)?.ptr().add(view.offset))
    }

    /// The device address of `view`, checked against `len` host elements.
    fn transfer(&self, view: &TensorView, len: usize) -> Result<DevPtr> {
        self.buffers.check_transfer(view, len)?;
        self.address(view)
    }

    /// Reports (and clears) an error a kernel left in the status word.
    fn check_status(&mut self) -> Result<()> {
        let mut word = [0i32; 2];
        self.device
            .read(self.status.ptr(), &mut word)
            .map_err(|e| device_error("reading the status word", e))?;
        if word[0] == 0 {
            return Ok(());
        }
        self.device
            .write_i32(self.status.ptr(), &[0, 0])
            .map_err(|e| device_error("clearing the status word", e))?;
        let (code, at) = (word[0], word[1]);
        // The codes of common.cuh: 2 a bad token id, 1 a bad label.
        Err(Error::Input(match code {
            2 => format!("token id at position {at} (of the flat list of ids) is not a whole number inside the vocabulary (found by a gather on the GPU)"),
            _ => format!("label of row {at} is not a class index (found by softmax cross-entropy on the GPU)"),
        }))
    }
}

/// Runs every kind of GEMM the LSTM uses once on a small scratch buffer, so that cuBLAS
/// has loaded those kernels before the overhead is measured.
fn warm_up(
    device: &Device,
    blas: &Blas,
    kernels: &Kernels,
    status: DevPtr,
) -> std::result::Result<(), String> {
    const N: usize = 16;
    let scratch = device
        .alloc_zeroed(3 * N * N * DType::F32.size_bytes())
        .map_err(describe)?;
    let g = Gpu {
        device,
        blas,
        kernels,
        status,
    };
    let (a, b, c) = (
        scratch.ptr(),
        scratch.ptr().add(N * N),
        scratch.ptr().add(2 * N * N),
    );
    for trans in [(false, true), (false, false), (true, false)] {
        gemm(&g, trans, (N, N, N), 1.0, a, b, 1.0, c).map_err(|e| e.to_string())?;
    }
    device.synchronize().map_err(describe)
}

/// A driver failure during `what`, as a backend error.
fn device_error(what: &str, e: cudarc::driver::DriverError) -> Error {
    backend_error(format!("{what}: {}", describe(e)))
}

impl Backend for CudaBackend {
    fn name(&self) -> String {
        format!("cuda:{}", self.facts.ordinal)
    }

    fn info(&self) -> DeviceInfo {
        let device = self.device_memory();
        let (total, free) = self.buffers.capacity(device);
        DeviceInfo {
            kind: DeviceKind::Cuda,
            name: self.facts.name.clone(),
            total_bytes: total,
            free_bytes: free,
            capacity_source: if self.buffers.cap_binds(device.total) {
                "user cap".to_string()
            } else {
                "driver".to_string()
            },
            software: false,
            // cuMemAlloc takes any size the device can hold.
            max_buffer_bytes: total,
            alignment_bytes: ALIGNMENT_BYTES,
            overhead_bytes: self.facts.overhead_bytes,
        }
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        // The cap and the device's size are checked here; the driver decides the rest.
        let device = Capacity {
            free: None,
            ..self.device_memory()
        };
        self.buffers
            .check_fits(bytes, self.buffers.available(device))?;
        let oom = |b: &Self| b.buffers.out_of_memory(bytes, b.free_now().unwrap_or(0));
        let elements = usize::try_from(bytes.div_ceil(DType::F32.size_bytes() as u64))
            .map_err(|_| oom(self))?;
        match self
            .device
            .alloc_zeroed(elements.saturating_mul(DType::F32.size_bytes()))
        {
            Ok(mem) => Ok(self.buffers.insert(mem, bytes)),
            Err(e) if driver::is_out_of_memory(&e) => Err(oom(self)),
            Err(e) => Err(device_error("cuMemAlloc", e)),
        }
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        self.buffers.remove(buffer).map(drop)
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        let ptr = self.transfer(view, data.len())?;
        self.device
            .write(ptr, data)
            .map_err(|e| device_error("copy to the GPU", e))
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        let ptr = self.transfer(view, out.len())?;
        self.device
            .read(ptr, out)
            .map_err(|e| device_error("copy from the GPU", e))?;
        self.check_status()
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        let call = self.buffers.check_call(op, inputs, outputs)?;
        let addresses = |views: &[TensorView]| -> Result<Vec<DevPtr>> {
            views.iter().map(|v| self.address(v)).collect()
        };
        let (ins, outs) = (addresses(inputs)?, addresses(outputs)?);
        dispatch(&mut self.gpu(), &call, ins, outs)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.device
            .synchronize()
            .map_err(|e| device_error("synchronize", e))?;
        self.check_status()
    }

    fn memory(&self) -> MemoryInfo {
        self.buffers.memory(self.device_memory())
    }

    fn reset_peak(&mut self) {
        self.buffers.reset_peak();
    }
}
