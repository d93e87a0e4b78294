//! Opening a device: which adapter, with which limits, and wgpu's errors as values.
//!
//! wgpu reports most failures (validation errors, out-of-memory, device loss) through
//! callbacks, and its default callback panics. A library must not panic on a device
//! failure, so [`open`] installs an [`ErrorSink`] that records the first uncaptured error
//! and any device loss; the backend checks it after each submission and turns what it
//! finds into [`tensorfit_core::Error`]s.
//!
//! Adapter choice: hardware before software (discrete, integrated, virtual, other, then a
//! CPU adapter such as lavapipe, which is accepted when it is the only one), unless
//! `TENSORFIT_WGPU_ADAPTER` names one (a case-insensitive part of its name). Only
//! adapters with compute shaders count. The device is opened with the adapter's own
//! limits (`adapter.limits()`), not WebGPU's defaults: the default 128 MiB storage
//! binding and 256 MiB buffer are far below what real GPUs allow.

use std::sync::{Arc, Mutex, PoisonError};

use tensorfit_core::Result;

use crate::backend_error;

/// Environment variable naming the adapter to use (a part of its name).
pub const ADAPTER_ENV: &str = "TENSORFIT_WGPU_ADAPTER";

/// One adapter wgpu can see, for device listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    /// `Vulkan`, `Metal`, `Dx12`, ...
    pub backend: String,
    /// `DiscreteGpu`, `IntegratedGpu`, `Cpu`, ...
    pub device_type: String,
    /// A software adapter (device type `Cpu`, such as lavapipe).
    pub software: bool,
    /// Whether tensorfit can use it (it supports compute shaders).
    pub usable: bool,
}

/// The device and everything known about it.
#[derive(Debug)]
pub(crate) struct Context {
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    /// The limits the device was opened with (the adapter's own).
    pub limits: wgpu::Limits,
    pub errors: ErrorSink,
}

/// The first uncaptured wgpu error since the last check, and whether the device is lost.
#[derive(Debug, Clone, Default)]
pub(crate) struct ErrorSink(Arc<Mutex<SinkState>>);

#[derive(Debug, Default)]
struct SinkState {
    first: Option<String>,
    lost: Option<String>,
}

impl ErrorSink {
    fn with<T>(&self, f: impl FnOnce(&mut SinkState) -> T) -> T {
        // A poisoned lock only means another thread panicked while holding it; the
        // recorded strings are still valid.
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut state)
    }

    fn record(&self, e: &wgpu::Error) {
        self.with(|s| {
            s.first.get_or_insert_with(|| e.to_string());
        });
    }

    fn set_lost(&self, why: String) {
        self.with(|s| s.lost = Some(why));
    }

    /// Fails if the device is lost (always, from then on) or if an error was recorded
    /// since the last check (once).
    pub fn check(&self) -> Result<()> {
        self.with(|s| {
            if let Some(lost) = &s.lost {
                return Err(backend_error(format!("the device was lost: {lost}")));
            }
            match s.first.take() {
                Some(e) => Err(backend_error(e)),
                None => Ok(()),
            }
        })
    }
}

fn instance() -> (wgpu::Instance, wgpu::Backends) {
    // Vulkan, Metal, DX12 (and WebGPU in a browser); GL lacks what compute needs on many
    // drivers. WGPU_BACKEND overrides, as in every wgpu program.
    let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    let desc = wgpu::InstanceDescriptor {
        backends,
        ..wgpu::InstanceDescriptor::new_without_display_handle()
    };
    (wgpu::Instance::new(desc), backends)
}

fn usable(adapter: &wgpu::Adapter) -> bool {
    adapter
        .get_downlevel_capabilities()
        .flags
        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
}

/// Lower is better.
fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

/// Every adapter wgpu finds, usable or not.
pub fn adapters() -> Vec<AdapterSummary> {
    let (instance, backends) = instance();
    pollster::block_on(instance.enumerate_adapters(backends))
        .iter()
        .map(|a| {
            let info = a.get_info();
            AdapterSummary {
                name: info.name.clone(),
                backend: format!("{:?}", info.backend),
                device_type: format!("{:?}", info.device_type),
                software: info.device_type == wgpu::DeviceType::Cpu,
                usable: usable(a),
            }
        })
        .collect()
}

/// The usable adapters in order of preference (see the module documentation), or why
/// there is none.
fn ranked() -> std::result::Result<Vec<wgpu::Adapter>, String> {
    let (instance, backends) = instance();
    let mut found: Vec<wgpu::Adapter> = pollster::block_on(instance.enumerate_adapters(backends));
    let seen: Vec<String> = found.iter().map(|a| a.get_info().name).collect();
    found.retain(usable);
    let wanted = std::env::var(ADAPTER_ENV).ok().filter(|s| !s.is_empty());
    if let Some(want) = &wanted {
        let want = want.to_lowercase();
        found.retain(|a| a.get_info().name.to_lowercase().contains(&want));
    }
    // A stable sort: adapters of one type keep wgpu's order, so indices are repeatable.
    found.sort_by_key(|a| rank(a.get_info().device_type));
    if !found.is_empty() {
        return Ok(found);
    }
    Err(match (wanted, seen.is_empty()) {
        (_, true) => format!(
            "no GPU adapter found (wgpu backends {backends:?}); install a Vulkan driver \
             (on Debian: mesa-vulkan-drivers libvulkan1)"
        ),
        (Some(w), false) => {
            format!("no usable adapter matches {ADAPTER_ENV}={w}; adapters: {seen:?}")
        }
        (None, false) => format!("no adapter with compute shaders among {seen:?}"),
    })
}

/// How many adapters tensorfit can use (`wgpu:0` is the preferred one), or why none.
pub fn usable_count() -> std::result::Result<usize, String> {
    ranked().map(|found| found.len())
}

/// Opens a device on the `index`-th usable adapter in order of preference.
pub(crate) fn open(index: usize) -> Result<Context> {
    let found = ranked().map_err(backend_error)?;
    let count = found.len();
    let Some(adapter) = found.into_iter().nth(index) else {
        return Err(backend_error(format!(
            "no wgpu adapter {index}: {count} usable adapter(s)"
        )));
    };
    let info = adapter.get_info();
    let limits = adapter.limits();
    let desc = wgpu::DeviceDescriptor {
        label: Some("tensorfit"),
        required_limits: limits.clone(),
        memory_hints: wgpu::MemoryHints::Performance,
        ..Default::default()
    };
    let (device, queue) = pollster::block_on(adapter.request_device(&desc))
        .map_err(|e| backend_error(format!("opening {}: {e}", info.name)))?;
    let errors = ErrorSink::default();
    let sink = errors.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| sink.record(&e)));
    let sink = errors.clone();
    device.set_device_lost_callback(move |reason, message| {
        sink.set_lost(format!("{reason:?}: {message}"));
    });
    Ok(Context {
        adapter,
        device,
        queue,
        info,
        limits,
        errors,
    })
}

/// Runs `f` inside error scopes for every kind of wgpu error, returning its value and
/// the first error it raised (out of memory first, then validation, then internal).
pub(crate) fn catch<T>(device: &wgpu::Device, f: impl FnOnce() -> T) -> (T, Option<wgpu::Error>) {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let internal = device.push_error_scope(wgpu::ErrorFilter::Internal);
    let value = f();
    // Scopes pop in reverse order of their creation.
    let internal = pollster::block_on(internal.pop());
    let validation = pollster::block_on(validation.pop());
    let oom = pollster::block_on(oom.pop());
    (value, oom.or(validation).or(internal))
}
