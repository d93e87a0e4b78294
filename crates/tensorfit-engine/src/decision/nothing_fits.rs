//! Why a job fits on no device, as fields an app can act on and as the message the
//! command line prints.

use tensorfit_core::{DeviceKind, Error};
use tensorfit_plan::format_bytes;

use super::Decision;
use crate::devices::parse_id;

/// A job that fits on no allowed device: its smallest plan, the most memory any allowed
/// device has for it, and what the job's memory grows with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NothingFits {
    /// The device of the smallest plan found (`cpu`, `cuda:0`).
    pub device: String,
    /// Bytes the smallest plan needs.
    pub requested: u64,
    /// The largest usable capacity of any allowed device, in bytes.
    pub available: u64,
    /// The smallest plan's strategy, the device with the largest capacity and where that
    /// figure comes from, and what the job's memory grows with, for people.
    pub detail: String,
}

impl Decision {
    /// Why nothing fits: [`NothingFits`] where some device was planned; else the error
    /// that says why no device could be used (none allowed is usable, or only a software
    /// device fits, which runs only when asked for by kind).
    pub fn why_nothing_fits(&self) -> Result<NothingFits, Error> {
        if let Some(sw) = self.candidates.iter().find(|c| c.fits && c.software) {
            let kind = parse_id(&sw.device).map_or(DeviceKind::Wgpu, |(k, _)| k);
            return Err(Error::input(format!(
                "only {} ({}) fits ({}), a software device, used only when asked for by kind: add --device {} (in a program, DevicePolicy::only({})) to run there",
                sw.device, sw.device_name, sw.strategy, kind.name(), kind.in_code()
            )));
        }
        let smallest = self
            .candidates
            .iter()
            .min_by_key(|c| c.estimated_peak_bytes);
        let largest = self
            .candidates
            .iter()
            .zip(&self.plans)
            .max_by_key(|(c, _)| c.capacity_bytes);
        // What the job's memory grows with: an evaluation holds no history to truncate.
        let grows = match self.unit {
            "training step" => "training memory depends on --batch and --tbptt",
            _ => "inference memory depends on the batch, the sequence length and the model's size",
        };
        match (smallest, largest) {
            (Some(s), Some((l, planned))) => Ok(NothingFits {
                device: s.device.clone(),
                requested: s.estimated_peak_bytes,
                available: l.capacity_bytes,
                detail: format!(
                    "smallest plan: {} on {}, {}; largest usable capacity: {} on {}, from {}; {grows}",
                    format_bytes(s.estimated_peak_bytes),
                    s.device,
                    s.strategy,
                    format_bytes(l.capacity_bytes),
                    l.device,
                    planned.device.capacity_source
                ),
            }),
            _ => Err(Error::input(format!(
                "none of the devices allowed can be used ({}); `tensorfit devices` lists those present, and --device auto picks among them",
                self.unavailable
                    .iter()
                    .map(|(d, w)| format!("{d}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))),
        }
    }

    /// The error for a job that fits nowhere ([`Decision::why_nothing_fits`]): out of
    /// memory on every device, with the smallest plan and the largest capacity.
    pub fn nothing_fits(&self) -> Error {
        match self.why_nothing_fits() {
            Ok(n) => Error::OutOfMemory {
                device: format!("every device ({})", n.detail),
                requested: n.requested,
                available: n.available,
            },
            Err(e) => e,
        }
    }
}
