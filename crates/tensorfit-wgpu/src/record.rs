//! Recording kernel launches: one command encoder, parameters in a uniform ring, bind
//! groups cached.
//!
//! An op becomes a list of [`Launch`]es (built by [`crate::kernels`]); [`Recorder::record`]
//! appends them to the current command encoder, and nothing is submitted until the host
//! needs the device ([`Recorder::flush`]: before a read, a write, a free or a
//! synchronize), so a whole training step is usually one submission and the device never
//! waits on the host inside a step.
//!
//! Parameters: each launch gets one slot of a uniform ring buffer, bound with a dynamic
//! offset. The slots used since the last flush are written to the ring with one
//! `queue.write_buffer` just before the submission (queue writes are ordered before the
//! submission's commands and after earlier submissions, so the ring can be reused after
//! each flush); when the ring is full the recorder flushes early. Bind groups depend only
//! on the windows bound, not on the parameters, so the same launches in the next step
//! find theirs in a cache.

use std::collections::HashMap;

use tensorfit_core::{BufferId, Ledger, Result};

use crate::backend_error;
use crate::context::Context;
use crate::pipelines::Pipelines;
use crate::shaders::{Kernel, PARAM_WORDS};
use crate::window::{window, Limits, Operand};

/// Slots in the parameter ring (launches between two submissions at most).
const RING_SLOTS: usize = 4096;
/// One launch's parameter slot: the parameter words, padded to the device's uniform
/// offset alignment.
fn slot_bytes(uniform_align: u32) -> u64 {
    let align = u64::from(uniform_align).max(4);
    (PARAM_WORDS as u64 * 4).div_ceil(align) * align
}

/// Bytes of the parameter ring on a device with this uniform offset alignment: the
/// memory the backend holds besides the planned arenas.
pub(crate) fn ring_bytes(uniform_align: u32) -> u64 {
    slot_bytes(uniform_align) * RING_SLOTS as u64
}

/// Bind groups kept before the cache is cleared (a run reuses far fewer).
const MAX_CACHED_GROUPS: usize = 16_384;

/// The backend's buffers.
pub(crate) type Buffers = Ledger<wgpu::Buffer>;

/// One kernel launch: the kernel, its storage operands (bindings 1..), its own parameter
/// words (after the bases) and its workgroup counts.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub kernel: &'static Kernel,
    pub operands: Vec<Operand>,
    pub values: Vec<u32>,
    pub groups: [u32; 3],
}

/// A bind group's identity: (buffer, window offset, window size) per binding.
type GroupKey = Vec<(u64, u64, u64)>;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub limits: Limits,
    pipelines: Pipelines,
    encoder: Option<wgpu::CommandEncoder>,
    ring: wgpu::Buffer,
    slot_bytes: u64,
    staged: Vec<u8>,
    used: usize,
    groups: HashMap<GroupKey, wgpu::BindGroup>,
}

impl Recorder {
    pub fn new(ctx: &Context, limits: Limits) -> Self {
        let slot_bytes = slot_bytes(ctx.limits.min_uniform_buffer_offset_alignment);
        let ring = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("tensorfit parameter ring"),
            size: ring_bytes(ctx.limits.min_uniform_buffer_offset_alignment),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder {
            limits,
            pipelines: Pipelines::default(),
            encoder: None,
            ring,
            slot_bytes,
            staged: vec![0; (slot_bytes * RING_SLOTS as u64) as usize],
            used: 0,
            groups: HashMap::new(),
        }
    }

    /// Device memory the recorder holds (the ring).
    pub fn overhead_bytes(&self) -> u64 {
        self.ring.size()
    }

    /// Appends `launches` to the command encoder (flushing when the ring fills).
    pub fn record(&mut self, ctx: &Context, buffers: &Buffers, launches: &[Launch]) -> Result<()> {
        let mut rest = launches;
        while !rest.is_empty() {
            if self.used == RING_SLOTS {
                self.flush(ctx)?;
            }
            let (now, later) = rest.split_at((RING_SLOTS - self.used).min(rest.len()));
            let mut prepared = Vec::with_capacity(now.len());
            for launch in now {
                prepared.push(self.prepare(ctx, buffers, launch)?);
            }
            let encoder = self.encoder.get_or_insert_with(|| {
                ctx.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("tensorfit"),
                    })
            });
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            for (pipeline, group, offset, groups) in &prepared {
                pass.set_pipeline(pipeline);
                pass.set_bind_group(0, group, &[*offset]);
                pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
            }
            rest = later;
        }
        Ok(())
    }

    /// Resolves one launch: its pipeline, its bind group, and its parameters written into
    /// the next ring slot (whose offset is returned).
    fn prepare(
        &mut self,
        ctx: &Context,
        buffers: &Buffers,
        launch: &Launch,
    ) -> Result<(wgpu::ComputePipeline, wgpu::BindGroup, u32, [u32; 3])> {
        let kernel = launch.kernel;
        let n = kernel.buffers;
        if launch.operands.len() != n || n + launch.values.len() > PARAM_WORDS {
            return Err(backend_error(format!(
                "internal: {} launched with {} buffers and {} values",
                kernel.entry,
                launch.operands.len(),
                launch.values.len()
            )));
        }
        let max = ctx.limits.max_compute_workgroups_per_dimension;
        if launch.groups.iter().any(|&g| g > max) {
            return Err(backend_error(format!(
                "internal: {} launched with {:?} workgroups (limit {max})",
                kernel.entry, launch.groups
            )));
        }
        let (pipeline, layout) = self.pipelines.get(ctx, kernel)?;
        let mut words = [0u32; PARAM_WORDS];
        let mut key = Vec::with_capacity(n);
        for (k, op) in launch.operands.iter().enumerate() {
            let buffer = buffers.get(op.region.buffer)?;
            let w = window(&self.limits, op, buffer.size())?;
            words[k] = w.base;
            key.push((op.region.buffer.0, w.offset, w.size));
        }
        words[n..n + launch.values.len()].copy_from_slice(&launch.values);

        let at = self.used * self.slot_bytes as usize;
        for (dst, w) in self.staged[at..].chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&w.to_le_bytes());
        }
        let offset = at as u32;
        self.used += 1;

        if self.groups.len() >= MAX_CACHED_GROUPS {
            self.groups.clear();
        }
        let group = match self.groups.get(&key) {
            Some(g) => g.clone(),
            None => {
                let g = self.bind_group(ctx, buffers, &layout, &key)?;
                self.groups.insert(key, g.clone());
                g
            }
        };
        Ok((pipeline, group, offset, launch.groups))
    }

    fn bind_group(
        &self,
        ctx: &Context,
        buffers: &Buffers,
        layout: &wgpu::BindGroupLayout,
        key: &GroupKey,
    ) -> Result<wgpu::BindGroup> {
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.ring,
                offset: 0,
                size: std::num::NonZeroU64::new(PARAM_WORDS as u64 * 4),
            }),
        }];
        for (k, &(id, offset, size)) in key.iter().enumerate() {
            let buffer = buffers.get(BufferId(id))?;
            entries.push(wgpu::BindGroupEntry {
                binding: k as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: std::num::NonZeroU64::new(size),
                }),
            });
        }
        Ok(ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &entries,
        }))
    }

    /// Submits everything recorded, with the parameters it uses, then reports any error
    /// the device raised.
    pub fn flush(&mut self, ctx: &Context) -> Result<()> {
        if let Some(encoder) = self.encoder.take() {
            if self.used > 0 {
                let bytes = self.used * self.slot_bytes as usize;
                ctx.queue.write_buffer(&self.ring, 0, &self.staged[..bytes]);
            }
            ctx.queue.submit([encoder.finish()]);
        }
        self.used = 0;
        ctx.errors.check()
    }

    /// Drops the cached bind groups that bind `buffer` (it is being freed).
    pub fn forget(&mut self, buffer: BufferId) {
        self.groups
            .retain(|key, _| key.iter().all(|&(id, _, _)| id != buffer.0));
    }
}
