//! Devices that are not here, planned as if they were (`tensorfit plan --assume h100`,
//! `--assume cuda=2GiB`): "will this job fit a 2 GB GTX 750, a 16 GB T4, an 80 GB H100?"
//! before buying or renting one.
//!
//! An assumed device has the figures its backend would report on an idle device of that
//! size (alignment, largest buffer, and the memory the backend holds itself: the CUDA
//! context and cuBLAS workspace, wgpu's parameter ring; see `devices::assumed_info`), so
//! its plan is the plan the real device would get. Its time is not measured: a preset
//! carries its published FP32 peak, and its estimate is the GPU FLOP model at that peak
//! (optimistic: a real device is measured, and reaches less than its peak); a device
//! given only as KIND=SIZE has no time estimate at all.

use tensorfit_core::{DeviceKind, Error, Result};
use tensorfit_plan::{format_bytes, parse_size};

use crate::devices::{assumed_info, parse_kind, DeviceStatus, GpuModel};

/// A named GPU with its memory and speed as published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preset {
    /// What `--assume` takes (`h100`).
    pub key: &'static str,
    /// The device's name, as its backend would report it.
    pub name: &'static str,
    /// The kind of device it is.
    pub kind: DeviceKind,
    /// Published memory, in GiB.
    pub memory_gib: u64,
    /// Streaming multiprocessors and compute capability (CUDA presets).
    pub gpu: Option<GpuModel>,
    /// Published single-precision (FP32) peak, GFLOP/s.
    pub peak_gflops: f64,
}

const fn cuda(sms: u32, major: i32, minor: i32) -> Option<GpuModel> {
    Some(GpuModel {
        sms,
        compute_capability: (major, minor),
    })
}

/// The presets, with their vendors' published memory and FP32 peak. The GTX 750 (the
/// seed report's card, sm_50) is a wgpu device: current NVRTC cannot target it.
pub const PRESETS: [Preset; 6] = [
    Preset {
        key: "gtx750",
        name: "NVIDIA GeForce GTX 750",
        kind: DeviceKind::Wgpu,
        memory_gib: 2,
        gpu: None,
        peak_gflops: 1_044.0,
    },
    Preset {
        key: "t4",
        name: "NVIDIA T4",
        kind: DeviceKind::Cuda,
        memory_gib: 16,
        gpu: cuda(40, 7, 5),
        peak_gflops: 8_100.0,
    },
    Preset {
        key: "a100-40gb",
        name: "NVIDIA A100 40GB",
        kind: DeviceKind::Cuda,
        memory_gib: 40,
        gpu: cuda(108, 8, 0),
        peak_gflops: 19_500.0,
    },
    Preset {
        key: "a100-80gb",
        name: "NVIDIA A100 80GB",
        kind: DeviceKind::Cuda,
        memory_gib: 80,
        gpu: cuda(108, 8, 0),
        peak_gflops: 19_500.0,
    },
    Preset {
        key: "h100",
        name: "NVIDIA H100 80GB (SXM)",
        kind: DeviceKind::Cuda,
        memory_gib: 80,
        gpu: cuda(132, 9, 0),
        peak_gflops: 67_000.0,
    },
    Preset {
        key: "h200",
        name: "NVIDIA H200 141GB",
        kind: DeviceKind::Cuda,
        memory_gib: 141,
        gpu: cuda(132, 9, 0),
        peak_gflops: 67_000.0,
    },
];

/// A CUDA GPU given only by its size is assumed to have the largest preset's number of
/// SMs (its context is the largest estimate), so its plan errs on the safe side.
const UNKNOWN_GPU: GpuModel = GpuModel {
    sms: 132,
    compute_capability: (9, 0),
};

/// What is known about an assumed device besides its [`tensorfit_core::DeviceInfo`].
#[derive(Debug, Clone, PartialEq)]
pub struct Assumed {
    /// The entry as given (`h100`, `cuda=2GiB`).
    pub entry: String,
    /// Published FP32 peak, GFLOP/s, where known: the time estimate's basis.
    pub peak_gflops: Option<f64>,
}

impl Assumed {
    /// One line saying what was assumed, for the plan's footer.
    pub fn describe(&self, status: &DeviceStatus) -> String {
        let Ok(info) = &status.info else {
            return format!("{}: {}", status.id, self.entry);
        };
        let time = match self.peak_gflops {
            Some(g) => format!(
                "time from the FLOP model at the published FP32 peak, {:.1} TFLOP/s (not measured; optimistic)",
                g / 1e3
            ),
            None => "no time estimate (nothing measured; name a preset for one)".into(),
        };
        format!(
            "{}: {}, {} (assumed, not present); backend holds {}; {time}",
            status.id,
            info.name,
            format_bytes(info.total_bytes),
            format_bytes(info.overhead_bytes),
        )
    }
}

/// The preset named `key` (case and `-`/`_` ignored: `A100_80GB`, `a10080gb`).
pub fn preset(key: &str) -> Option<&'static Preset> {
    let norm = |s: &str| {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let want = norm(key);
    PRESETS.iter().find(|p| norm(p.key) == want)
}

/// The devices of `--assume` entries (`h100`, `cuda=2GiB`, `wgpu=1.67GiB`, `cpu=64GB`),
/// each with an id of its own (`h100 (assumed)`, `cuda=2GiB (assumed)`; a repeated
/// entry gets `#2`, `#3`). Errors name the flag and the entry.
pub fn parse(entries: &[String]) -> Result<Vec<DeviceStatus>> {
    let mut out: Vec<DeviceStatus> = Vec::new();
    for entry in entries {
        let entry = entry.trim();
        let bad = |why: String| Error::input(format!("--assume `{entry}`: {why}"));
        let inner = |e: Error| match e {
            Error::Input(m) => bad(m),
            other => bad(other.to_string()),
        };
        let (kind, info, peak) = match entry.split_once('=') {
            Some((kind, size)) => {
                let kind = parse_kind(kind).map_err(inner)?;
                let bytes = parse_size(size).map_err(inner)?;
                if bytes == 0 {
                    return Err(bad("a device of 0 bytes holds nothing".into()));
                }
                let name = format!("assumed {} device of {}", kind.name(), format_bytes(bytes));
                (kind, assumed_info(kind, name, bytes, UNKNOWN_GPU), None)
            }
            None => {
                let p = preset(entry).ok_or_else(|| {
                    bad(format!(
                        "not a preset ({}) nor KIND=SIZE such as cuda=2GiB",
                        PRESETS.map(|p| p.key).join(", ")
                    ))
                })?;
                let bytes = p.memory_gib << 30;
                let gpu = p.gpu.unwrap_or(UNKNOWN_GPU);
                (
                    p.kind,
                    assumed_info(p.kind, p.name.into(), bytes, gpu),
                    Some(p.peak_gflops),
                )
            }
        };
        let label = entry.to_ascii_lowercase();
        let repeats = out
            .iter()
            .filter(|d| d.assumed.as_ref().is_some_and(|a| a.entry == label))
            .count();
        let id = match repeats {
            0 => format!("{label} (assumed)"),
            n => format!("{label}#{} (assumed)", n + 1),
        };
        out.push(DeviceStatus {
            id,
            kind,
            index: repeats,
            info,
            assumed: Some(Assumed {
                entry: label,
                peak_gflops: peak,
            }),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(e: &[&str]) -> Vec<String> {
        e.iter().map(|s| s.to_string()).collect()
    }

    // Each backend's figures for an absent device are its own (without the feature, the
    // device is listed as not in this build: `devices.rs`).
    #[cfg(all(feature = "cuda", feature = "wgpu"))]
    #[test]
    fn presets_have_their_published_memory_and_their_backends_fixed_costs() {
        let d = parse(&entries(&["h100", "GTX750", "a100_40GB"])).unwrap();
        let info = |i: usize| d[i].info.clone().unwrap();
        assert_eq!(info(0).total_bytes, 80 << 30);
        assert_eq!(info(0).kind, DeviceKind::Cuda);
        assert_eq!(info(0).alignment_bytes, 256);
        // The context of 132 SMs and Hopper's 32 MiB cuBLAS workspace.
        assert!(
            info(0).overhead_bytes > 32 << 20,
            "{}",
            info(0).overhead_bytes
        );
        assert_eq!(info(1).kind, DeviceKind::Wgpu);
        assert_eq!(info(1).total_bytes, 2 << 30);
        assert_eq!(info(2).total_bytes, 40 << 30);
        assert_eq!(d[0].id, "h100 (assumed)");
        assert_eq!(d[0].assumed.as_ref().unwrap().peak_gflops, Some(67_000.0));
        for p in PRESETS {
            assert!(preset(p.key).is_some(), "{}", p.key);
        }
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn a_kind_and_size_is_a_device_of_that_backend_without_a_time_estimate() {
        let d = parse(&entries(&["cuda=2GiB", "cpu=64GB", "cuda=2GiB"])).unwrap();
        assert_eq!(d[0].info.as_ref().unwrap().total_bytes, 2 << 30);
        assert_eq!(d[1].info.as_ref().unwrap().overhead_bytes, 0);
        assert_eq!(d[1].info.as_ref().unwrap().total_bytes, 64_000_000_000);
        assert_eq!(d[0].assumed.as_ref().unwrap().peak_gflops, None);
        assert_eq!(d[2].id, "cuda=2gib#2 (assumed)");
    }

    #[test]
    fn unknown_presets_and_bad_sizes_are_refused_naming_the_flag() {
        for bad in ["gtx1080", "cuda=lots", "tpu=2GiB", "cuda=0"] {
            let e = parse(&entries(&[bad])).unwrap_err().to_string();
            assert!(e.contains("--assume") && e.contains(bad), "{e}");
        }
        let e = parse(&entries(&["gtx1080"])).unwrap_err().to_string();
        assert!(e.contains("h100"), "lists the presets: {e}");
    }
}
