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
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy};
    /// let policy = DevicePolicy::auto();
    /// assert_eq!(policy.kind(), None); // any kind of device
    /// assert_eq!(policy.caps().get(DeviceKind::Cuda), None); // no memory capped
    /// assert_eq!(policy.memory_margin(), tensorfit::plan::DEFAULT_MARGIN);
    /// ```
    pub fn auto() -> DevicePolicy {
        DevicePolicy {
            kind: None,
            caps: MemoryCaps::default(),
            margin: DEFAULT_MARGIN,
            calibration: Calibration::default(),
        }
    }

    /// Devices of `kind` only.
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy};
    /// let gpus = DevicePolicy::only(DeviceKind::Cuda);
    /// assert_eq!(gpus.kind(), Some(DeviceKind::Cuda));
    /// ```
    pub fn only(kind: DeviceKind) -> DevicePolicy {
        DevicePolicy {
            kind: Some(kind),
            ..DevicePolicy::auto()
        }
    }

    /// The CPU only: always present, the reference results.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model, ModelDescription};
    /// let policy = DevicePolicy::only_cpu();
    /// assert_eq!(policy.kind(), Some(DeviceKind::Cpu));
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 2, seq_len: 5 }, &policy)?;
    /// assert_eq!(plan.device(), Some("cpu"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn only_cpu() -> DevicePolicy {
        DevicePolicy::only(DeviceKind::Cpu)
    }

    /// Plans with at most `bytes` of each device of `kind` (as `--device-memory
    /// KIND=SIZE`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model};
    /// let policy = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20); // 1 MiB
    /// assert_eq!(policy.caps().get(DeviceKind::Cpu), Some(1 << 20));
    /// // The seed model's weights alone need more than that.
    /// let plan = Model::seed().plan(Job::Eval { batch: 1, seq_len: 10 }, &policy)?;
    /// assert!(!plan.fits());
    /// # Ok(())
    /// # }
    /// ```
    pub fn cap(mut self, kind: DeviceKind, bytes: u64) -> DevicePolicy {
        self.caps.0.insert(kind, bytes);
        self
    }

    /// Leaves this fraction of each device's free memory unused, in `[0, 1)`.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Error};
    /// let policy = DevicePolicy::only_cpu().margin(0.25)?;
    /// assert_eq!(policy.memory_margin(), 0.25);
    /// match DevicePolicy::only_cpu().margin(1.0) {
    ///     Err(Error::BadInput(b)) => assert_eq!(b.argument.as_deref(), Some("fraction")),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use tensorfit::{Calibration, DevicePolicy};
    /// // By default, devices are measured only where there is a choice between them.
    /// assert_eq!(DevicePolicy::auto().calibration_setting(), Calibration::WhenChoosing);
    /// ```
    pub fn calibration_setting(&self) -> Calibration {
        self.calibration
    }

    /// The kind of device asked for (`None`: any).
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy};
    /// assert_eq!(DevicePolicy::auto().kind(), None);
    /// assert_eq!(DevicePolicy::only(DeviceKind::Wgpu).kind(), Some(DeviceKind::Wgpu));
    /// ```
    pub fn kind(&self) -> Option<DeviceKind> {
        self.kind
    }

    /// The memory caps, by kind.
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy};
    /// let policy = DevicePolicy::auto().cap(DeviceKind::Cuda, 2 << 30);
    /// assert_eq!(policy.caps().get(DeviceKind::Cuda), Some(2 << 30));
    /// assert_eq!(policy.caps().get(DeviceKind::Cpu), None);
    /// ```
    pub fn caps(&self) -> &MemoryCaps {
        &self.caps
    }

    /// The fraction of free memory left unused.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::DevicePolicy;
    /// assert_eq!(DevicePolicy::auto().memory_margin(), tensorfit::plan::DEFAULT_MARGIN);
    /// assert_eq!(DevicePolicy::auto().margin(0.2)?.memory_margin(), 0.2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn memory_margin(&self) -> f64 {
        self.margin
    }

    /// The engine's request for `job` of `cfg` (training with BPTT length `tbptt` and
    /// `optim`) on these devices: what [`crate::Plan`] and [`crate::Model::open`] plan.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, ModelDescription, OptimConfig, Plan};
    /// let policy = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 256 << 20);
    /// let job = Job::Train { batch: 4, seq_len: 10, eval: None };
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// let mut request = policy.request(description, job, (10, OptimConfig::default()));
    /// assert_eq!(request.device, Some(DeviceKind::Cpu));
    /// assert_eq!(request.caps.get(DeviceKind::Cpu), Some(256 << 20));
    /// request.carry_across = true; // a setting a Model does not hold
    /// assert_eq!(Plan::from_request(request)?.job(), job);
    /// # Ok(())
    /// # }
    /// ```
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
