//! [`PROVIDER`]: the CPU as the engine's registry sees it. One device, always present.

use tensorfit_core::{Backend, DeviceInfo, DeviceKind, GpuModel, Hardware, Provider, Result};

use crate::backend::{assumed_info, CpuBackend};

/// The CPU's provider.
pub static PROVIDER: CpuProvider = CpuProvider;

/// See [`PROVIDER`].
#[derive(Debug, Clone, Copy)]
pub struct CpuProvider;

impl Provider for CpuProvider {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cpu
    }

    fn count(&self) -> std::result::Result<usize, String> {
        Ok(1)
    }

    fn open(&self, _index: usize, cap: Option<u64>) -> Result<Box<dyn Backend>> {
        Ok(Box::new(match cap {
            Some(cap) => CpuBackend::with_capacity_cap(cap),
            None => CpuBackend::new(),
        }))
    }

    fn assumed_info(&self, name: String, total_bytes: u64, _gpu: GpuModel) -> DeviceInfo {
        assumed_info(name, total_bytes)
    }

    /// `cpu`: the machine is one device.
    fn device_id(&self, _index: usize) -> String {
        "cpu".into()
    }

    fn hardware(&self) -> Hardware {
        HARDWARE
    }
}

/// The CPU's facts: host memory, no launches (a program run's fixed cost is a few
/// function calls), cheap to measure, packed operands (`kernel_memory`).
pub const HARDWARE: Hardware = Hardware {
    host_memory: true,
    run_overhead_seconds: 50e-6,
    measures_programs: true,
    software_driver_bytes: 0,
    staging_bytes: 0,
    packed_operands: true,
};
