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
//! **Accounting**: `allocated` is the sum of the byte sizes asked for in
//! [`Backend::allocate`] and not yet freed, `peak` its maximum, as on the CPU, so a plan's
//! estimate can be compared with a measured peak to the byte. Memory the backend holds
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
//! **Execution** validates the views against [`Op::infer_shapes`] and the buffers (bounds,
//! and that no output overlaps another view) before anything is launched, then calls the
//! launcher named `Op::name`. Everything runs in order on one stream; `execute` returns
//! once the work is queued, `synchronize` and `read` wait for it. Bad labels found by the
//! softmax kernels are reported as [`Error::Input`] by the next `synchronize` or `read`.

use std::fmt;

use tensorfit_core::{
    args, Backend, BufferId, DeviceInfo, DeviceKind, Error, MemoryInfo, Op, Result, TensorView,
};

use crate::blas::{self, Blas};
use crate::driver::{self, describe, DevPtr, Device, DeviceMemory};
use crate::kernels::adam::adam_update;
use crate::kernels::batchnorm::{
    batchnorm_backward, batchnorm_forward, batchnorm_stats_update, BatchNormBackwardInputs,
    BatchNormStats,
};
use crate::kernels::elementwise::{
    activation_backward, activation_forward, binary, copy, fill, scatter_time, slice_time,
    sum_to_shape,
};
use crate::kernels::gemm::{gemm, matmul};
use crate::kernels::lstm::{
    lstm_backward, lstm_forward, LstmBackwardInputs, LstmBackwardOutputs, LstmForwardInputs,
    LstmForwardOutputs,
};
use crate::kernels::softmax::{softmax_cross_entropy_backward, softmax_cross_entropy_forward};
use crate::kernels::{self, Gpu, Kernels};
use crate::{backend_error, nvml, nvrtc};

/// Alignment of every buffer (cuMemAlloc gives at least 256 bytes) and the alignment the
/// planner should keep view offsets at, so that cuBLAS gets aligned operands.
pub const ALIGNMENT_BYTES: u64 = 256;

/// One allocation: the memory, the bytes asked for (the accounting uses these) and the
/// number of whole f32s it holds.
#[derive(Debug)]
struct Buffer {
    mem: DeviceMemory,
    bytes: u64,
    elements: usize,
}

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
    /// Buffers indexed by [`BufferId`]; `None` once freed. Ids are never reused.
    buffers: Vec<Option<Buffer>>,
    allocated: u64,
    peak: u64,
    /// The user's cap on this backend's allocations, if any.
    cap: Option<u64>,
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
            .field("buffers", &self.buffers.iter().flatten().count())
            .field("allocated", &self.allocated)
            .field("peak", &self.peak)
            .field("cap", &self.cap)
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
        // cuBLAS's own default: 32 MiB from Hopper on, 4 MiB before.
        let workspace = if cc.0 >= 9 { 32 << 20 } else { 4 << 20 };
        let blas = Blas::new(&device, workspace)?;
        let status = device.alloc_zeroed(8).map_err(describe)?;
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
            buffers: Vec::new(),
            allocated: 0,
            peak: 0,
            cap,
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

    /// The capacity: the driver's total, or the cap if smaller.
    fn capacity(&self) -> u64 {
        match self.cap {
            Some(cap) => cap.min(self.facts.total_bytes),
            None => self.facts.total_bytes,
        }
    }

    /// Free bytes now: the driver's free memory, and no more than is left of the cap.
    fn free_now(&self) -> Option<u64> {
        let driver_free = self.device.mem_info().ok().map(|(free, _)| free);
        match self.cap {
            Some(cap) => {
                let left = cap.saturating_sub(self.allocated);
                Some(driver_free.map_or(left, |f| f.min(left)))
            }
            None => driver_free,
        }
    }

    fn gpu(&self) -> Gpu<'_> {
        Gpu {
            device: &self.device,
            blas: &self.blas,
            kernels: &self.kernels,
            status: self.status.ptr(),
        }
    }

    /// The device address of `view`, with its range checked against its buffer.
    fn resolve(&self, view: &TensorView) -> Result<DevPtr> {
        let (buffer, start, _) = self.extent(view)?;
        Ok(buffer.mem.ptr().add(start))
    }

    /// The buffer of `view` and the view's element range in it, checked.
    fn extent(&self, view: &TensorView) -> Result<(&Buffer, usize, usize)> {
        let id = usize::try_from(view.buffer.0)
            .map_err(|_| backend_error(format!("unknown buffer {}", view.buffer.0)))?;
        let buffer = self
            .buffers
            .get(id)
            .and_then(Option::as_ref)
            .ok_or_else(|| backend_error(format!("unknown or freed buffer {id}")))?;
        let end = view
            .offset
            .checked_add(view.len())
            .filter(|&e| e <= buffer.elements)
            .ok_or_else(|| {
                backend_error(format!(
                    "view at offset {} of {} elements reaches past buffer {id} ({} elements)",
                    view.offset,
                    view.len(),
                    buffer.elements
                ))
            })?;
        Ok((buffer, view.offset, end))
    }

    /// The device addresses of an op's views. Fails if a view names a missing buffer,
    /// reaches past its end, or if an output overlaps any other view (the op would read
    /// what it is writing), as the CPU reference does.
    fn resolve_op(
        &self,
        inputs: &[TensorView],
        outputs: &[TensorView],
    ) -> Result<(Vec<DevPtr>, Vec<DevPtr>)> {
        let ins = inputs
            .iter()
            .map(|v| self.resolve(v))
            .collect::<Result<_>>()?;
        let outs = outputs
            .iter()
            .map(|v| self.resolve(v))
            .collect::<Result<_>>()?;
        tensorfit_core::backend::check_no_overlap(inputs, outputs).map_err(backend_error)?;
        Ok((ins, outs))
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
        Err(Error::Input(format!(
            "label of row {} is not a class index (found by softmax cross-entropy on the GPU)",
            word[1]
        )))
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
    let scratch = device.alloc_zeroed(3 * N * N * 4).map_err(describe)?;
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
        DeviceInfo {
            kind: DeviceKind::Cuda,
            name: self.facts.name.clone(),
            total_bytes: self.capacity(),
            free_bytes: self.free_now(),
            capacity_source: match self.cap {
                Some(_) => "user cap".to_string(),
                None => "driver".to_string(),
            },
            software: false,
            // cuMemAlloc takes any size the device can hold.
            max_buffer_bytes: self.capacity(),
            alignment_bytes: ALIGNMENT_BYTES,
            overhead_bytes: self.facts.overhead_bytes,
        }
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        let oom = |available: u64| Error::OutOfMemory {
            device: "cuda".into(),
            requested: bytes,
            available,
        };
        if let Some(cap) = self.cap {
            let left = cap.saturating_sub(self.allocated);
            if bytes > left {
                return Err(oom(left));
            }
        }
        // Whole f32s: a buffer of 6 bytes holds 2 elements, as on the CPU.
        let elements =
            usize::try_from(bytes.div_ceil(4)).map_err(|_| oom(self.free_now().unwrap_or(0)))?;
        let mem = match self.device.alloc_zeroed(elements.saturating_mul(4)) {
            Ok(mem) => mem,
            Err(e) if driver::is_out_of_memory(&e) => {
                return Err(oom(self.free_now().unwrap_or(0)));
            }
            Err(e) => return Err(device_error("cuMemAlloc", e)),
        };
        let id = self.buffers.len();
        self.buffers.push(Some(Buffer {
            mem,
            bytes,
            elements,
        }));
        self.allocated += bytes;
        self.peak = self.peak.max(self.allocated);
        Ok(BufferId(id as u64))
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        let id = usize::try_from(buffer.0)
            .map_err(|_| backend_error(format!("unknown buffer {}", buffer.0)))?;
        match self.buffers.get_mut(id).and_then(Option::take) {
            Some(b) => {
                self.allocated -= b.bytes;
                drop(b.mem);
                Ok(())
            }
            None => Err(backend_error(format!(
                "free of unknown or freed buffer {id}"
            ))),
        }
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        if view.len() != data.len() {
            return Err(backend_error(format!(
                "host data has {} elements, the view {}",
                data.len(),
                view.len()
            )));
        }
        let ptr = self.resolve(view)?;
        self.device
            .write(ptr, data)
            .map_err(|e| device_error("copy to the GPU", e))
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        if view.len() != out.len() {
            return Err(backend_error(format!(
                "host data has {} elements, the view {}",
                out.len(),
                view.len()
            )));
        }
        let ptr = self.resolve(view)?;
        self.device
            .read(ptr, out)
            .map_err(|e| device_error("copy from the GPU", e))?;
        self.check_status()
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        check_shapes(op, inputs, outputs)?;
        let (ins, outs) = self.resolve_op(inputs, outputs)?;
        run_kernel(&self.gpu(), op, inputs, &ins, &outs)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.device
            .synchronize()
            .map_err(|e| device_error("synchronize", e))?;
        self.check_status()
    }

    fn memory(&self) -> MemoryInfo {
        MemoryInfo {
            total: self.capacity(),
            free: self.free_now(),
            allocated: self.allocated,
            peak: self.peak,
        }
    }

    fn reset_peak(&mut self) {
        self.peak = self.allocated;
    }
}

/// Checks the views against the op's own shape rules: the outputs must have exactly the
/// shapes the op produces from these inputs (which also fixes the number of views).
fn check_shapes(op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
    tensorfit_core::backend::check_views(op, inputs, outputs).map_err(backend_error)
}

/// [`args::arity`] with this backend's error.
fn arity<const N: usize>(op: &Op, what: &str, ptrs: &[DevPtr]) -> Result<[DevPtr; N]> {
    args::arity(op, what, ptrs.to_vec()).map_err(backend_error)
}

/// Calls the launcher of `op` on the checked addresses. `views` are the input views (for
/// the dimensions); the match is exhaustive, so a new op does not compile until it has a
/// kernel here.
fn run_kernel(
    g: &Gpu<'_>,
    op: &Op,
    views: &[TensorView],
    inputs: &[DevPtr],
    outputs: &[DevPtr],
) -> Result<()> {
    let len = |k: usize| views[k].len();
    match op {
        Op::MatMul { trans_a, trans_b } => {
            let [a, b] = arity(op, "inputs", inputs)?;
            let [c] = arity(op, "outputs", outputs)?;
            matmul(
                g,
                a,
                args::dims2(&views[0]),
                b,
                args::dims2(&views[1]),
                *trans_a,
                *trans_b,
                c,
            )
        }
        Op::Binary(bop) => {
            let [a, b] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            binary(g, *bop, a, b, out, len(0), len(1))
        }
        Op::Activation(f) => {
            let [x] = arity(op, "inputs", inputs)?;
            let [y] = arity(op, "outputs", outputs)?;
            activation_forward(g, *f, x, y, len(0))
        }
        Op::ActivationBackward(f) => {
            let [y, dy] = arity(op, "inputs", inputs)?;
            let [dx] = arity(op, "outputs", outputs)?;
            activation_backward(g, *f, y, dy, dx, len(0))
        }
        Op::SumToShape { shape } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            let width = shape.numel();
            if width == 0 {
                return Ok(());
            }
            sum_to_shape(g, x, out, len(0) / width, width)
        }
        Op::Fill { value, shape } => {
            let [out] = arity(op, "outputs", outputs)?;
            fill(g, *value, out, shape.numel())
        }
        Op::SliceTime { t } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            let step = views[0].shape.dim(1) * views[0].shape.dim(2);
            slice_time(g, *t, x, out, step)
        }
        Op::ScatterTime { t, steps } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            scatter_time(g, *t, x, out, len(0), *steps)
        }
        Op::LstmForward { .. } => {
            let dims = args::lstm_dims(op, views).map_err(backend_error)?;
            let inp = LstmForwardInputs::from_vec(op, inputs.to_vec()).map_err(backend_error)?;
            let out = LstmForwardOutputs::from_vec(op, outputs.to_vec()).map_err(backend_error)?;
            lstm_forward(g, dims, &inp, &out)
        }
        Op::LstmBackward { .. } => {
            let dims = args::lstm_dims(op, views).map_err(backend_error)?;
            let inp = LstmBackwardInputs::from_vec(op, inputs.to_vec()).map_err(backend_error)?;
            let out = LstmBackwardOutputs::from_vec(op, outputs.to_vec()).map_err(backend_error)?;
            lstm_backward(g, dims, &inp, &out)
        }
        Op::BatchNorm { eps, training } => {
            let bc = (views[0].shape.dim(0), views[0].shape.dim(1));
            if *training {
                let [x, gamma, beta] = arity(op, "inputs", inputs)?;
                let [y, mean, var] = arity(op, "outputs", outputs)?;
                let stats = BatchNormStats::Batch { mean, var };
                batchnorm_forward(g, *eps, x, gamma, beta, stats, y, bc)
            } else {
                let [x, gamma, beta, mean, var] = arity(op, "inputs", inputs)?;
                let [y] = arity(op, "outputs", outputs)?;
                let stats = BatchNormStats::Running { mean, var };
                batchnorm_forward(g, *eps, x, gamma, beta, stats, y, bc)
            }
        }
        Op::BatchNormBackward { eps, training } => {
            let bc = (views[0].shape.dim(0), views[0].shape.dim(1));
            let inp =
                BatchNormBackwardInputs::from_vec(op, inputs.to_vec()).map_err(backend_error)?;
            let [dx, dgamma, dbeta] = arity(op, "outputs", outputs)?;
            batchnorm_backward(g, *eps, *training, &inp, dx, dgamma, dbeta, bc)
        }
        Op::BatchNormStatsUpdate { momentum, unbias } => {
            let [mean, var] = arity(op, "inputs", inputs)?;
            let [running_mean, running_var] = arity(op, "targets", outputs)?;
            batchnorm_stats_update(
                g,
                *momentum,
                *unbias,
                mean,
                var,
                running_mean,
                running_var,
                len(0),
            )
        }
        Op::SoftmaxCrossEntropy => {
            let bk = (views[0].shape.dim(0), views[0].shape.dim(1));
            let [logits, labels] = arity(op, "inputs", inputs)?;
            let [loss, probs] = arity(op, "outputs", outputs)?;
            softmax_cross_entropy_forward(g, logits, labels, loss, probs, bk)
        }
        Op::SoftmaxCrossEntropyBackward => {
            let bk = (views[0].shape.dim(0), views[0].shape.dim(1));
            let [probs, labels, dloss] = arity(op, "inputs", inputs)?;
            let [dlogits] = arity(op, "outputs", outputs)?;
            softmax_cross_entropy_backward(g, probs, labels, dloss, dlogits, bk)
        }
        Op::Adam(p) => {
            let [grad, scalars] = arity(op, "inputs", inputs)?;
            let [param, m, v] = arity(op, "targets", outputs)?;
            adam_update(g, *p, grad, scalars, param, m, v, len(0))
        }
        Op::Copy => {
            let [src] = arity(op, "inputs", inputs)?;
            let [dst] = arity(op, "targets", outputs)?;
            copy(g, src, dst, len(0))
        }
    }
}
