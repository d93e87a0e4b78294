//! [`DevicePolicy`]: which devices a job may run on, and how much of their memory.

use tensorfit_core::DeviceKind;
use tensorfit_plan::DEFAULT_MARGIN;

use super::error::{BadInput, Error, Result};
use crate::calibrate::Calibration;
use crate::decision::Request;
use crate::devices::MemoryCaps;

/// Which devices a job may use: every device (the fastest it fits on wins; software GPUs
/// only when asked for) or one kind, each kind's memory capped if the app says so, and a
/// fraction of free memory left unused.
///
/// ```
/// use tensorfit::{DeviceKind, DevicePolicy};
/// let policy = DevicePolicy::auto()
///     .cap(DeviceKind::Cuda, 336 << 20)
///     .margin(0.1)
///     .unwrap();
/// assert_eq!(policy.kind(), None);
/// ```
#[derive(Debug, Clone)]
pub struct DevicePolicy {
    kind: Option<DeviceKind>,
    caps: MemoryCaps,
    margin: f64,
    calibration: Calibration,
}

impl Default for DevicePolicy {
    fn default() -> Self {
        DevicePolicy::auto()
    }
}

impl DevicePolicy {
    /// Every device; the job runs on the fastest one it fits on.
    pub fn auto() -> DevicePolicy {
        DevicePolicy {
            kind: None,
            caps: MemoryCaps::default(),
            margin: DEFAULT_MARGIN,
            calibration: Calibration::default(),
        }
    }

    /// Devices of `kind` only.
    pub fn only(kind: DeviceKind) -> DevicePolicy {
        DevicePolicy {
            kind: Some(kind),
            ..DevicePolicy::auto()
        }
    }

    /// The CPU only: always present, the reference results.
    pub fn only_cpu() -> DevicePolicy {
        DevicePolicy::only(DeviceKind::Cpu)
    }

    /// Plans with at most `bytes` of each device of `kind` (as `--device-memory
    /// KIND=SIZE`).
    pub fn cap(mut self, kind: DeviceKind, bytes: u64) -> DevicePolicy {
        self.caps.0.insert(kind, bytes);
        self
    }

    /// Leaves this fraction of each device's free memory unused, in `[0, 1)`.
    pub fn margin(mut self, fraction: f64) -> Result<DevicePolicy> {
        if !(0.0..1.0).contains(&fraction) {
            return Err(Error::BadInput(BadInput::of(
                "fraction",
                "in [0, 1)",
                fraction.to_string(),
                format!("the memory margin must be in [0, 1), got {fraction}"),
            )));
        }
        self.margin = fraction;
        Ok(self)
    }

    /// When the devices' speed is measured for the time estimates that choose between
    /// them: by default only where there is a choice ([`Calibration::WhenChoosing`]: a
    /// CPU-only policy, or `auto` on a machine with one usable device, measures nothing);
    /// [`Calibration::Never`] runs nothing before the job and writes no cache.
    ///
    /// ```
    /// use tensorfit::{Calibration, DevicePolicy};
    /// let quiet = DevicePolicy::auto().calibration(Calibration::Never);
    /// assert_eq!(quiet.calibration_setting(), Calibration::Never);
    /// ```
    pub fn calibration(mut self, when: Calibration) -> DevicePolicy {
        self.calibration = when;
        self
    }

    /// When the devices' speed is measured (see [`DevicePolicy::calibration`]).
    pub fn calibration_setting(&self) -> Calibration {
        self.calibration
    }

    /// The kind of device asked for (`None`: any).
    pub fn kind(&self) -> Option<DeviceKind> {
        self.kind
    }

    /// The memory caps, by kind.
    pub fn caps(&self) -> &MemoryCaps {
        &self.caps
    }

    /// The fraction of free memory left unused.
    pub fn memory_margin(&self) -> f64 {
        self.margin
    }

    /// The engine's request for `job` of `cfg` (training with BPTT length `tbptt` and
    /// `optim`) on these devices: what [`crate::Plan`] and [`crate::Model::open`] plan.
    pub fn request(
        &self,
        cfg: tensorfit_nn::ModelDescription,
        job: tensorfit_nn::Job,
        training: (usize, tensorfit_nn::OptimConfig),
    ) -> Request {
        Request {
            calibration: self.calibration,
            ..Request::new(cfg, job, training).on(self.kind, self.caps.clone(), self.margin)
        }
    }
}
