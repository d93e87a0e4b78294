//! Device choice: the fastest candidate plan that fits, and why each other was rejected.
//!
//! A candidate is one device with one strategy and its memory plan. It fits when its
//! estimated peak stays below the device's usable memory: what the device reports free
//! (or its capacity, where it cannot tell), less a safety margin (default 10%) for what
//! the plan cannot see (the driver, other processes, fragmentation in the allocator).
//! Among fitting candidates the one with the smallest estimated time wins; a software GPU
//! (such as lavapipe) is never chosen unless the user asked for it.

use serde_json::{json, Value};
use tensorfit_core::{DeviceInfo, DeviceKind};

use crate::size::format_bytes;

/// The default safety margin: 10% of free memory stays unused.
pub const DEFAULT_MARGIN: f64 = 0.10;

/// One device × strategy, planned.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Device as shown to people: `cpu`, `wgpu:0`, ...
    pub device: String,
    pub kind: DeviceKind,
    pub device_name: String,
    pub software: bool,
    /// Memory the plan may use: free (or total) less the margin.
    pub capacity_bytes: u64,
    pub estimated_peak_bytes: u64,
    pub fits: bool,
    /// Strategy in words: `whole sequence`, `streamed in time chunks of 250`, ...
    pub strategy: String,
    pub estimated_seconds: f64,
    /// The plan's parts (labels and bytes), summing to the estimated peak.
    pub breakdown: Vec<(&'static str, u64)>,
    /// Why it was chosen or rejected.
    pub reason: String,
}

/// Usable bytes on a device: free (or total) memory less `margin` of it.
pub fn usable_bytes(info: &DeviceInfo, margin: f64) -> u64 {
    let base = info
        .free_bytes
        .unwrap_or(info.total_bytes)
        .min(info.total_bytes);
    (base as f64 * (1.0 - margin.clamp(0.0, 1.0))) as u64
}

impl Candidate {
    /// A candidate for `info` with a plan of `peak` bytes; `fits` and `reason` are set
    /// from the capacity.
    pub fn new(
        device: String,
        info: &DeviceInfo,
        margin: f64,
        strategy: String,
        estimated_peak_bytes: u64,
        estimated_seconds: f64,
        breakdown: Vec<(&'static str, u64)>,
    ) -> Self {
        let capacity_bytes = usable_bytes(info, margin);
        let fits = estimated_peak_bytes <= capacity_bytes;
        let reason = if fits {
            String::new()
        } else {
            format!(
                "needs {} > {} usable ({:.0}% margin kept)",
                format_bytes(estimated_peak_bytes),
                format_bytes(capacity_bytes),
                margin * 100.0
            )
        };
        Candidate {
            device,
            kind: info.kind,
            device_name: info.name.clone(),
            software: info.software,
            capacity_bytes,
            estimated_peak_bytes,
            fits,
            strategy,
            estimated_seconds,
            breakdown,
            reason,
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "device": self.device,
            "kind": self.kind.name(),
            "name": self.device_name,
            "software": self.software,
            "capacity_bytes": self.capacity_bytes,
            "estimated_peak_bytes": self.estimated_peak_bytes,
            "fits": self.fits,
            "strategy": self.strategy,
            "estimated_seconds": self.estimated_seconds,
            "breakdown": self.breakdown.iter().map(|(l, b)| json!({"part": l, "bytes": b})).collect::<Vec<_>>(),
            "reason": self.reason,
        })
    }
}

/// Picks the fastest fitting candidate (a time of NaN, no estimate, counts as slowest;
/// equal times go to the smaller plan), filling in every candidate's reason. A software
/// device is chosen only when `allow_software` (the user asked for it): a software GPU
/// is far slower than the CPU it runs on, and takes its memory from the same host.
/// Returns the index, or `None` if nothing fits.
pub fn choose(candidates: &mut [Candidate], allow_software: bool) -> Option<usize> {
    let usable = |c: &Candidate| c.fits && (allow_software || !c.software);
    for c in candidates.iter_mut().filter(|c| c.fits && !usable(c)) {
        c.reason = "fits, but a software device is used only when asked for (--device wgpu)".into();
    }
    let best = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| usable(c))
        .min_by(|(_, a), (_, b)| {
            a.estimated_seconds
                .total_cmp(&b.estimated_seconds)
                .then(a.estimated_peak_bytes.cmp(&b.estimated_peak_bytes))
        })
        .map(|(i, _)| i)?;
    let (best_dev, best_secs) = (
        candidates[best].device.clone(),
        candidates[best].estimated_seconds,
    );
    for (i, c) in candidates.iter_mut().enumerate() {
        if i == best && best_secs.is_nan() {
            c.reason = "chosen: fits (no time estimate)".into();
        } else if i == best {
            c.reason = "chosen: fastest plan that fits".into();
        } else if usable(c) && (c.estimated_seconds.is_nan() || best_secs.is_nan()) {
            // Devices that are not here may have no time estimate (NaN, ordered last).
            c.reason = format!("fits; no time estimate to compare, {best_dev} preferred");
        } else if usable(c) {
            c.reason = format!(
                "fits, but slower (estimated {:.3} s vs {:.3} s on {best_dev})",
                c.estimated_seconds, best_secs
            );
        }
    }
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: DeviceKind, total: u64, free: Option<u64>, software: bool) -> DeviceInfo {
        DeviceInfo {
            kind,
            name: kind.name().into(),
            total_bytes: total,
            free_bytes: free,
            capacity_source: "test".into(),
            software,
            max_buffer_bytes: u64::MAX,
            alignment_bytes: 4,
            overhead_bytes: 0,
        }
    }

    /// A candidate with the tests' 10% margin and no breakdown.
    fn candidate(
        device: &str,
        info: &DeviceInfo,
        strategy: &str,
        peak: u64,
        secs: f64,
    ) -> Candidate {
        Candidate::new(
            device.into(),
            info,
            0.1,
            strategy.into(),
            peak,
            secs,
            vec![],
        )
    }

    #[test]
    fn fastest_fitting_wins_and_every_other_says_why() {
        let gpu = info(DeviceKind::Cuda, 2 << 30, Some(1 << 30), false);
        let cpu = info(DeviceKind::Cpu, 16 << 30, Some(8 << 30), false);
        let mut c = vec![
            candidate("cuda:0", &gpu, "whole", 1 << 30, 1.0),
            candidate("cuda:0", &gpu, "chunks of 250", 300 << 20, 1.2),
            candidate("cpu", &cpu, "whole", 1 << 30, 40.0),
        ];
        assert!(!c[0].fits, "1 GiB does not fit in 90% of 1 GiB free");
        assert_eq!(choose(&mut c, false), Some(1));
        assert!(c[0].reason.contains("usable"), "{}", c[0].reason);
        assert!(c[2].reason.contains("slower"), "{}", c[2].reason);
    }

    #[test]
    fn software_devices_are_chosen_only_when_asked_for() {
        let lavapipe = info(DeviceKind::Wgpu, 8 << 30, None, true);
        let cpu = info(DeviceKind::Cpu, 8 << 30, Some(8 << 30), false);
        let mut c = vec![
            candidate("wgpu:0", &lavapipe, "whole", 1 << 20, 0.5),
            candidate("cpu", &cpu, "whole", 1 << 20, 1.0),
        ];
        assert_eq!(choose(&mut c, false), Some(1));
        assert!(c[0].reason.contains("software"));
        assert_eq!(choose(&mut c, true), Some(0));
        // Even when it is the only device that fits.
        let tiny = info(DeviceKind::Cpu, 1 << 10, Some(1 << 10), false);
        let mut c = vec![
            candidate("wgpu:0", &lavapipe, "whole", 1 << 20, 0.5),
            candidate("cpu", &tiny, "whole", 1 << 20, 1.0),
        ];
        assert_eq!(choose(&mut c, false), None);
        assert!(c[0].reason.contains("--device wgpu"), "{}", c[0].reason);
    }

    #[test]
    fn nothing_fits_gives_none() {
        let small = info(DeviceKind::Cpu, 1 << 20, None, false);
        let mut c = vec![candidate("cpu", &small, "whole", 1 << 30, 1.0)];
        assert_eq!(choose(&mut c, false), None);
    }
}
