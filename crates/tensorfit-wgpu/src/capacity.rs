//! How much memory the device has, and where the figure comes from.
//!
//! - Vulkan: the sum of the device-local heaps; with `VK_EXT_memory_budget` also the
//!   driver's budget for this process minus what it already uses, as the free figure
//!   (source `VK_EXT_memory_budget`), else no free figure (source `Vulkan device-local
//!   heaps`).
//! - Other backends (Metal, DX12) offer no query through wgpu: the largest buffer the
//!   device accepts is the best available lower bound of its memory, and the source
//!   says so.
//!
//! A software adapter (lavapipe) keeps its "device" memory in the host's: the host's
//! `MemAvailable` bounds its free figure.
//!
//! A user cap ([`crate::WgpuBackend::with_capacity_cap`]) is applied to these figures by
//! the backend's `tensorfit_core::Ledger`, as on every backend.

use crate::context::Context;
use crate::vk_memory;

/// Measured figures before any user cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Measured {
    pub total: u64,
    pub free: Option<u64>,
    pub source: String,
}

/// Measures the device's memory now (the free figure changes as memory is used).
pub(crate) fn measure(ctx: &Context) -> Measured {
    let c = device_figures(ctx);
    if ctx.info.device_type != wgpu::DeviceType::Cpu {
        return c;
    }
    match mem_available() {
        Some(avail) => Measured {
            free: Some(c.free.map_or(avail, |f| f.min(avail)).min(c.total)),
            source: format!("{}, host MemAvailable", c.source),
            ..c
        },
        None => c,
    }
}

/// `MemAvailable` of /proc/meminfo in bytes, where readable.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|line| {
        let kib = line
            .strip_prefix("MemAvailable:")?
            .trim()
            .strip_suffix("kB")?;
        kib.trim().parse::<u64>().ok()?.checked_mul(1024)
    })
}

fn device_figures(ctx: &Context) -> Measured {
    match vk_memory::query(&ctx.adapter) {
        Some(mem) if mem.device_local > 0 => match mem.budget {
            Some((budget, usage)) => Measured {
                total: mem.device_local,
                free: Some(budget.saturating_sub(usage).min(mem.device_local)),
                source: "VK_EXT_memory_budget".into(),
            },
            None => Measured {
                total: mem.device_local,
                free: None,
                source: "Vulkan device-local heaps".into(),
            },
        },
        _ => Measured {
            total: ctx.limits.max_buffer_size,
            free: None,
            source: format!(
                "max_buffer_size (no memory query on {:?})",
                ctx.info.backend
            ),
        },
    }
}
