//! `tensorfit plan --assume`: plans for devices that are not here, with their published
//! memory and their backends' fixed costs, marked as assumed; several devices of one
//! kind are each planned and the choice considers each.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;

use common::{job, plan_json, succeed, tensorfit_command};

fn candidates<'a>(v: &'a Value, device: &str) -> Vec<&'a Value> {
    v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["device"] == device)
        .collect()
}

#[test]
fn a_preset_is_planned_with_its_published_memory_less_its_backends_own() {
    let v = plan_json(&job("infer", "100", "2000", &["--assume", "h100"]));
    let h100 = candidates(&v, "h100 (assumed)");
    assert!(!h100.is_empty(), "{v}");
    let c = h100[0];
    assert_eq!(c["kind"], "cuda");
    assert_eq!(c["name"], "NVIDIA H100 80GB (SXM)");
    let overhead = c["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["part"] == "backend overhead")
        .expect("the CUDA context and cuBLAS workspace are in the plan")["bytes"]
        .as_u64()
        .unwrap();
    // Hopper's 32 MiB cuBLAS workspace and a context of 132 SMs.
    assert!(overhead > 300 << 20, "{overhead}");
    // Usable: what the driver would report free once the backend is open, less 10%.
    let want = (((80u64 << 30) - overhead) as f64 * 0.9) as u64;
    assert_eq!(c["capacity_bytes"].as_u64().unwrap(), want);
    assert_eq!(v["chosen"]["device"], "h100 (assumed)");
    let assumed = v["assumed"].as_array().unwrap();
    assert_eq!(assumed.len(), 1);
    assert_eq!(assumed[0]["peak_gflops"].as_f64(), Some(67_000.0));
    assert!(assumed[0]["description"]
        .as_str()
        .unwrap()
        .contains("not present"));
}

#[test]
fn the_seed_users_card_is_a_wgpu_device_of_two_gibibytes() {
    let v = plan_json(&job("infer", "100", "2000", &["--assume", "gtx750"]));
    let c = candidates(&v, "gtx750 (assumed)")[0];
    assert_eq!(c["kind"], "wgpu");
    assert!(c["fits"].as_bool().unwrap(), "1.12 GiB fits in 2 GiB: {c}");
    assert!(c["capacity_bytes"].as_u64().unwrap() < 2 << 30);
}

#[test]
fn a_kind_and_size_has_no_time_estimate_and_says_so() {
    let flags = job("infer", "10", "100", &["--assume", "cuda=2GiB"]);
    let out = succeed(
        tensorfit_command().arg("plan").args(&flags),
        "plan --assume cuda=2GiB",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cuda=2gib (assumed)"), "{text}");
    assert!(text.contains("no time estimate"), "{text}");
    let v = plan_json(&flags);
    assert!(v["chosen"]["estimated_seconds"].is_null(), "{v}");
}

#[test]
fn several_devices_of_one_kind_are_each_planned_and_the_choice_considers_each() {
    // Training at batch 400 needs more than a T4's 16 GiB whole, and fits an A100 80GB.
    let v = plan_json(&job(
        "train",
        "400",
        "2000",
        &[
            "--tbptt",
            "2000",
            "--assume",
            "t4",
            "--assume",
            "a100-80gb",
            "--assume",
            "t4",
        ],
    ));
    for d in ["t4 (assumed)", "a100-80gb (assumed)", "t4#2 (assumed)"] {
        assert!(!candidates(&v, d).is_empty(), "{d} planned: {v}");
        assert!(candidates(&v, d).iter().all(|c| c["kind"] == "cuda"));
    }
    assert_eq!(v["chosen"]["device"], "a100-80gb (assumed)", "{v}");
    let t4 = candidates(&v, "t4 (assumed)");
    assert!(!t4[0]["fits"].as_bool().unwrap(), "{v}");
}

#[test]
fn unknown_presets_and_bad_sizes_are_refused_naming_the_flag() {
    for bad in ["gtx1080", "cuda=lots", "tpu=2GiB", "cuda=0"] {
        let out = tensorfit_command()
            .args(["plan", "--assume", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--assume") && err.contains(bad), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
