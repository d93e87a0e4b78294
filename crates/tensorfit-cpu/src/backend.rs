//! [`CpuBackend`]: buffers in host memory, kept in a [`Ledger`], and the kernels of
//! `kernels/` reached through [`tensorfit_core::dispatch`].
//!
//! The ledger does the accounting: `allocated` is the sum of the byte sizes asked for in
//! [`Backend::allocate`] and not yet freed, so a plan's estimate can be compared with a
//! measured peak to the byte. The CPU has no context or library workspace, so the two
//! agree exactly.
//!
//! Memory exhaustion is an error, not an abort: a request beyond the user's cap, beyond
//! the machine's memory, or that the allocator refuses (`Vec::try_reserve_exact`)
//! returns [`tensorfit_core::Error::OutOfMemory`], so a session can report it or fall back.
//!
//! `execute` has the ledger check the call (shapes against [`Op::infer_shapes`], ranges,
//! overlaps), so a view of the wrong shape is an error rather than a wrong answer, then
//! borrows the views' slices (see the `regions` module) and dispatches to the kernel
//! named `Op::name` on the kernel pool's threads (`threads`: they flush subnormal floats
//! to zero), or for a call too small to split, on the caller's thread (`threads::run_inline`).
//!
//! The backend keeps the packed weights of inference calls of recurrent layers from one
//! call to the next (`kernels::packs`); every path that changes a buffer (`write`, the
//! outputs of `execute`, `free`) first tells the cache, which drops the copies packed
//! from what changes.

use std::fmt;
use std::time::Instant;

use tensorfit_core::{
    dispatch, Backend, BufferId, Capacity, DType, DeviceInfo, DeviceKind, Ledger, MemoryInfo, Op,
    Result, TensorView,
};

use crate::host_memory;
use crate::kernels::packs::PackCache;
use crate::kernels::HostKernels;
use crate::profile::KernelTimes;
use crate::regions;
use crate::threads::{self, Work};

/// The reference backend: `Vec<f32>` buffers, ndarray/matrixmultiply GEMMs, rayon.
pub struct CpuBackend {
    /// The buffers, each holding the bytes asked for rounded up to whole `f32`s.
    ledger: Ledger<Vec<f32>>,
    /// The machine's memory (MemTotal, or the cgroup limit), read once at creation.
    mem_total: Option<u64>,
    /// Wall time per kernel when `TENSORFIT_PROFILE` asks for it (see `profile.rs`).
    times: Option<KernelTimes>,
    /// Packed weights kept across calls; told of every write and free (`kernels::packs`).
    packs: PackCache,
}

impl fmt::Debug for CpuBackend {
    // why: a derived Debug would print every element of every buffer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBackend")
            .field("buffers", &self.ledger.len())
            .field("allocated", &self.ledger.allocated())
            .field("peak", &self.ledger.peak())
            .field("cap", &self.ledger.cap())
            .field("mem_total", &self.mem_total)
            .finish()
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        if let Some(times) = self.times.as_ref().filter(|t| !t.is_empty()) {
            // A closed stderr must not turn the report into a panic (in a drop, an abort).
            let _ = std::io::Write::write_all(&mut std::io::stderr(), times.report().as_bytes());
        }
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// A backend limited only by the machine's memory.
    pub fn new() -> Self {
        CpuBackend {
            ledger: Ledger::new("cpu", None),
            mem_total: host_memory::total(),
            times: KernelTimes::from_env(),
            packs: PackCache::default(),
        }
    }

    /// A backend that refuses to hold more than `bytes` at once (to rehearse a smaller
    /// device, or to leave memory to the rest of the machine).
    pub fn with_capacity_cap(bytes: u64) -> Self {
        let mut backend = Self::new();
        backend.ledger.set_cap(Some(bytes));
        backend
    }

    /// The machine's memory as the ledger applies the cap to it: the total, and what is
    /// available now (memory that exists but is in use elsewhere would be taken by
    /// swapping or the OOM killer, not by an error).
    fn device(&self) -> Capacity {
        Capacity {
            total: self.mem_total,
            free: host_memory::available(),
        }
    }

    /// Bytes of the packed weights the backend keeps across calls (`kernels::packs`).
    pub fn kept_pack_bytes(&self) -> u64 {
        self.packs.bytes()
    }

    /// The elements of a view, with the view checked against `len` host elements.
    fn view_mut(&mut self, view: &TensorView, len: usize) -> Result<&mut [f32]> {
        self.ledger.check_transfer(view, len)?;
        let data = self.ledger.get_mut(view.buffer)?;
        Ok(&mut data[view.range()])
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        let available = self.ledger.available(self.device());
        self.ledger.check_fits(bytes, available)?;
        let oom = || self.ledger.out_of_memory(bytes, available);
        let elements =
            usize::try_from(bytes.div_ceil(DType::F32.size_bytes() as u64)).map_err(|_| oom())?;
        let mut data = Vec::new();
        data.try_reserve_exact(elements).map_err(|_| oom())?;
        data.resize(elements, 0.0);
        Ok(self.ledger.insert(data, bytes))
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        self.packs.freed(buffer);
        self.ledger.remove(buffer).map(drop)
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        self.packs.written(view);
        self.view_mut(view, data.len())?.copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        out.copy_from_slice(self.view_mut(view, out.len())?);
        Ok(())
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        let call = self.ledger.check_call(op, inputs, outputs)?;
        let pool = threads::kernel_pool()?;
        // What the call writes may be a kept weight's source: forgotten before it changes.
        for view in outputs {
            self.packs.written(view);
        }
        let out_shapes: Vec<_> = outputs.iter().map(|v| &v.shape).collect();
        let work = Work::of(op, inputs.iter().map(|v| &v.shape).collect(), &out_shapes);
        let regions = regions::split(&mut self.ledger, inputs, outputs)?;
        let packs = &mut self.packs;
        // The kernel runs on the kernel pool's threads, which flush subnormals to zero, or
        // when it is too small to split, on this thread with subnormals flushed.
        let run = || {
            let kernel = || {
                let kernels = &mut HostKernels::keeping(packs, inputs);
                dispatch(kernels, &call, regions.inputs, regions.outputs)
            };
            if threads::runs_inline(work) {
                threads::run_inline(kernel)
            } else {
                pool.install(kernel)
            }
        };
        let Some(times) = &mut self.times else {
            return run();
        };
        let start = Instant::now();
        let result = run();
        times.add(op.name(), start.elapsed());
        result
    }

    fn info(&self) -> DeviceInfo {
        // First: the kernel threads (and their allocator arenas), which the memory
        // figures count; a pool that cannot start is every kernel call's error.
        let _ = crate::threads::kernel_pool();
        let name = cpu_model_name();
        let (total, free) = self.ledger.capacity(self.device());
        DeviceInfo {
            free_bytes: free,
            capacity_source: if self.ledger.cap_binds(self.mem_total) {
                "user cap".to_string()
            } else {
                host_memory::source().to_string()
            },
            ..assumed_info(name, total)
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        // Every kernel has finished when `execute` returns.
        Ok(())
    }

    fn memory(&self) -> MemoryInfo {
        self.ledger.memory(self.device())
    }

    fn reset_peak(&mut self) {
        self.ledger.reset_peak();
    }
}

/// The processor's model name from /proc/cpuinfo, or `cpu`.
fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_string())
            })
        })
        .map(|m| format!("{m} ({} threads)", threads::kernel_threads()))
        .unwrap_or_else(|| "cpu".to_string())
}

/// The [`DeviceInfo`] this backend reports on a machine with `total_bytes` of memory
/// named `name`, all of it free: also the figures of a machine that is not here
/// (`tensorfit plan --assume cpu=64GiB`).
pub fn assumed_info(name: String, total_bytes: u64) -> DeviceInfo {
    DeviceInfo {
        kind: DeviceKind::Cpu,
        name,
        total_bytes,
        free_bytes: Some(total_bytes),
        capacity_source: "assumed".into(),
        software: false,
        // A Vec<f32> holds at most isize::MAX bytes.
        max_buffer_bytes: isize::MAX as u64,
        alignment_bytes: DType::F32.size_bytes() as u64,
        // Buffers are the process's own memory; the backend holds nothing else.
        overhead_bytes: 0,
    }
}
