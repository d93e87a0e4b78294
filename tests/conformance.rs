//! The one device-parameterised conformance suite: every device present against the CPU
//! reference (`tensorfit_cpu::CpuBackend`).
//!
//! Devices are listed once, in [`devices`]: the CPU is the reference; CUDA and wgpu run as
//! the device opens them, and wgpu again with its storage bindings limited to 1 KiB, so
//! that every op also runs split into many launches over windows of its tensors (the path
//! a tensor larger than the device's binding limit takes). Another backend is one more
//! entry.
//! A device that cannot be opened is skipped with its reason printed
//! (`wgpu: skipped — ...`); `TENSORFIT_REQUIRE=wgpu` (a comma list of device kinds:
//! `wgpu`, `cuda`) turns such a skip into a failure, so a CI machine with a driver cannot
//! silently skip.
//!
//! What runs on each device (each test prints how many checks ran per device):
//! - `every_op_matches_the_cpu`: every variant of `Op` on random inputs (see
//!   `conformance/ops.rs`), tensors placed at aligned offsets in one arena buffer, outputs
//!   pre-filled with NaN so unwritten elements fail;
//! - `seed_network_matches_the_cpu`: a small seed-shaped network (F=10, H=8, 3 layers,
//!   dense 5, 6 classes, B=16, T=9, truncated BPTT 3 carrying state) through
//!   `tensorfit_nn::Trainer`: loss, probabilities, carried state, every gradient, every
//!   parameter and statistic after each of two Adam steps, then inference;
//! - `loss_curve_matches_the_cpu`: 20 training steps of a scaled-down seed network on the
//!   built-in task give the CPU's loss curve.
//!
//! The one closeness rule: |a − b| ≤ atol + rtol·|ref|, with atol = `abs` × s where s is
//! the largest |ref| of the tensor (at least 1), so near-zero elements are judged on the
//! tensor's own scale. Tolerances (f32 on both sides; the GPU's exp/log/sqrt are not
//! correctly rounded, and its sums run in other orders, Kahan-compensated):
//! - single ops: abs 2e-6, rel 2e-5 ([`OP_TOL`]);
//! - the seed network (errors compound through 3 layers, BatchNorm over 16 rows, and two
//!   Adam steps, which divide by sqrt(v)): abs 1e-4, rel 1e-3 ([`SEED_TOL`]);
//! - the loss curve over 20 steps: abs 2e-4, rel 2e-4 ([`CURVE_TOL`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "conformance/ops.rs"]
mod ops;
#[path = "conformance/seed.rs"]
mod seed;

use tensorfit::core::Backend;
use tensorfit::cpu::CpuBackend;

/// A tolerance of the closeness rule (see the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct Tol {
    /// Absolute tolerance, as a fraction of the tensor's scale (its largest |ref|, ≥ 1).
    pub abs: f32,
    pub rel: f32,
}

pub const OP_TOL: Tol = Tol {
    abs: 2e-6,
    rel: 2e-5,
};
pub const SEED_TOL: Tol = Tol {
    abs: 1e-4,
    rel: 1e-3,
};
pub const CURVE_TOL: Tol = Tol {
    abs: 2e-4,
    rel: 2e-4,
};

/// A device under test.
#[derive(Debug)]
pub struct Device {
    /// As printed.
    pub name: &'static str,
    /// The kind `TENSORFIT_REQUIRE` names.
    pub kind: &'static str,
    pub open: fn() -> Result<Box<dyn Backend>, String>,
    /// Whether the 20-step loss curve runs (a variant that only exercises splitting
    /// skips it: the ops and the small network cover that path, and a scaled-down seed
    /// network cut into kilobyte windows takes minutes on a software driver).
    pub curve: bool,
}

/// An opened backend as the suite holds it, or why it did not open.
fn boxed<B: Backend + 'static>(
    opened: Result<B, impl std::fmt::Display>,
) -> Result<Box<dyn Backend>, String> {
    opened
        .map(|b| Box::new(b) as Box<dyn Backend>)
        .map_err(|e| e.to_string())
}

/// Every device the suite knows, besides the CPU reference.
fn devices() -> Vec<Device> {
    vec![
        Device {
            name: "cuda",
            kind: "cuda",
            open: || boxed(tensorfit_cuda::CudaBackend::new()),
            curve: true,
        },
        Device {
            name: "wgpu",
            kind: "wgpu",
            open: || boxed(tensorfit_wgpu::WgpuBackend::new()),
            curve: true,
        },
        Device {
            name: "wgpu (1 KiB bindings)",
            kind: "wgpu",
            open: || boxed(tensorfit_wgpu::WgpuBackend::new().map(|b| b.with_binding_limit(1024))),
            curve: false,
        },
    ]
}

/// The reference every device is compared with.
pub fn reference() -> Box<dyn Backend> {
    Box::new(CpuBackend::new())
}

/// The devices present: each opened once to see that it can be; absent ones are printed
/// with the reason, and fail the test when required.
fn present(test: &str) -> Vec<Device> {
    let required = common::required_kinds();
    let all = devices();
    for kind in &required {
        assert!(
            all.iter().any(|d| d.kind == kind.as_str()),
            "{test}: TENSORFIT_REQUIRE names `{kind}`, which this suite has no device for"
        );
    }
    let mut found = Vec::new();
    for d in all {
        match (d.open)() {
            Ok(_) => found.push(d),
            Err(why) => {
                println!("{}: skipped — {why}", d.name);
                assert!(
                    !required.iter().any(|k| k == d.kind),
                    "{test}: {} is required (TENSORFIT_REQUIRE) but cannot be opened: {why}",
                    d.name
                );
            }
        }
    }
    found
}

/// Counts and judges the comparisons of one device in one test.
#[derive(Debug)]
pub struct Checks {
    device: String,
    test: String,
    count: usize,
    values: usize,
    start: std::time::Instant,
    /// Largest |a − b| / (atol + rtol·|ref|) seen (≤ 1 passes).
    worst: f64,
    failures: Vec<String>,
}

impl Checks {
    pub fn new(test: &str, device: &str) -> Self {
        Checks {
            device: device.to_string(),
            test: test.to_string(),
            count: 0,
            values: 0,
            start: std::time::Instant::now(),
            worst: 0.0,
            failures: Vec::new(),
        }
    }

    /// One check: `got` (the device) against `want` (the CPU) under `tol`.
    pub fn close(&mut self, what: &str, got: &[f32], want: &[f32], tol: Tol) {
        self.count += 1;
        self.values += want.len();
        if got.len() != want.len() {
            self.failures.push(format!(
                "{what}: {} values, the reference has {}",
                got.len(),
                want.len()
            ));
            return;
        }
        let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let atol = (tol.abs * scale) as f64;
        let mut first_bad = None;
        for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
            let allowed = atol + tol.rel as f64 * (b as f64).abs();
            let diff = (a as f64 - b as f64).abs();
            let ratio = if a.is_nan() != b.is_nan() {
                f64::INFINITY
            } else if a.is_nan() {
                0.0
            } else {
                diff / allowed
            };
            self.worst = self.worst.max(ratio);
            if ratio > 1.0 && first_bad.is_none() {
                first_bad = Some((i, a, b, ratio));
            }
        }
        if let Some((i, a, b, ratio)) = first_bad {
            self.failures.push(format!(
                "{what}: element {i} is {a}, the CPU has {b} ({ratio:.1}× the tolerance)"
            ));
        }
    }

    /// Prints the count and fails with every failure found.
    pub fn finish(self) {
        println!(
            "{}: {} — {} checks, {} values, worst error {:.3} of the tolerance ({:.1} s)",
            self.device,
            self.test,
            self.count,
            self.values,
            self.worst,
            self.start.elapsed().as_secs_f64()
        );
        assert!(
            self.failures.is_empty(),
            "{} on {}: {} of {} checks failed:\n{}",
            self.test,
            self.device,
            self.failures.len(),
            self.count,
            self.failures.join("\n")
        );
        assert!(
            self.count > 0,
            "{} on {}: nothing was checked",
            self.test,
            self.device
        );
    }
}

#[test]
fn every_op_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("every_op_matches_the_cpu") {
        let mut checks = Checks::new("every op", d.name);
        let mut device = (d.open)().unwrap();
        ops::run_all(device.as_mut(), &mut checks);
        checks.finish();
    }
}

#[test]
fn seed_network_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("seed_network_matches_the_cpu") {
        let mut checks = Checks::new("seed network", d.name);
        seed::small_network(d.open, &mut checks);
        checks.finish();
    }
}

#[test]
fn loss_curve_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("loss_curve_matches_the_cpu") {
        if !d.curve {
            println!("{}: 20-step loss curve not run (splitting variant)", d.name);
            continue;
        }
        let mut checks = Checks::new("20-step loss curve", d.name);
        seed::loss_curve(d.open, &mut checks);
        checks.finish();
    }
}
