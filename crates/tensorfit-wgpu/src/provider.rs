//! [`PROVIDER`]: wgpu's adapters as the engine's registry sees them.

use tensorfit_core::{Backend, DeviceInfo, DeviceKind, GpuModel, Hardware, Provider, Result};

use crate::assumed::assumed_info;
use crate::backend::{WgpuBackend, STAGING_BYTES};

/// wgpu's provider.
pub static PROVIDER: WgpuProvider = WgpuProvider;

/// See [`PROVIDER`].
#[derive(Debug, Clone, Copy)]
pub struct WgpuProvider;

impl Provider for WgpuProvider {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Wgpu
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["vulkan"]
    }

    fn count(&self) -> std::result::Result<usize, String> {
        WgpuBackend::adapter_count()
    }

    fn open(&self, index: usize, cap: Option<u64>) -> Result<Box<dyn Backend>> {
        Ok(Box::new(WgpuBackend::open(index, cap)?))
    }

    fn assumed_info(&self, name: String, total_bytes: u64, _gpu: GpuModel) -> DeviceInfo {
        assumed_info(name, total_bytes)
    }

    fn hardware(&self) -> Hardware {
        Hardware {
            host_memory: false,
            // A run's launches and its host round trips (map, read back).
            run_overhead_seconds: 300e-6,
            measures_programs: false,
            software_driver_bytes: SOFTWARE_DRIVER_BYTES,
            staging_bytes: STAGING_BYTES,
            packed_operands: false,
        }
    }
}

/// Resident memory a software GPU's driver (lavapipe) takes in the process once a run
/// opens the device, beyond the buffers the plan places and the staging copies of
/// transfers: the device itself and the compute pipelines it compiles with LLVM.
/// Measured after planning at 15–28 MiB (30 planned, for noise) for the runs of
/// docs/host-memory.md (more kernels, more); the listing's own device, opened and dropped
/// before planning, is in the process's peak already.
pub const SOFTWARE_DRIVER_BYTES: u64 = 30 << 20;
