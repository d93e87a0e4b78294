//! The Provider trait: what a backend crate tells the engine about its kind of device,
//! besides the [`Backend`] it opens.
//!
//! Each backend crate exposes exactly one provider (`tensorfit_cpu::PROVIDER`), and the
//! engine's registry lists them, one line each under the backend's feature. Discovery,
//! opening, `--assume`, the `--device` flag and the planner's facts about the hardware
//! all go through the provider, so adding a backend changes no code that matches on
//! kinds (`docs/adding-a-backend.md`).

use std::fmt;

use crate::backend::{Backend, DeviceInfo, DeviceKind, GpuModel};
use crate::error::Result;

/// One kind of device: how to find, open and describe its devices. Object-safe, and
/// shared by every thread of the process (the registry holds `&'static dyn Provider`).
pub trait Provider: Send + Sync + fmt::Debug {
    /// The kind of its devices; its name is what `--device` and `--device-memory` take.
    fn kind(&self) -> DeviceKind;

    /// Other names users may type for the kind (`vulkan` for wgpu).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// How many devices of the kind are here (`wgpu:0` .. `wgpu:{n-1}`), or why none can
    /// be counted (no driver). Never panics; loads the kind's driver.
    fn count(&self) -> std::result::Result<usize, String>;

    /// Opens device `index`, holding at most `cap` bytes where a cap is given. A device
    /// that cannot be opened is an [`crate::Error::Backend`] saying why.
    fn open(&self, index: usize, cap: Option<u64>) -> Result<Box<dyn Backend>>;

    /// The figures this backend would report for an idle device named `name` with
    /// `total_bytes` of memory that is not here (`tensorfit plan --assume`); `gpu` sizes
    /// what a GPU's driver holds where that depends on the model (a CUDA context).
    fn assumed_info(&self, name: String, total_bytes: u64, gpu: GpuModel) -> DeviceInfo;

    /// The id of device `index` in tables and messages: `wgpu:1`. A kind that always has
    /// exactly one device may drop the index (`cpu`).
    fn device_id(&self, index: usize) -> String {
        format!("{}:{index}", self.kind().name())
    }

    /// What the planner needs to know about the kind's hardware.
    fn hardware(&self) -> Hardware;
}

/// The planner's facts about a kind of device, besides each device's [`DeviceInfo`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hardware {
    /// The device's memory is the host's (the CPU): the job's host bytes come off its
    /// free memory, and its plan counts in the process's resident memory. A software
    /// device ([`DeviceInfo::software`]) shares the host's memory whatever this says.
    pub host_memory: bool,
    /// Seconds a program run costs besides its arithmetic (kernel launches, host round
    /// trips): the FLOP model's fixed cost per run, where runs are not measured.
    pub run_overhead_seconds: f64,
    /// Time estimates come from running the model's own programs on the device
    /// (`tensorfit_engine::estimate`), not from the FLOP model: cheap where nothing is
    /// compiled per shape.
    pub measures_programs: bool,
    /// Host bytes a software device's driver holds once the device is open, beyond the
    /// buffers (lavapipe's device and compiled pipelines); 0 where there is none.
    pub software_driver_bytes: u64,
    /// The largest piece a transfer is staged in on the host (a software device holds
    /// it in host memory besides the plan); 0 where transfers are not staged.
    pub staging_bytes: u64,
    /// The kernels keep packed copies of product operands in host memory, outside the
    /// device plan (`tensorfit_cpu::kernel_memory`): the planner counts them for a job
    /// on such a device.
    pub packed_operands: bool,
}

impl Hardware {
    /// A device with memory of its own that holds nothing on the host, estimated by the
    /// FLOP model with a GPU's fixed cost per run (launches, host round trips): CUDA's
    /// facts, and those assumed for a kind this build has no provider for.
    pub const OWN_MEMORY: Hardware = Hardware {
        host_memory: false,
        run_overhead_seconds: 300e-6,
        measures_programs: false,
        software_driver_bytes: 0,
        staging_bytes: 0,
        packed_operands: false,
    };
}
