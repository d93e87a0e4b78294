//! Helpers shared by the cross-crate tests: the small models and requests the tests
//! build, the wgpu check, and running the CLI (the closeness rule and the skip rule are
//! `tensorfit-testing`'s).

#![allow(dead_code)]

use std::process::{Command, Output};

use serde_json::Value;
use tensorfit::core::{Activation, DeviceKind};
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{AdamConfig, Job, ModelConfig, TemporalOrder, TrainOptions};
use tensorfit::session::Request;

/// The closeness rule of the whole project (`tensorfit_testing::ratio`):
/// |a - b| <= atol + rtol * |reference|.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    tensorfit_testing::assert_close(what, got, want, atol as f64, rtol as f64);
}

/// Largest absolute value (the scale used for a tensor-relative tolerance).
pub fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

/// A scaled-down seed network for the built-in temporal-order task (152 features in,
/// 6 classes out, tanh dense layer).
pub fn task_model(hidden: usize, layers: usize, dense: usize) -> ModelConfig {
    ModelConfig {
        input: TemporalOrder::FEATURES,
        hidden,
        layers,
        dense,
        classes: TemporalOrder::CLASSES,
        dense_activation: Activation::Tanh,
    }
}

/// Training options with whole truncated-BPTT chunks and Adam at learning rate `lr`.
pub fn train_options(tbptt: usize, lr: f32) -> TrainOptions {
    TrainOptions {
        tbptt,
        chunk: tbptt,
        adam: AdamConfig {
            lr,
            ..AdamConfig::default()
        },
        ..TrainOptions::default()
    }
}

/// A session request on one device, with default Adam, a 10% margin and nothing excluded.
pub fn request(
    cfg: &ModelConfig,
    job: Job,
    tbptt: usize,
    device: DeviceKind,
    caps: MemoryCaps,
) -> Request {
    Request {
        cfg: cfg.clone(),
        job,
        tbptt,
        adam: AdamConfig::default(),
        margin: 0.1,
        device: Some(device),
        caps,
        exclude: Vec::new(),
    }
}

/// Whether a wgpu adapter opens (lavapipe in CI). When none does, prints why, so the
/// caller can skip, or fails when `TENSORFIT_REQUIRE` names wgpu.
pub fn wgpu_present() -> bool {
    let Err(why) = tensorfit::devices::open(DeviceKind::Wgpu, &MemoryCaps::default()) else {
        return true;
    };
    tensorfit_testing::skip("this test", "wgpu", &why.to_string());
    false
}

/// A scratch directory for this test process (`name` below it).
pub fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir()
        .join(format!("tensorfit-test-{}", std::process::id()))
        .join(name);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// The `tensorfit` binary, with its throughput cache kept in the scratch directory.
pub fn tensorfit_command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tensorfit"));
    c.env("XDG_CACHE_HOME", scratch("cache"));
    c
}

/// Runs `cmd` and requires success; a failure names `what` and shows the stderr.
pub fn succeed(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The JSON object a `--json` run printed.
pub fn json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The per-step losses of a `train --json` run.
pub fn losses(v: &Value) -> Vec<f64> {
    v["losses"]
        .as_array()
        .expect("`losses` is an array")
        .iter()
        .map(|x| x.as_f64().expect("a loss is a number"))
        .collect()
}
