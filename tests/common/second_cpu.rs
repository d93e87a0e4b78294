//! A second CPU backend, as a backend crate would add one: the CPU's kernels under
//! another kind, `cpu-reference`, with a provider registered at run time. The tests that
//! register it ([`register`]: the conformance suite, `second_backend.rs`) check that the
//! planner, discovery and the conformance suite see a new backend with no other change.

use std::sync::Once;

use tensorfit::core::{
    Backend, BufferId, DeviceInfo, DeviceKind, GpuModel, Hardware, MemoryInfo, Op, Provider,
    Result, TensorView,
};
use tensorfit::cpu::CpuBackend;

/// The second CPU's kind.
pub const KIND: DeviceKind = DeviceKind::new("cpu-reference");

/// [`CpuBackend`], reporting itself as a device of [`KIND`].
#[derive(Debug)]
pub struct ReferenceCpu(CpuBackend);

impl Backend for ReferenceCpu {
    fn name(&self) -> String {
        KIND.name().into()
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: KIND,
            ..self.0.info()
        }
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        self.0.allocate(bytes)
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        self.0.free(buffer)
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        self.0.write(view, data)
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        self.0.read(view, out)
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        self.0.execute(op, inputs, outputs)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.0.synchronize()
    }

    fn memory(&self) -> MemoryInfo {
        self.0.memory()
    }

    fn reset_peak(&mut self) {
        self.0.reset_peak()
    }
}

/// The provider of [`KIND`]: one device, the CPU's figures and facts.
#[derive(Debug)]
pub struct SecondCpu;

impl Provider for SecondCpu {
    fn kind(&self) -> DeviceKind {
        KIND
    }

    fn count(&self) -> std::result::Result<usize, String> {
        Ok(1)
    }

    fn open(&self, _index: usize, cap: Option<u64>) -> Result<Box<dyn Backend>> {
        Ok(Box::new(ReferenceCpu(match cap {
            Some(cap) => CpuBackend::with_capacity_cap(cap),
            None => CpuBackend::new(),
        })))
    }

    fn assumed_info(&self, name: String, total_bytes: u64, _gpu: GpuModel) -> DeviceInfo {
        DeviceInfo {
            kind: KIND,
            ..tensorfit::cpu::assumed_info(name, total_bytes)
        }
    }

    fn hardware(&self) -> Hardware {
        tensorfit::cpu::HARDWARE
    }
}

/// Registers the second CPU's provider, once per process.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tensorfit::registry::register(&SecondCpu).expect("a new kind");
    });
}
