//! The devices this build can use: discovery, user memory caps, opening a backend.
//!
//! The backends themselves are the registry's providers (`registry.rs`); everything here
//! and above works with `Box<dyn Backend>` and [`DeviceInfo`]. A device that is absent
//! (no driver, no adapter, a backend not in this build) is reported with the reason,
//! never as an error, so the planner can move on to the next one.

use std::collections::HashMap;

use tensorfit_core::{Backend, DeviceInfo, DeviceKind, Error, Result};
use tensorfit_plan::parse_size;

pub use tensorfit_core::GpuModel;

pub use crate::registry::parse_kind;
use crate::registry::{self, Entry};

use crate::assume::Assumed;

/// User caps on device memory (`--device-memory wgpu=1.67GiB`), by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryCaps(pub HashMap<DeviceKind, u64>);

impl MemoryCaps {
    /// Parses `KIND=SIZE` entries such as `cpu=8GiB` or `wgpu=1.67GiB`, one per kind (a
    /// second cap for a kind is refused: which one was meant cannot be known).
    pub fn parse(entries: &[String]) -> Result<Self> {
        let mut caps = HashMap::new();
        for e in entries {
            // Each error names the flag and the entry, as `--assume`'s do.
            let bad = |why: String| Error::input(format!("--device-memory `{e}`: {why}"));
            let inner = |err: Error| match err {
                Error::Input(m) => bad(m),
                other => bad(other.to_string()),
            };
            let (kind, size) = e
                .split_once('=')
                .ok_or_else(|| bad("expected KIND=SIZE, such as wgpu=1.67GiB".into()))?;
            let kind = parse_kind(kind).map_err(inner)?;
            if caps
                .insert(kind, parse_size(size).map_err(inner)?)
                .is_some()
            {
                return Err(Error::input(format!(
                    "--device-memory gives {} a cap twice (`{e}` and an earlier one): give one per device kind",
                    kind.name()
                )));
            }
        }
        Ok(MemoryCaps(caps))
    }

    /// The cap for `kind`, in bytes, if one was given.
    pub fn get(&self, kind: DeviceKind) -> Option<u64> {
        self.0.get(&kind).copied()
    }
}

/// One device and whether it can be used.
#[derive(Debug, Clone)]
pub struct DeviceStatus {
    /// `cpu`, `wgpu:0`, `cuda:1`; for an assumed device, the `--assume` entry.
    pub id: String,
    /// The kind of device.
    pub kind: DeviceKind,
    /// Which device of its kind (`cuda:1` is 1): what [`open_device`] takes.
    pub index: usize,
    /// The device's figures, or why it cannot be used.
    pub info: std::result::Result<DeviceInfo, String>,
    /// Set for a device that is not here, planned as if it were (`--assume`).
    pub assumed: Option<Assumed>,
}

/// Every device with its status, in the registry's order (fastest kinds first): every
/// CUDA GPU the driver sees (`cuda:0`, `cuda:1`, ...), every usable wgpu adapter in order
/// of preference, the CPU. A kind with no device is one row saying why.
pub fn discover(caps: &MemoryCaps) -> Vec<DeviceStatus> {
    discover_kind(caps, None)
}

/// As [`discover`], for the devices of `kind` only (`None`: every kind). A run on the
/// CPU loads no GPU driver: counting wgpu's adapters loads every Vulkan driver present
/// (lavapipe's holds tens of megabytes of the process's memory), and a device of a kind
/// not asked for is never planned.
pub fn discover_kind(caps: &MemoryCaps, kind: Option<DeviceKind>) -> Vec<DeviceStatus> {
    let counts: Vec<_> = registry::entries()
        .into_iter()
        .filter(|e| kind.is_none_or(|only| only == e.kind()))
        .map(|e| match e {
            Entry::Built(p) => (p.kind(), p.count()),
            Entry::NotBuilt(k) => (k, Err(registry::not_built(k))),
        })
        .collect();
    statuses(&counts, |kind, index| {
        open_device(kind, index, caps)
            .map(|b| b.info())
            .map_err(|e| match e {
                Error::Backend { message, .. } => message,
                other => other.to_string(),
            })
    })
}

/// The statuses of `counts` devices of each kind (or, where counting failed, one row
/// with the reason), each opened by `info`.
pub fn statuses(
    counts: &[(DeviceKind, std::result::Result<usize, String>)],
    info: impl Fn(DeviceKind, usize) -> std::result::Result<DeviceInfo, String>,
) -> Vec<DeviceStatus> {
    let mut out = Vec::new();
    for (kind, count) in counts {
        let status = |index: usize, info: std::result::Result<DeviceInfo, String>| DeviceStatus {
            id: device_id(*kind, index),
            kind: *kind,
            index,
            info,
            assumed: None,
        };
        match count {
            Ok(n) if *n > 0 => out.extend((0..*n).map(|i| status(i, info(*kind, i)))),
            Ok(_) => out.push(status(0, Err("no device of this kind".into()))),
            Err(why) => out.push(status(0, Err(why.clone()))),
        }
    }
    out
}

/// `cpu`, `wgpu:1`, `cuda:0`: as the kind's provider names its devices (`kind:index`
/// for a kind this build leaves out).
pub fn device_id(kind: DeviceKind, index: usize) -> String {
    match registry::provider(kind) {
        Ok(p) => p.device_id(index),
        Err(_) => format!("{}:{index}", kind.name()),
    }
}

/// The kind and index of a device id made by [`device_id`].
pub fn parse_id(id: &str) -> Option<(DeviceKind, usize)> {
    match id.split_once(':') {
        None => {
            let kind = parse_kind(id).ok()?;
            (device_id(kind, 0) == id).then_some((kind, 0))
        }
        Some((kind, index)) => Some((parse_kind(kind).ok()?, index.parse().ok()?)),
    }
}

/// Opens the first device of `kind`, with the user's cap if any.
pub fn open(kind: DeviceKind, caps: &MemoryCaps) -> Result<Box<dyn Backend>> {
    open_device(kind, 0, caps)
}

/// Opens device `index` of `kind` (`cuda:1` is CUDA device 1), with the user's cap on
/// that kind if any.
pub fn open_device(kind: DeviceKind, index: usize, caps: &MemoryCaps) -> Result<Box<dyn Backend>> {
    let provider = registry::provider(kind).map_err(|message| Error::Backend {
        backend: kind.name(),
        message,
    })?;
    provider.open(index, caps.get(kind))
}

/// The figures the backend of `kind` would report for an idle device of `total_bytes`
/// that is not here (see `assume.rs`); `gpu` sizes a CUDA context. A kind whose backend
/// is not in this build cannot be planned, and says why.
pub fn assumed_info(
    kind: DeviceKind,
    name: String,
    total_bytes: u64,
    gpu: GpuModel,
) -> std::result::Result<DeviceInfo, String> {
    Ok(registry::provider(kind)?.assumed_info(name, total_bytes, gpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(kind: DeviceKind, index: usize) -> std::result::Result<DeviceInfo, String> {
        // The CPU's figures under each kind: the listing, not the backends, is tested.
        Ok(DeviceInfo {
            kind,
            ..tensorfit_cpu::assumed_info(format!("fake {index}"), (index as u64 + 1) << 30)
        })
    }

    #[test]
    fn every_device_of_a_kind_gets_its_own_id_and_index() {
        let counts = [
            (DeviceKind::Cuda, Ok(2)),
            (DeviceKind::Wgpu, Ok(3)),
            (DeviceKind::Cpu, Ok(1)),
        ];
        let found = statuses(&counts, fake);
        let ids: Vec<&str> = found.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(
            ids,
            ["cuda:0", "cuda:1", "wgpu:0", "wgpu:1", "wgpu:2", "cpu"]
        );
        for d in &found {
            assert_eq!(parse_id(&d.id), Some((d.kind, d.index)));
            assert_eq!(d.info.as_ref().unwrap().name, format!("fake {}", d.index));
        }
    }

    #[test]
    fn a_kind_that_cannot_be_counted_is_one_row_with_the_reason() {
        let counts = [
            (
                DeviceKind::Cuda,
                Err("no CUDA driver found (libcuda.so)".to_string()),
            ),
            (DeviceKind::Wgpu, Ok(0)),
        ];
        let found = statuses(&counts, fake);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].id, "cuda:0");
        assert_eq!(
            found[0].info.as_ref().unwrap_err(),
            "no CUDA driver found (libcuda.so)"
        );
        assert!(found[1].info.is_err());
        assert_eq!(parse_id("cuda:x"), None);
        assert_eq!(parse_id("gpu"), None);
    }

    /// The kinds whose backend this build leaves out (the `wgpu` and `cuda` features).
    fn not_in_this_build() -> Vec<DeviceKind> {
        let mut kinds = Vec::new();
        if cfg!(not(feature = "wgpu")) {
            kinds.push(DeviceKind::Wgpu);
        }
        if cfg!(not(feature = "cuda")) {
            kinds.push(DeviceKind::Cuda);
        }
        kinds
    }

    #[test]
    fn a_kind_not_in_this_build_is_listed_and_assumed_with_the_reason() {
        let gpu = GpuModel {
            sms: 10,
            compute_capability: (8, 0),
        };
        for kind in not_in_this_build() {
            let found = discover_kind(&MemoryCaps::default(), Some(kind));
            assert_eq!(found.len(), 1, "{found:?}");
            let why = found[0].info.as_ref().unwrap_err();
            assert!(why.contains("not in this build"), "{why}");
            let assumed = assumed_info(kind, "absent".into(), 1 << 30, gpu);
            assert!(assumed.unwrap_err().contains(kind.name()));
            let opened = open_device(kind, 0, &MemoryCaps::default()).map(|_| ());
            assert!(opened
                .unwrap_err()
                .to_string()
                .contains("not in this build"));
        }
        // The CPU is in every build.
        assert!(assumed_info(DeviceKind::Cpu, "cpu".into(), 1 << 30, gpu).is_ok());
    }
}
