//! tensorfit: train and run a stacked LSTM on whatever device it fits.
//!
//! This facade re-exports the workspace's crates under one name:
//! - [`core`]: graphs of coarse ops, autodiff, schedule, the `Backend` trait;
//! - [`cpu`]: the reference backend (rayon + matrixmultiply);
//! - [`nn`]: the seed model, Adam, the truncated-BPTT trainer, the built-in task.
//!
//! The `tensorfit` binary (`src/main.rs`) is the command-line front end.

#![forbid(unsafe_code)]

pub use tensorfit_core as core;
pub use tensorfit_cpu as cpu;
pub use tensorfit_nn as nn;

use tensorfit_core::Backend;

/// The backends this build can run on, by the name users type (`--device`).
pub const DEVICES: &[&str] = &["cpu"];

/// Opens the backend called `name` (`auto` picks the best available; today the CPU).
pub fn open_backend(name: &str) -> core::Result<Box<dyn Backend>> {
    match name {
        "auto" | "cpu" => Ok(Box::new(cpu::CpuBackend::new())),
        other => Err(core::Error::input(format!(
            "unknown device `{other}`; available: auto, {}",
            DEVICES.join(", ")
        ))),
    }
}
