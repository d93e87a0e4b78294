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
    pub fn discover(policy: &DevicePolicy) -> Devices {
        Devices {
            found: discover_kind(policy.caps(), policy.kind()),
            policy: policy.clone(),
        }
    }

    /// Discovers the devices again: their free memory now.
    pub fn refresh(&mut self) {
        self.found = discover_kind(self.policy.caps(), self.policy.kind());
    }

    /// Every device found, in the order a tie is broken in (fastest kinds first), with
    /// its figures or why it cannot be used.
    pub fn list(&self) -> &[DeviceStatus] {
        &self.found
    }

    /// The policy the devices were discovered for (and that plans on them follow).
    pub fn policy(&self) -> &DevicePolicy {
        &self.policy
    }

    /// Measures `device`'s matrix-multiply throughput in GFLOP/s (what the planner's time
    /// estimates start from; cached under `~/.cache/tensorfit`), opening it if it has not
    /// been measured on this machine. `None` when it cannot be opened or measured.
    pub fn throughput_gflops(&self, device: &DeviceStatus) -> Option<f64> {
        let info = device.info.as_ref().ok()?;
        // Opened without the policy's caps: they bound a job's plan, not the measurement.
        throughput_gflops(info, || {
            open_device(device.kind, device.index, &MemoryCaps::default())
        })
        .ok()
    }

    /// The devices of `kind` found.
    pub fn of_kind(&self, kind: DeviceKind) -> impl Iterator<Item = &DeviceStatus> {
        self.found.iter().filter(move |d| d.kind == kind)
    }
}

/// What [`crate::Model::plan`], `open` and `stream` take: a [`DevicePolicy`], whose
/// devices are discovered at each call, or [`Devices`] discovered once.
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
