//! [`WgpuBackend`]: buffers on the GPU with exact byte accounting, ops recorded as kernel
//! launches, and host transfers that wait on the device only when they must.
//!
//! Accounting (the "measured peak" a plan is checked against): `allocated` is the sum of
//! the byte sizes asked for in [`Backend::allocate`] and not yet freed, `peak` its
//! maximum, exactly as on the CPU. It is the backend's own count, not a driver report:
//! each buffer is created with that size rounded up to a whole word, and what the driver
//! adds underneath (allocation granularity) is not visible through wgpu on every
//! backend. Memory the backend holds besides (the launch-parameter ring) is reported as
//! [`DeviceInfo::overhead_bytes`]; staging buffers for reads live only during a read, in
//! host-visible memory.
//!
//! Memory exhaustion is an error, never an abort: a request beyond the user's cap, beyond
//! the device's capacity or free memory, beyond the largest buffer, or that the driver
//! refuses returns [`Error::OutOfMemory`]. Device loss and failed mappings are
//! [`Error::Backend`]s.
//!
//! `execute` validates the views (shapes against `Op::infer_shapes`, ranges inside their
//! buffers, no output overlapping another view, as the CPU does), plans the op's launches
//! and records them; nothing waits. `read`, `write`, `free` and `synchronize` first
//! submit what was recorded. A read copies into a staging buffer and maps it with one
//! wrapped map-and-wait ([`WgpuBackend::map_and_wait`]).

use std::fmt;

use tensorfit_core::{
    Backend, BufferId, DeviceInfo, DeviceKind, Error, MemoryInfo, Op, Result, TensorView,
};

use crate::backend_error;
use crate::capacity;
use crate::context::{self, catch, AdapterSummary, Context};
use crate::kernels;
use crate::record::{slot, Recorder, Slot};
use crate::window::{Limits, ELEM};

/// Largest staging piece of a read or write: transfers bigger than this go in pieces, so
/// a transfer never needs more than this much extra memory.
const STAGING_BYTES: u64 = 16 << 20;

/// The backend for any GPU wgpu reaches. See the module documentation.
pub struct WgpuBackend {
    ctx: Context,
    rec: Recorder,
    slots: Vec<Option<Slot>>,
    allocated: u64,
    peak: u64,
    cap: Option<u64>,
}

impl fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("adapter", &self.ctx.info.name)
            .field("backend", &self.ctx.info.backend)
            .field("buffers", &self.slots.iter().flatten().count())
            .field("allocated", &self.allocated)
            .field("peak", &self.peak)
            .field("cap", &self.cap)
            .field("binding_limit", &self.rec.limits.binding_bytes)
            .finish()
    }
}

impl WgpuBackend {
    /// Opens the best adapter: hardware before software, a software one (lavapipe) when
    /// it is the only one; `TENSORFIT_WGPU_ADAPTER` picks one by name. Fails (without
    /// panicking) when there is none.
    pub fn new() -> Result<Self> {
        let ctx = context::open()?;
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
            slots: Vec::new(),
            allocated: 0,
            peak: 0,
            cap: None,
        })
    }

    /// A backend that refuses to hold more than `bytes` at once (to rehearse a smaller
    /// device, or to leave memory to other programs).
    pub fn with_capacity_cap(bytes: u64) -> Result<Self> {
        let mut b = Self::new()?;
        b.cap = Some(bytes);
        Ok(b)
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

    /// `(total, free, source)` after the user's cap, measured now.
    fn capacity_now(&self) -> (u64, Option<u64>, String) {
        capacity::with_cap(&capacity::measure(&self.ctx), self.cap, self.allocated)
    }

    fn slot(&self, id: BufferId) -> Result<&Slot> {
        slot(&self.slots, id)
    }

    /// The buffer behind a view and the view's byte offset, with its range checked.
    fn view_bytes(&self, view: &TensorView, len: usize) -> Result<(&wgpu::Buffer, u64)> {
        if view.len() != len {
            return Err(backend_error(format!(
                "host data has {len} elements, the view {}",
                view.len()
            )));
        }
        let slot = self.slot(view.buffer)?;
        check_inside(slot, view)?;
        Ok((&slot.buffer, view.offset as u64 * ELEM))
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

    fn oom(&self, requested: u64, available: u64) -> Error {
        Error::OutOfMemory {
            device: "wgpu".into(),
            requested,
            available,
        }
    }
}

/// Fails unless `view` lies inside `slot`'s buffer.
fn check_inside(slot: &Slot, view: &TensorView) -> Result<()> {
    let end = (view.offset as u64)
        .checked_add(view.len() as u64)
        .map(|e| e * ELEM);
    match end {
        Some(end) if end <= slot.size => Ok(()),
        _ => Err(backend_error(format!(
            "view at offset {} of {} elements reaches past buffer {} ({} bytes)",
            view.offset,
            view.len(),
            view.buffer.0,
            slot.size
        ))),
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> String {
        "wgpu".into()
    }

    fn info(&self) -> DeviceInfo {
        let (total, free, source) = self.capacity_now();
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
        let (total, free, _) = self.capacity_now();
        let mut available = total.saturating_sub(self.allocated);
        if let Some(free) = free {
            available = available.min(free);
        }
        available = available.min(self.max_buffer_bytes());
        if bytes > available {
            return Err(self.oom(bytes, available));
        }
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
            Some(wgpu::Error::OutOfMemory { .. }) => return Err(self.oom(bytes, available)),
            Some(e) => return Err(backend_error(format!("allocating {bytes} bytes: {e}"))),
        }
        // wgpu zero-fills every new buffer before its first use.
        let id = BufferId(self.slots.len() as u64);
        self.slots.push(Some(Slot {
            buffer,
            bytes,
            size,
        }));
        self.allocated += bytes;
        self.peak = self.peak.max(self.allocated);
        Ok(id)
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        // Recorded launches may still use the buffer: submit them first.
        self.rec.flush(&self.ctx)?;
        let taken = usize::try_from(buffer.0)
            .ok()
            .and_then(|i| self.slots.get_mut(i))
            .and_then(Option::take);
        let Some(s) = taken else {
            return Err(backend_error(format!(
                "free of unknown or freed buffer {}",
                buffer.0
            )));
        };
        self.rec.forget(buffer);
        s.buffer.destroy();
        self.allocated -= s.bytes;
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
        check_shapes(op, inputs, outputs)?;
        for v in inputs.iter().chain(outputs) {
            check_inside(self.slot(v.buffer)?, v)?;
        }
        tensorfit_core::backend::check_no_overlap(inputs, outputs).map_err(backend_error)?;
        let launches = kernels::plan(op, inputs, outputs, self.rec.limits)?;
        self.rec.record(&self.ctx, &self.slots, &launches)
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
        let (total, free, _) = self.capacity_now();
        MemoryInfo {
            total,
            free,
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
