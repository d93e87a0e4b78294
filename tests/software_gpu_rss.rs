//! On a software GPU (lavapipe), whose memory is the host's, the plan counts what the
//! driver holds in the process besides the planned buffers (its device, the pipelines it
//! compiles, the staging copy of a transfer): the measured peak resident memory of an
//! evaluation stays within the predicted one (it was 29% above: 102 MiB planned, 132 MiB
//! measured, so a 60 MiB cgroup the plan said fitted killed the process).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use common::{ok_json, wgpu_present};

#[test]
fn a_software_gpu_run_stays_within_its_planned_resident_memory() {
    if !wgpu_present() {
        return;
    }
    let v = ok_json(&[
        "eval",
        "--batch",
        "8",
        "--seq-len",
        "500",
        "--device",
        "wgpu",
        "--json",
    ]);
    let planned = v["planned_resident_bytes"].as_u64().unwrap() as f64;
    let measured = v["peak_resident_bytes"].as_u64().unwrap() as f64;
    println!(
        "planned {:.1} MiB, measured {:.1} MiB",
        planned / 1048576.0,
        measured / 1048576.0
    );
    // 2% for the allocator's slack, as the CPU's plans.
    assert!(measured <= planned * 1.02, "{v}");
    assert!(measured >= planned * 0.8, "{v}");
}
