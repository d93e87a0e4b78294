//! [`WgpuBackend`]: buffers on the GPU with exact byte accounting, ops recorded as kernel
//! launches, and host transfers that wait on the device only when they must.
//!
//! Accounting (the "measured peak" a plan is checked against) is the [`Ledger`]'s, as on
//! every backend: the bytes asked for in [`Backend::allocate`] and not yet freed. It is
//! the backend's own count, not a driver report: each buffer is created with that size
//! rounded up to a whole word, and what the driver adds underneath (allocation
//! granularity) is not visible through wgpu on every backend. Memory the backend holds besides (the launch-parameter ring) is reported as
//! [`DeviceInfo::overhead_bytes`]; staging buffers for reads live only during a read, in
//! host-visible memory.
//!
//! Memory exhaustion is an error, never an abort: a request beyond the user's cap, beyond
//! the device's capacity or free memory, beyond the largest buffer, or that the driver
//! refuses returns [`Error::OutOfMemory`]. Device loss and failed mappings are
//! [`Error::Backend`]s.
//!
//! `execute` has the ledger check the call (shapes against `Op::infer_shapes`, ranges
//! inside their buffers, no output overlapping another view), plans the op's launches
//! and records them; nothing waits. `read`, `write`, `free` and `synchronize` first
//! submit what was recorded. A read copies into a staging buffer and maps it with one
//! wrapped map-and-wait ([`WgpuBackend::map_and_wait`]).

use std::fmt;

use tensorfit_core::{
    Backend, BufferId, Capacity, DeviceInfo, DeviceKind, Ledger, MemoryInfo, Op, Result, TensorView,
};

use crate::backend_error;
use crate::capacity;
use crate::context::{self, catch, AdapterSummary, Context};
use crate::kernels;
use crate::record::{Buffers, Recorder};
use crate::window::{Limits, ELEM};

/// Largest staging piece of a read or write: transfers bigger than this go in pieces, so
/// a transfer never needs more than this much extra memory.
pub(crate) const STAGING_BYTES: u64 = 16 << 20;

/// The backend for any GPU wgpu reaches. See the module documentation.
pub struct WgpuBackend {
    ctx: Context,
    rec: Recorder,
    /// Each buffer is created with the bytes asked for rounded up to a whole word.
    buffers: Buffers,
}

impl fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("adapter", &self.ctx.info.name)
            .field("backend", &self.ctx.info.backend)
            .field("buffers", &self.buffers.len())
            .field("allocated", &self.buffers.allocated())
            .field("peak", &self.buffers.peak())
            .field("cap", &self.buffers.cap())
            .field("binding_limit", &self.rec.limits.binding_bytes)
            .finish()
    }
}

impl WgpuBackend {
    /// Opens the best adapter: hardware before software, a software one (lavapipe) when
    /// it is the only one; `TENSORFIT_WGPU_ADAPTER` picks one by name. Fails (without
    /// panicking) when there is none.
    pub fn new() -> Result<Self> {
        Self::open(0, None)
    }

    /// Opens the `index`-th usable adapter in order of preference (`wgpu:{index}`; see
    /// [`WgpuBackend::adapter_count`]), refusing to hold more than `cap` bytes at once if
    /// a cap is given.
    pub fn open(index: usize, cap: Option<u64>) -> Result<Self> {
        let ctx = context::open(index)?;
        let limits = Limits {
            binding_bytes: ctx.limits.max_storage_buffer_binding_size,
            align: u64::from(ctx.limits.min_storage_buffer_offset_alignment).max(ELEM),
            max_groups: ctx.limits.max_compute_workgroups_per_dimension,
        };
        let rec = Recorder::new(&ctx, limits);
        ctx.errors.check()?;
        Ok(WgpuBackend {
            ctx,
            rec,
            buffers: Ledger::new("wgpu", cap),
        })
    }

    /// A backend that refuses to hold more than `bytes` at once (to rehearse a smaller
    /// device, or to leave memory to other programs).
    pub fn with_capacity_cap(bytes: u64) -> Result<Self> {
        Self::open(0, Some(bytes))
    }

    /// How many adapters can be opened (`wgpu:0` .. `wgpu:{n-1}`), or why none can.
    pub fn adapter_count() -> std::result::Result<usize, String> {
        context::usable_count()
    }

    /// Every adapter wgpu can see, for device listings.
    pub fn adapters() -> Vec<AdapterSummary> {
        context::adapters()
    }

    /// Uses storage bindings of at most `bytes` (at least four offset alignments), below
    /// the device's limit: to exercise, on a small problem, the splitting that tensors
    /// larger than a binding need.
    pub fn with_binding_limit(mut self, bytes: u64) -> Self {
        let l = &mut self.rec.limits;
        l.binding_bytes = bytes.clamp(4 * l.align, l.binding_bytes);
        self
    }

    /// The largest storage binding this backend uses, in bytes.
    pub fn binding_limit(&self) -> u64 {
        self.rec.limits.binding_bytes
    }

    /// The graphics API under wgpu (`Vulkan`, `Metal`, ...).
    pub fn api(&self) -> String {
        format!("{:?}", self.ctx.info.backend)
    }

    /// Bytes the device's allocator reports in use, where the backend can tell (a
    /// cross-check of the accounting; includes the backend's own buffers).
    pub fn driver_allocated_bytes(&self) -> Option<u64> {
        self.ctx
            .device
            .generate_allocator_report()
            .map(|r| r.total_allocated_bytes)
    }

    /// The device's memory measured now, before the user's cap, and where the figures
    /// come from.
    fn device(&self) -> (Capacity, String) {
        let c = capacity::measure(&self.ctx);
        let device = Capacity {
            total: Some(c.total),
            free: c.free,
        };
        (device, c.source)
    }

    /// The buffer behind a view and the view's byte offset, with the view checked against
    /// `len` host elements.
    fn view_bytes(&self, view: &TensorView, len: usize) -> Result<(&wgpu::Buffer, u64)> {
        self.buffers.check_transfer(view, len)?;
        Ok((self.buffers.get(view.buffer)?, view.offset as u64 * ELEM))
    }

    /// Maps `staging` for reading and waits until it is mapped: the one place the host
    /// waits on the device for data.
    fn map_and_wait(&self, staging: &wgpu::Buffer, bytes: u64) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, ..bytes, move |r| {
            // The receiver outlives the wait below; a failed send only means it is gone.
            let _ = tx.send(r);
        });
        self.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| backend_error(format!("waiting for the device: {e}")))?;
        self.ctx.errors.check()?;
        match rx.try_recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(backend_error(format!("mapping a read-back buffer: {e}"))),
            Err(_) => Err(backend_error("a read-back buffer was never mapped")),
        }
    }

    /// The largest buffer, in whole words (lavapipe's limit, `i32::MAX`, is not).
    fn max_buffer_bytes(&self) -> u64 {
        self.ctx.limits.max_buffer_size / ELEM * ELEM
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "wgpu".into()
    }

    fn info(&self) -> DeviceInfo {
        let (device, source) = self.device();
        let (total, free) = self.buffers.capacity(device);
        let source = if self.buffers.cap_binds(device.total) {
            format!("user cap (device: {source})")
        } else {
            source
        };
        DeviceInfo {
            kind: DeviceKind::Wgpu,
            name: self.ctx.info.name.clone(),
            total_bytes: total,
            free_bytes: free,
            capacity_source: source,
            software: self.ctx.info.device_type == wgpu::DeviceType::Cpu,
            max_buffer_bytes: self.max_buffer_bytes(),
            alignment_bytes: self.rec.limits.align,
            overhead_bytes: self.rec.overhead_bytes(),
        }
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        let available = self
            .buffers
            .available(self.device().0)
            .min(self.max_buffer_bytes());
        self.buffers.check_fits(bytes, available)?;
        let size = bytes.div_ceil(ELEM).max(1) * ELEM;
        let (buffer, error) = catch(&self.ctx.device, || {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        match error {
            None => {}
            Some(wgpu::Error::OutOfMemory { .. }) => {
                return Err(self.buffers.out_of_memory(bytes, available))
            }
            Some(e) => return Err(backend_error(format!("allocating {bytes} bytes: {e}"))),
        }
        // wgpu zero-fills every new buffer before its first use.
        Ok(self.buffers.insert(buffer, bytes))
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        // Recorded launches may still use the buffer: submit them first.
        self.rec.flush(&self.ctx)?;
        let released = self.buffers.remove(buffer)?;
        self.rec.forget(buffer);
        released.destroy();
        Ok(())
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        // Earlier launches must read the old values first.
        self.rec.flush(&self.ctx)?;
        let (buffer, at) = self.view_bytes(view, data.len())?;
        let per_piece = (STAGING_BYTES / ELEM) as usize;
        for (k, piece) in data.chunks(per_piece).enumerate() {
            let bytes: Vec<u8> = piece.iter().flat_map(|v| v.to_le_bytes()).collect();
            let offset = at + (k * per_piece) as u64 * ELEM;
            self.ctx.queue.write_buffer(buffer, offset, &bytes);
            // Submitting releases the staging copy of this piece before the next one.
            self.ctx.queue.submit([]);
        }
        self.ctx.errors.check()
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        self.rec.flush(&self.ctx)?;
        let (buffer, at) = self.view_bytes(view, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let staging_bytes = STAGING_BYTES.min(out.len() as u64 * ELEM);
        let (staging, error) = catch(&self.ctx.device, || {
            self.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("tensorfit read-back"),
                size: staging_bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(e) = error {
            return Err(backend_error(format!("creating a read-back buffer: {e}")));
        }
        let per_piece = (staging_bytes / ELEM) as usize;
        for (k, piece) in out.chunks_mut(per_piece).enumerate() {
            let bytes = piece.len() as u64 * ELEM;
            let mut encoder =
                self.ctx
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("tensorfit read-back"),
                    });
            let offset = at + (k * per_piece) as u64 * ELEM;
            encoder.copy_buffer_to_buffer(buffer, offset, &staging, 0, bytes);
            self.ctx.queue.submit([encoder.finish()]);
            self.map_and_wait(&staging, bytes)?;
            {
                let mapped = staging
                    .get_mapped_range(..bytes)
                    .map_err(|e| backend_error(format!("reading a mapped buffer: {e}")))?;
                for (o, b) in piece.iter_mut().zip(mapped.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            staging.unmap();
        }
        staging.destroy();
        Ok(())
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        let call = self.buffers.check_call(op, inputs, outputs)?;
        let launches = kernels::plan(&call, self.rec.limits)?;
        self.rec.record(&self.ctx, &self.buffers, &launches)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.rec.flush(&self.ctx)?;
        self.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| backend_error(format!("waiting for the device: {e}")))?;
        self.ctx.errors.check()
    }

    fn memory(&self) -> MemoryInfo {
        self.buffers.memory(self.device().0)
    }

    fn reset_peak(&mut self) {
        self.buffers.reset_peak();
    }
}
