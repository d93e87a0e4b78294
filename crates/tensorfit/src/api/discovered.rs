//! [`Devices`]: the devices a policy allows, discovered once and reused by every plan,
//! open and stream, and [`Placement`], what those calls take: a policy (discovering at
//! each call) or discovered devices.

use tensorfit_core::DeviceKind;

use super::devices::DevicePolicy;
use crate::calibrate::throughput_gflops;
use crate::devices::{discover_kind, open_device, DeviceStatus, MemoryCaps};

/// The devices of this machine a [`DevicePolicy`] allows, discovered once: each with its
/// memory or why it cannot be used. Give it to [`crate::Model::plan`], `open` or `stream`
/// instead of the policy and they plan on these devices without discovering them again
/// (discovery opens every driver: tens of milliseconds each time, more for a software
/// Vulkan driver). The free memory is as it was at discovery; [`Devices::refresh`]
/// discovers again, and a run that meets less memory than planned moves elsewhere.
///
/// ```
/// use tensorfit::{DevicePolicy, Devices, Job, Model};
/// let devices = Devices::discover(&DevicePolicy::only_cpu());
/// assert_eq!(devices.list()[0].id, "cpu");
/// let model = Model::seed();
/// let plan = model.plan(Job::Eval { batch: 2, seq_len: 5 }, &devices).unwrap();
/// let mut stream = model.stream(1, &devices).unwrap(); // no discovery either
/// # let _ = (plan, stream.step(&vec![0.0; 152]).unwrap());
/// ```
#[derive(Debug, Clone)]
pub struct Devices {
    policy: DevicePolicy,
    found: Vec<DeviceStatus>,
}

impl Devices {
    /// Discovers the devices `policy` allows (its kind, or every kind).
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy, Devices};
    /// let devices = Devices::discover(&DevicePolicy::only_cpu());
    /// assert_eq!(devices.list().len(), 1);
    /// assert_eq!(devices.list()[0].kind, DeviceKind::Cpu);
    /// ```
    pub fn discover(policy: &DevicePolicy) -> Devices {
        Devices {
            found: discover_kind(policy.caps(), policy.kind()),
            policy: policy.clone(),
        }
    }

    /// Discovers the devices again: their free memory now.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Devices};
    /// let mut devices = Devices::discover(&DevicePolicy::only_cpu());
    /// devices.refresh(); // the CPU's free memory as it is now
    /// let info = devices.list()[0].info.as_ref().unwrap();
    /// assert!(info.free_bytes.unwrap_or(info.total_bytes) <= info.total_bytes);
    /// ```
    pub fn refresh(&mut self) {
        self.found = discover_kind(self.policy.caps(), self.policy.kind());
    }

    /// Every device found, in the order a tie is broken in (fastest kinds first), with
    /// its figures or why it cannot be used.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Devices};
    /// let devices = Devices::discover(&DevicePolicy::only_cpu());
    /// let cpu = &devices.list()[0];
    /// assert_eq!(cpu.id, "cpu");
    /// let info = cpu.info.as_ref().expect("the CPU is always usable");
    /// assert!(info.total_bytes > 0 && !info.software);
    /// ```
    pub fn list(&self) -> &[DeviceStatus] {
        &self.found
    }

    /// The policy the devices were discovered for (and that plans on them follow).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Devices};
    /// let devices = Devices::discover(&DevicePolicy::only_cpu().margin(0.3)?);
    /// assert_eq!(devices.policy().memory_margin(), 0.3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn policy(&self) -> &DevicePolicy {
        &self.policy
    }

    /// Measures `device`'s matrix-multiply throughput in GFLOP/s (what the planner's time
    /// estimates start from; cached under `~/.cache/tensorfit`), opening it if it has not
    /// been measured on this machine. `None` when it cannot be opened or measured.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Devices};
    /// # // The figure's cache in a directory of this example's own, not in ~/.cache.
    /// # let cache = std::env::temp_dir().join(format!("tensorfit-{}", std::process::id()));
    /// # std::env::set_var("XDG_CACHE_HOME", &cache);
    /// let devices = Devices::discover(&DevicePolicy::only_cpu());
    /// let gflops = devices.throughput_gflops(&devices.list()[0]).unwrap();
    /// assert!(gflops > 0.0);
    /// # std::fs::remove_dir_all(&cache).unwrap();
    /// ```
    pub fn throughput_gflops(&self, device: &DeviceStatus) -> Option<f64> {
        let info = device.info.as_ref().ok()?;
        // Opened without the policy's caps: they bound a job's plan, not the measurement.
        throughput_gflops(info, || {
            open_device(device.kind, device.index, &MemoryCaps::default())
        })
        .ok()
    }

    /// The devices of `kind` found.
    ///
    /// ```
    /// use tensorfit::{DeviceKind, DevicePolicy, Devices};
    /// let devices = Devices::discover(&DevicePolicy::only_cpu());
    /// assert_eq!(devices.of_kind(DeviceKind::Cpu).count(), 1);
    /// assert_eq!(devices.of_kind(DeviceKind::Cuda).count(), 0); // not allowed by the policy
    /// ```
    pub fn of_kind(&self, kind: DeviceKind) -> impl Iterator<Item = &DeviceStatus> {
        self.found.iter().filter(move |d| d.kind == kind)
    }
}

/// What [`crate::Model::plan`], `open` and `stream` take: a [`DevicePolicy`], whose
/// devices are discovered at each call, or [`Devices`] discovered once.
///
/// ```
/// use tensorfit::api::Placement;
/// use tensorfit::{DevicePolicy, Devices, Job, Model, ModelDescription};
/// /// The peak bytes of evaluating `model` on 4 sequences of 10 steps, on `devices`.
/// fn peak(model: &Model, devices: &impl Placement) -> Option<u64> {
///     model.plan(Job::Eval { batch: 4, seq_len: 10 }, devices).ok()?.peak_bytes()
/// }
/// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1).unwrap();
/// let (policy, devices) =
///     (DevicePolicy::only_cpu(), Devices::discover(&DevicePolicy::only_cpu()));
/// assert_eq!(peak(&model, &policy), peak(&model, &devices));
/// assert!(policy.discovered().is_none() && devices.discovered().is_some());
/// ```
pub trait Placement: sealed::Sealed {
    /// The policy the plan follows.
    fn policy(&self) -> &DevicePolicy;
    /// The devices to plan on, when discovered already.
    fn discovered(&self) -> Option<&[DeviceStatus]>;
}

impl Placement for DevicePolicy {
    fn policy(&self) -> &DevicePolicy {
        self
    }

    fn discovered(&self) -> Option<&[DeviceStatus]> {
        None
    }
}

impl Placement for Devices {
    fn policy(&self) -> &DevicePolicy {
        &self.policy
    }

    fn discovered(&self) -> Option<&[DeviceStatus]> {
        Some(&self.found)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::DevicePolicy {}
    impl Sealed for super::Devices {}
}
