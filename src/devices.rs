//! The devices this build can use: discovery, user memory caps, opening a backend.
//!
//! This is the one place that names concrete backends. Everything above works with
//! `Box<dyn Backend>` and [`DeviceInfo`]. A device that is absent (no driver, no adapter,
//! a backend not in this build) is reported with the reason, never as an error, so the
//! planner can move on to the next one.

use std::collections::HashMap;

use tensorfit_core::{Backend, DeviceInfo, DeviceKind, Error, Result};
use tensorfit_cpu::CpuBackend;
use tensorfit_plan::parse_size;

/// User caps on device memory (`--device-memory wgpu=1.67GiB`), by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryCaps(pub HashMap<DeviceKind, u64>);

impl MemoryCaps {
    /// Parses `KIND=SIZE` entries such as `cpu=8GiB` or `wgpu=1.67GiB`, one per kind (a
    /// second cap for a kind is refused: which one was meant cannot be known).
    pub fn parse(entries: &[String]) -> Result<Self> {
        let mut caps = HashMap::new();
        for e in entries {
            let (kind, size) = e.split_once('=').ok_or_else(|| {
                Error::input(format!("`{e}`: expected KIND=SIZE, such as wgpu=1.67GiB"))
            })?;
            let kind = parse_kind(kind)?;
            if caps.insert(kind, parse_size(size)?).is_some() {
                return Err(Error::input(format!(
                    "--device-memory gives {} a cap twice (`{e}` and an earlier one): give one per device kind",
                    kind.name()
                )));
            }
        }
        Ok(MemoryCaps(caps))
    }

    pub fn get(&self, kind: DeviceKind) -> Option<u64> {
        self.0.get(&kind).copied()
    }
}

/// `cpu`, `wgpu` or `cuda`.
pub fn parse_kind(text: &str) -> Result<DeviceKind> {
    match text.trim().to_ascii_lowercase().as_str() {
        "cpu" => Ok(DeviceKind::Cpu),
        "wgpu" | "vulkan" => Ok(DeviceKind::Wgpu),
        "cuda" => Ok(DeviceKind::Cuda),
        other => Err(Error::input(format!(
            "unknown device kind `{other}` (cpu, wgpu, cuda)"
        ))),
    }
}

/// One device and whether it can be used.
#[derive(Debug, Clone)]
pub struct DeviceStatus {
    /// `cpu`, `wgpu:0`, `cuda:0`.
    pub id: String,
    pub kind: DeviceKind,
    /// The device's figures, or why it cannot be used.
    pub info: std::result::Result<DeviceInfo, String>,
}

/// Every device kind with its status, fastest kinds first.
pub fn discover(caps: &MemoryCaps) -> Vec<DeviceStatus> {
    [DeviceKind::Cuda, DeviceKind::Wgpu, DeviceKind::Cpu]
        .into_iter()
        .map(|kind| DeviceStatus {
            id: device_id(kind),
            kind,
            info: open(kind, caps).map(|b| b.info()).map_err(|e| match e {
                Error::Backend { message, .. } => message,
                other => other.to_string(),
            }),
        })
        .collect()
}

fn device_id(kind: DeviceKind) -> String {
    match kind {
        DeviceKind::Cpu => "cpu".into(),
        other => format!("{}:0", other.name()),
    }
}

/// Opens the backend of `kind`, with the user's cap if any.
pub fn open(kind: DeviceKind, caps: &MemoryCaps) -> Result<Box<dyn Backend>> {
    match kind {
        DeviceKind::Cpu => Ok(Box::new(match caps.get(kind) {
            Some(cap) => CpuBackend::with_capacity_cap(cap),
            None => CpuBackend::new(),
        })),
        DeviceKind::Wgpu => Ok(Box::new(match caps.get(kind) {
            Some(cap) => tensorfit_wgpu::WgpuBackend::with_capacity_cap(cap)?,
            None => tensorfit_wgpu::WgpuBackend::new()?,
        })),
        DeviceKind::Cuda => Ok(Box::new(tensorfit_cuda::CudaBackend::open(
            0,
            caps.get(kind),
        )?)),
    }
}
