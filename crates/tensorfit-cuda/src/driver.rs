//! The CUDA driver API as this backend uses it: presence and version checks, one device
//! with its primary context and one stream, device memory, copies, modules and launches.
//!
//! Why the `result` layer of cudarc rather than its safe `CudaContext`/`CudaSlice` types:
//! the planner places many tensors in one arena buffer, and an op's inputs and outputs are
//! often views into the *same* buffer, so the backend works with raw device addresses
//! (buffer base + element offset), not with borrowed slices; and the safe types allocate
//! from the stream-ordered pool (freed memory stays cached, which muddies the accounting)
//! and track events per slice, which one in-order stream does not need. Everything here
//! is ordered on one non-blocking stream, so an op sees the results of every earlier op.
//!
//! Absence is not a panic: cudarc panics when `libcuda.so` or one of its symbols is
//! missing, so [`check`] looks for the library and every symbol this module calls before
//! the first call.
//!
//! One of the crate's few modules allowed `unsafe` (see `lib.rs`); every block states its
//! invariant in a `// SAFETY:` line.
use std::ffi::{c_char, c_void, CStr};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use tensorfit_core::DType;

/// Bytes per element: every buffer holds `f32`s.
const F32_BYTES: u64 = DType::F32.size_bytes() as u64;

/// Every driver entry point this crate calls (directly or through cudarc's `result`).
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetUuid_v2",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuMemGetInfo_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8Async",
    "cuMemsetD32Async",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
    "cuGetErrorName",
    "cuGetErrorString",
];

/// Checks that the driver library can be loaded and has every entry point used here;
/// returns the CUDA version it implements (`13000` for 13.0).
pub fn check() -> Result<i32, String> {
    // SAFETY: `is_culib_present` only tries to dlopen the candidate names; no preconditions.
    if !unsafe { sys::is_culib_present() } {
        return Err("no CUDA driver found (libcuda.so)".into());
    }
    // SAFETY: the library is present, so `culib` opens it rather than panicking; `get`
    // only looks symbols up, none is called here.
    let lib = unsafe { sys::culib() };
    let has = |name: &str| {
        // SAFETY: as above, a lookup only.
        unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_ok()
    };
    if !has("cuDriverGetVersion") {
        return Err("the CUDA driver library lacks cuDriverGetVersion: not a usable driver".into());
    }
    let mut version = 0;
    // SAFETY: the symbol exists (checked above) and `version` is valid for a write.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| format!("cuDriverGetVersion failed: {}", describe(e)))?;
    if let Some(missing) = SYMBOLS.iter().find(|s| !has(s)) {
        return Err(format!(
            "the CUDA driver is too old for the bindings: it provides CUDA {}, tensorfit's \
             bindings are CUDA 13.0's (no `{missing}`); update the NVIDIA driver",
            version_text(version)
        ));
    }
    Ok(version)
}

/// `13000` as `13.0`.
pub fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// A driver error as `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`. Only called after
/// [`check`] succeeded (the error-string entry points are among the checked symbols).
pub fn describe(e: DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("CUresult {}", e.0 as u32));
    match e.error_string() {
        Ok(s) => format!("{name} ({})", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// True for the driver's out-of-memory error.
pub fn is_out_of_memory(e: &DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

/// True when the driver refused PTX newer than it understands.
pub fn is_unsupported_ptx(e: &DriverError) -> bool {
    e.0 == sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
}

/// A device address. Only [`crate::backend`] makes these, from a live buffer's base and a
/// view's offset checked against the buffer's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DevPtr(pub u64);

impl DevPtr {
    /// The address `elements` f32s further on.
    pub fn add(self, elements: usize) -> DevPtr {
        DevPtr(self.0 + F32_BYTES * elements as u64)
    }
}

/// A kernel argument, passed by value as the kernel's C signature declares it.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    Ptr(DevPtr),
    I32(i32),
    I64(i64),
    F32(f32),
}

/// A loaded kernel.
#[derive(Debug, Clone, Copy)]
pub struct Function(sys::CUfunction);

/// Device memory from `cuMemAlloc`, freed on drop.
#[derive(Debug)]
pub struct DeviceMemory {
    ptr: u64,
    ctx: sys::CUcontext,
}

impl DeviceMemory {
    pub fn ptr(&self) -> DevPtr {
        DevPtr(self.ptr)
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: `ctx` is the context the memory was allocated in; the backend frees its
        // buffers before it releases the context, so the context is alive. `ptr` came
        // from cuMemAlloc and is freed exactly once, here. cuMemFree waits for work that
        // still uses the memory. An error leaks the memory; there is no one to report to.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::free_sync(self.ptr);
        }
    }
}

/// How many GPUs the driver sees (initialising it); call [`check`] first.
pub fn device_count() -> Result<usize, String> {
    result::init().map_err(|e| match e.0 {
        sys::CUresult::CUDA_ERROR_NO_DEVICE => {
            "the CUDA driver is installed but sees no GPU".to_string()
        }
        _ => format!("cuInit failed: {}", describe(e)),
    })?;
    let count = result::device::get_count()
        .map_err(|e| format!("cuDeviceGetCount failed: {}", describe(e)))?;
    Ok(count.max(0) as usize)
}

/// The UUID of device `ordinal`, read before any context exists (to find the device in
/// NVML). Call only after [`check`] succeeded.
pub fn device_uuid(ordinal: usize) -> Result<[u8; 16], String> {
    let count = device_count()?;
    if ordinal >= count {
        return Err(format!(
            "no CUDA device {ordinal}: the driver sees {count} device(s)"
        ));
    }
    let dev = result::device::get(ordinal as i32)
        .map_err(|e| format!("cuDeviceGet failed: {}", describe(e)))?;
    let id = result::device::get_uuid(dev)
        .map_err(|e| format!("cuDeviceGetUuid failed: {}", describe(e)))?;
    Ok(id.bytes.map(|b| b as u8))
}

/// One GPU: its primary context, one stream and the modules loaded into it.
#[derive(Debug)]
pub struct Device {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    modules: Vec<sys::CUmodule>,
}

impl Device {
    /// Opens device `ordinal`: initialises the driver, retains the primary context (shared
    /// with every other user of this GPU in the process, as the runtime API does) and
    /// creates a non-blocking stream. Call only after [`check`] succeeded.
    pub fn open(ordinal: usize) -> Result<Device, String> {
        device_uuid(ordinal)?;
        let dev = result::device::get(ordinal as i32)
            .map_err(|e| format!("cuDeviceGet failed: {}", describe(e)))?;
        // SAFETY: `dev` was returned by cuDeviceGet. The retained context is released in
        // Drop (or below if the stream cannot be created).
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| format!("cannot create a CUDA context: {}", describe(e)))?;
        let stream = (|| {
            // SAFETY: `ctx` is the live context just retained.
            unsafe { result::ctx::set_current(ctx) }?;
            result::stream::create(result::stream::StreamKind::NonBlocking)
        })();
        match stream {
            Ok(stream) => Ok(Device {
                dev,
                ctx,
                stream,
                modules: Vec::new(),
            }),
            Err(e) => {
                // SAFETY: releases the reference retained above, once.
                let _ = unsafe { result::primary_ctx::release(dev) };
                Err(format!("cannot create a CUDA stream: {}", describe(e)))
            }
        }
    }

    /// Makes this device's context current on the calling thread (a backend may be used
    /// from another thread than the one that created it).
    pub fn bind(&self) -> Result<(), DriverError> {
        if result::ctx::get_current()? != Some(self.ctx) {
            // SAFETY: `ctx` is retained by this Device until Drop.
            unsafe { result::ctx::set_current(self.ctx) }?;
        }
        Ok(())
    }

    /// The device's marketing name (`NVIDIA H200`).
    pub fn name(&self) -> Result<String, DriverError> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: `buf` is valid for 256 writes; the driver NUL-terminates within `len`.
        unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, self.dev) }.result()?;
        buf[buf.len() - 1] = 0;
        // SAFETY: `buf` is NUL-terminated (the last byte at least).
        let name = unsafe { CStr::from_ptr(buf.as_ptr()) };
        Ok(name.to_string_lossy().trim().to_string())
    }

    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> Result<(i32, i32), DriverError> {
        use sys::CUdevice_attribute::*;
        // SAFETY: `dev` came from cuDeviceGet.
        unsafe {
            Ok((
                result::device::get_attribute(
                    self.dev,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                )?,
                result::device::get_attribute(
                    self.dev,
                    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                )?,
            ))
        }
    }

    /// (free, total) bytes as the driver reports them now.
    pub fn mem_info(&self) -> Result<(u64, u64), DriverError> {
        self.bind()?;
        let (free, total) = result::mem_get_info()?;
        Ok((free as u64, total as u64))
    }

    /// `bytes` of device memory, zero-filled (the fill is ordered on the stream, before
    /// any later op).
    pub fn alloc_zeroed(&self, bytes: usize) -> Result<DeviceMemory, DriverError> {
        self.bind()?;
        // SAFETY: the context is current; a size of at least 1 is valid for cuMemAlloc.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }?;
        let mem = DeviceMemory { ptr, ctx: self.ctx };
        // SAFETY: `ptr` points to at least `bytes` bytes just allocated.
        unsafe { result::memset_d8_async(ptr, 0, bytes, self.stream) }?;
        Ok(mem)
    }

    /// Copies `data` to `dst` and waits until the copy is done (so `data` may be dropped).
    pub fn write(&self, dst: DevPtr, data: &[f32]) -> Result<(), DriverError> {
        self.bind()?;
        // SAFETY: `dst` has room for `data.len()` f32s (checked by the backend against its
        // buffer); the host slice outlives the copy because the stream is synchronised
        // before returning.
        unsafe {
            result::memcpy_htod_async(dst.0, data, self.stream)?;
            result::stream::synchronize(self.stream)
        }
    }

    /// Copies `out.len()` values from `src` after every earlier op has finished.
    pub fn read<T: Copy>(&self, src: DevPtr, out: &mut [T]) -> Result<(), DriverError> {
        self.bind()?;
        // SAFETY: `src` holds at least `out.len()` values of T (checked by the backend);
        // `out` is written only by this copy, which is complete when the stream is
        // synchronised, before `out` is released to the caller. T is f32 or i32: any bit
        // pattern is a valid value.
        unsafe {
            result::memcpy_dtoh_async(out, src.0, self.stream)?;
            result::stream::synchronize(self.stream)
        }
    }

    /// Writes i32 host values (the status word) to `dst`, in stream order.
    pub fn write_i32(&self, dst: DevPtr, data: &[i32]) -> Result<(), DriverError> {
        self.bind()?;
        // SAFETY: `dst` holds `data.len()` i32s (the backend's status word); the stream is
        // synchronised before the host slice can go away.
        unsafe {
            result::memcpy_htod_async(dst.0, data, self.stream)?;
            result::stream::synchronize(self.stream)
        }
    }

    /// `elements` f32s from `src` to `dst` (non-overlapping), in stream order.
    pub fn copy(&self, dst: DevPtr, src: DevPtr, elements: usize) -> Result<(), DriverError> {
        if elements == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges lie inside live buffers and do not overlap (checked by the
        // backend); device-to-device copies touch no host memory.
        let bytes = elements * F32_BYTES as usize;
        unsafe { result::memcpy_dtod_async(dst.0, src.0, bytes, self.stream) }
    }

    /// Sets `elements` f32s at `dst` to `value`, in stream order.
    pub fn fill(&self, dst: DevPtr, value: f32, elements: usize) -> Result<(), DriverError> {
        if elements == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: the range lies inside a live buffer (checked by the backend); `dst` is
        // 4-byte aligned (buffers are 256-byte aligned, offsets are whole f32s).
        unsafe { sys::cuMemsetD32Async(dst.0, value.to_bits(), elements, self.stream) }.result()
    }

    /// Waits for every op submitted so far.
    pub fn synchronize(&self) -> Result<(), DriverError> {
        self.bind()?;
        // SAFETY: `stream` is alive until Drop.
        unsafe { result::stream::synchronize(self.stream) }
    }

    /// The stream, for cuBLAS.
    pub fn stream(&self) -> sys::CUstream {
        self.stream
    }

    /// Loads PTX (the driver compiles it for this GPU) and looks up `names` in it; the
    /// module stays loaded until the device is dropped.
    pub fn load_module(&mut self, ptx: &str, names: &[&str]) -> Result<Vec<Function>, String> {
        self.bind().map_err(describe)?;
        let image = std::ffi::CString::new(ptx).map_err(|_| "PTX contains a NUL byte")?;
        // SAFETY: `image` is a NUL-terminated PTX text that lives across the call (the
        // driver copies what it needs).
        let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }
            .map_err(|e| {
                if is_unsupported_ptx(&e) {
                    "the NVIDIA driver is older than the NVRTC library that compiled the \
                     kernels and cannot load their PTX: update the driver, or put an NVRTC no \
                     newer than the driver first on LD_LIBRARY_PATH"
                        .to_string()
                } else {
                    format!("cannot load the compiled kernels: {}", describe(e))
                }
            })?;
        self.modules.push(module);
        names
            .iter()
            .map(|name| {
                let cname = std::ffi::CString::new(*name)
                    .map_err(|_| format!("kernel name {name} contains a NUL byte"))?;
                // SAFETY: `module` is loaded and stays loaded while the device lives.
                unsafe { result::module::get_function(module, cname) }
                    .map(Function)
                    .map_err(|e| format!("kernel `{name}` not found: {}", describe(e)))
            })
            .collect()
    }

    /// Launches `f` on the stream with `args` in the order of its C parameters.
    ///
    /// The caller (one launcher per kernel in `kernels/`) passes exactly the kernel's
    /// parameter list with matching types, and pointers into live buffers with the extents
    /// the kernel will touch (checked by the backend before the op runs).
    pub fn launch(
        &self,
        f: Function,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<(), DriverError> {
        self.bind()?;
        let mut params: Vec<*mut c_void> = args
            .iter()
            .map(|a| match a {
                Arg::Ptr(p) => &p.0 as *const u64 as *mut c_void,
                Arg::I32(v) => v as *const i32 as *mut c_void,
                Arg::I64(v) => v as *const i64 as *mut c_void,
                Arg::F32(v) => v as *const f32 as *mut c_void,
            })
            .collect();
        // SAFETY: every entry of `params` points into `args`, which outlives the call
        // (the driver copies the values at launch); the argument list matches the
        // kernel's signature and the pointers' extents (the launcher's contract above).
        unsafe { result::launch_kernel(f.0, grid, block, 0, self.stream, &mut params) }
    }
}

// SAFETY: the driver's handles are not tied to the thread that made them: every method
// makes the context current on the calling thread first (`bind`), and `&mut`/ownership
// keeps two threads from using one device at once (Device is Send, not Sync).
unsafe impl Send for Device {}
// SAFETY: a device address and a context handle, usable from any thread; Drop makes the
// context current before freeing.
unsafe impl Send for DeviceMemory {}
// SAFETY: a function handle of a loaded module, valid in its context on any thread.
unsafe impl Send for Function {}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: every module and the stream belong to `ctx`, which is made current first
        // and released last; each handle is destroyed exactly once. Errors cannot be
        // reported from Drop and only leak driver objects.
        unsafe {
            let _ = result::ctx::set_current(self.ctx);
            let _ = result::stream::synchronize(self.stream);
            for m in self.modules.drain(..) {
                let _ = result::module::unload(m);
            }
            let _ = result::stream::destroy(self.stream);
            let _ = result::primary_ctx::release(self.dev);
        }
    }
}
