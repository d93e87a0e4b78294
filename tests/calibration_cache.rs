//! The throughput cache goes where the XDG spec says (an empty or relative
//! `XDG_CACHE_HOME` is ignored, never a directory under wherever the command runs), and
//! a cached figure no device can reach is measured again instead of believed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{json, names_in, scratch};

/// `tensorfit devices --json` run in `cwd` with `XDG_CACHE_HOME` and `HOME` as given.
fn devices(cwd: &Path, xdg: &str, home: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tensorfit"))
        .args(["devices", "--json"])
        .current_dir(cwd)
        .env("XDG_CACHE_HOME", xdg)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out)
}

fn cpu_gflops(v: &serde_json::Value) -> f64 {
    v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "cpu")
        .unwrap()["throughput_gflops"]
        .as_f64()
        .unwrap()
}

#[test]
fn an_empty_or_relative_xdg_cache_home_is_ignored() {
    let home = scratch("xdg-home");
    for (name, xdg) in [("xdg-empty", ""), ("xdg-relative", "relative/cache")] {
        let cwd = scratch(name);
        devices(&cwd, xdg, &home);
        assert!(
            names_in(&cwd).is_empty(),
            "{xdg:?} wrote {:?} into the working directory",
            names_in(&cwd)
        );
    }
    assert!(home.join(".cache/tensorfit/throughput.json").exists());
}

#[test]
fn a_cached_throughput_no_device_reaches_is_measured_again() {
    let cache = scratch("insane-cache");
    let cwd = scratch("insane-cwd");
    let xdg = cache.to_str().unwrap();
    let measured = cpu_gflops(&devices(&cwd, xdg, &cwd));
    let file = cache.join("tensorfit/throughput.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut figures: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).unwrap();
    for v in figures.values_mut() {
        *v = serde_json::json!(1e300);
    }
    std::fs::write(&file, serde_json::to_string(&figures).unwrap()).unwrap();
    let again = cpu_gflops(&devices(&cwd, xdg, &cwd));
    assert!(
        again < 1e7,
        "the cached 1e300 GFLOP/s was believed: {again}"
    );
    assert!(measured < 1e7 && again > 0.0);
}

/// `tensorfit ARGS` run with an empty cache in `name`; whether it wrote the cache.
fn writes_the_cache(name: &str, args: &[&str]) -> bool {
    let cache = scratch(name);
    let out = Command::new(env!("CARGO_BIN_EXE_tensorfit"))
        .args(args)
        .env("XDG_CACHE_HOME", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    cache.join("tensorfit/throughput.json").exists()
}

#[test]
fn a_job_on_one_device_measures_nothing_and_a_plan_table_measures_every_device() {
    let train = ["train", "--device", "cpu", "--steps", "1", "--batch", "4"];
    assert!(
        !writes_the_cache("one-device-train", &train),
        "training on the CPU alone measured its speed: no choice needed it"
    );
    let plan = ["plan", "--device", "cpu", "--batch", "4", "--seq-len", "10"];
    assert!(
        writes_the_cache("one-device-plan", &plan),
        "`plan` shows time estimates, so it measures"
    );
}
