//! The one device-parameterised conformance suite: every device present against the CPU
//! reference (`tensorfit_cpu::CpuBackend`).
//!
//! Devices are listed once, in [`devices`]: the CPU is the reference; the first device of
//! every other kind of the backend registry (`tensorfit::registry`: CUDA, wgpu, and the
//! second CPU backend of `common/second_cpu.rs`, which shows that a backend registered
//! there is run here with no other change) runs as its provider opens it, and wgpu again
//! with its storage bindings limited to 1 KiB, so that every op also runs split into many
//! launches over windows of its tensors (the path a tensor larger than the device's
//! binding limit takes). Another backend is one more line in the registry
//! (`docs/adding-a-backend.md`).
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
//! - `an_lstm_or_gru_on_token_ids_matches_itself_on_their_one_hot_vectors`: on the CPU and on each
//!   device, the LSTM ops on token ids against the same ops on the materialised one-hot
//!   input (`conformance/tokens.rs`);
//! - `loss_curve_matches_the_cpu`: 20 training steps of a scaled-down seed network on the
//!   built-in task give the CPU's loss curve.
//!
//! The one closeness rule (`tensorfit_testing`): |a − b| ≤ atol + rtol·|ref|, with
//! atol = `abs` × s where s is the largest |ref| of the tensor (at least 1), so near-zero
//! elements are judged on the tensor's own scale; `tensorfit_testing::Checks` counts and
//! reports the comparisons, `tensorfit_testing::present` opens the devices listed here. Tolerances (f32 on both sides; the GPU's exp/log/sqrt are not
//! correctly rounded, and its sums run in other orders, Kahan-compensated):
//! - single ops: abs 2e-6, rel 2e-5 ([`OP_TOL`]);
//! - the seed network (errors compound through 3 layers, BatchNorm over 16 rows, and two
//!   Adam steps, which divide by sqrt(v)): abs 1e-4, rel 1e-3 ([`SEED_TOL`]);
//! - the loss curve over 20 steps: abs 2e-4, rel 2e-4 ([`CURVE_TOL`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "conformance/lengths.rs"]
mod lengths;
#[path = "conformance/ops.rs"]
mod ops;
#[path = "conformance/seed.rs"]
mod seed;
#[path = "conformance/tokens.rs"]
mod tokens;

use tensorfit::core::{Backend, DeviceKind};
use tensorfit::cpu::CpuBackend;
use tensorfit::devices::{open, MemoryCaps};
use tensorfit::registry;
use tensorfit_testing::{boxed, present, Device, Tol};

pub use tensorfit_testing::Checks;

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

/// Every device the suite knows, besides the CPU reference: the first device of each
/// kind of the registry (a kind not in this build is skipped with the reason), then
/// wgpu's splitting variant.
fn devices() -> Vec<Device> {
    common::second_cpu::register();
    let mut all: Vec<Device> = registry::kinds()
        .into_iter()
        .filter(|&kind| kind != DeviceKind::Cpu)
        .map(|kind| {
            Device::new(kind.name(), kind.name(), move || {
                open(kind, &MemoryCaps::default()).map_err(|e| e.to_string())
            })
        })
        .collect();
    all.push(
        Device::new("wgpu (1 KiB bindings)", "wgpu", || {
            boxed(tensorfit_wgpu::WgpuBackend::new().map(|b| b.with_binding_limit(1024)))
        })
        .without_curve(),
    );
    all
}

/// The reference every device is compared with.
pub fn reference() -> Box<dyn Backend> {
    Box::new(CpuBackend::new())
}

#[test]
fn every_op_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("every_op_matches_the_cpu", devices()) {
        let mut checks = Checks::new("every op", d.name);
        let mut device = (d.open)().unwrap();
        ops::run_all(device.as_mut(), &mut checks);
        checks.finish();
    }
}

#[test]
fn seed_network_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("seed_network_matches_the_cpu", devices()) {
        let mut checks = Checks::new("seed network", d.name);
        seed::small_network(d.open, &mut checks);
        checks.finish();
    }
}

#[test]
fn loss_curve_matches_the_cpu() {
    println!("cpu: the reference");
    for d in present("loss_curve_matches_the_cpu", devices()) {
        if !d.curve {
            println!("{}: 20-step loss curve not run (splitting variant)", d.name);
            continue;
        }
        let mut checks = Checks::new("20-step loss curve", d.name);
        seed::loss_curve(d.open, &mut checks);
        checks.finish();
    }
}

#[test]
fn an_lstm_or_gru_on_token_ids_matches_itself_on_their_one_hot_vectors() {
    let mut checks = Checks::new("token ids = one-hot input", "cpu");
    tokens::one_hot_equivalence(reference().as_mut(), &mut checks);
    checks.finish();
    let name = "an_lstm_or_gru_on_token_ids_matches_itself_on_their_one_hot_vectors";
    for d in present(name, devices()) {
        let mut checks = Checks::new("token ids = one-hot input", d.name);
        let mut device = (d.open)().unwrap();
        tokens::one_hot_equivalence(device.as_mut(), &mut checks);
        checks.finish();
    }
}
