//! The figures this backend would report for a GPU that is not here, so that a job can be
//! planned for hardware the user does not have (`tensorfit plan --assume gtx750`).
//!
//! The backend opens a device with its adapter's own limits, which only the adapter can
//! tell. For a GPU that is not here it takes WebGPU's default limits (`wgpu::Limits`'s
//! defaults, which every adapter meets or exceeds) for the two alignments, which are
//! 256 bytes there and at most that on real adapters, so a plan made with them never
//! packs tighter than the device would allow. The largest buffer is the device's memory:
//! real adapters on Vulkan, Metal and DX12 report buffer limits far above WebGPU's
//! default 256 MiB (that default would split every arena into 256 MiB pieces and refuse
//! the seed network's 800 MB gate tensor, which a 2 GB GTX 750 holds). The overhead is
//! the backend's parameter ring, computed as the backend computes it.

use tensorfit_core::{DeviceInfo, DeviceKind};

use crate::record::ring_bytes;
use crate::window::ELEM;

/// The [`DeviceInfo`] the backend would report on an idle hardware GPU of `total_bytes`
/// named `name` (see the module documentation).
pub fn assumed_info(name: String, total_bytes: u64) -> DeviceInfo {
    let defaults = wgpu::Limits::default();
    let overhead = ring_bytes(defaults.min_uniform_buffer_offset_alignment);
    DeviceInfo {
        kind: DeviceKind::Wgpu,
        name,
        total_bytes,
        free_bytes: Some(total_bytes.saturating_sub(overhead)),
        capacity_source: "assumed".into(),
        software: false,
        max_buffer_bytes: total_bytes / ELEM * ELEM,
        alignment_bytes: u64::from(defaults.min_storage_buffer_offset_alignment).max(ELEM),
        overhead_bytes: overhead,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_assumed_gpu_holds_the_parameter_ring_and_aligns_as_webgpu_allows() {
        let info = assumed_info("GTX 750".into(), 2 << 30);
        assert_eq!(info.alignment_bytes, 256);
        assert_eq!(info.overhead_bytes, ring_bytes(256));
        assert!(info.overhead_bytes > 0);
        assert_eq!(info.free_bytes, Some((2 << 30) - info.overhead_bytes));
        assert_eq!(info.max_buffer_bytes, 2 << 30);
    }
}
