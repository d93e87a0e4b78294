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
//! A user cap ([`crate::WgpuBackend::with_capacity_cap`]) lowers both figures and, when it
//! binds, becomes the source.

use crate::context::Context;
use crate::vk_memory;

/// Capacity figures before any user cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capacity {
    pub total: u64,
    pub free: Option<u64>,
    pub source: String,
}

/// Measures the device's memory now (the free figure changes as memory is used).
pub(crate) fn measure(ctx: &Context) -> Capacity {
    let c = device_figures(ctx);
    if ctx.info.device_type != wgpu::DeviceType::Cpu {
        return c;
    }
    match mem_available() {
        Some(avail) => Capacity {
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

fn device_figures(ctx: &Context) -> Capacity {
    match vk_memory::query(&ctx.adapter) {
        Some(mem) if mem.device_local > 0 => match mem.budget {
            Some((budget, usage)) => Capacity {
                total: mem.device_local,
                free: Some(budget.saturating_sub(usage).min(mem.device_local)),
                source: "VK_EXT_memory_budget".into(),
            },
            None => Capacity {
                total: mem.device_local,
                free: None,
                source: "Vulkan device-local heaps".into(),
            },
        },
        _ => Capacity {
            total: ctx.limits.max_buffer_size,
            free: None,
            source: format!(
                "max_buffer_size (no memory query on {:?})",
                ctx.info.backend
            ),
        },
    }
}

/// Applies the user's cap: `(total, free, source)`, where `allocated` is what the
/// backend holds now (the cap counts it, the device's free figure already does).
pub(crate) fn with_cap(
    c: &Capacity,
    cap: Option<u64>,
    allocated: u64,
) -> (u64, Option<u64>, String) {
    match cap {
        Some(cap) if cap < c.total => {
            let left = cap.saturating_sub(allocated);
            let free = Some(c.free.map_or(left, |f| f.min(left)));
            (cap, free, format!("user cap (device: {})", c.source))
        }
        _ => (c.total, c.free, c.source.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_binds_only_when_lower() {
        let c = Capacity {
            total: 1000,
            free: Some(800),
            source: "VK_EXT_memory_budget".into(),
        };
        assert_eq!(with_cap(&c, None, 100), (1000, Some(800), c.source.clone()));
        assert_eq!(with_cap(&c, Some(5000), 100).0, 1000);
        let (total, free, source) = with_cap(&c, Some(500), 100);
        assert_eq!((total, free), (500, Some(400)));
        assert!(source.starts_with("user cap"), "{source}");
        let none = Capacity { free: None, ..c };
        assert_eq!(with_cap(&none, Some(500), 600).1, Some(0));
    }
}
