//! [`PROVIDER`]: the GPUs the CUDA driver sees, as the engine's registry sees them.

use tensorfit_core::{Backend, DeviceInfo, DeviceKind, GpuModel, Hardware, Provider, Result};

use crate::assumed::assumed_info;
use crate::backend::CudaBackend;

/// CUDA's provider.
pub static PROVIDER: CudaProvider = CudaProvider;

/// See [`PROVIDER`].
#[derive(Debug, Clone, Copy)]
pub struct CudaProvider;

impl Provider for CudaProvider {
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda
    }

    fn count(&self) -> std::result::Result<usize, String> {
        crate::device_count()
    }

    fn open(&self, index: usize, cap: Option<u64>) -> Result<Box<dyn Backend>> {
        Ok(Box::new(CudaBackend::open(index, cap)?))
    }

    fn assumed_info(&self, name: String, total_bytes: u64, gpu: GpuModel) -> DeviceInfo {
        assumed_info(name, total_bytes, gpu)
    }

    fn hardware(&self) -> Hardware {
        Hardware::OWN_MEMORY
    }
}
