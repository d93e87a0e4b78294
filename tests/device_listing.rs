//! Several devices of a kind: `tensorfit devices` lists every CUDA GPU and every usable
//! wgpu adapter under its own id (`cuda:0`, `cuda:1`, `wgpu:0`, `wgpu:1`), and `plan`
//! plans each. This machine has at most lavapipe; the id assignment over several devices
//! of a kind is unit-tested with fake devices in `crates/tensorfit-engine/src/devices.rs`, and the choice among
//! several of a kind in `tests/plan_assume.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::{job, json, plan_json, succeed, tensorfit_command};

#[test]
fn every_device_has_its_own_id_numbered_from_zero_within_its_kind() {
    let v = json(&succeed(
        tensorfit_command().args(["devices", "--json"]),
        "devices --json",
    ));
    let rows = v["devices"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["device"].as_str().unwrap()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert!(ids.contains(&"cpu"), "{ids:?}");
    for kind in ["cuda", "wgpu"] {
        let mut numbers: Vec<usize> = ids
            .iter()
            .filter_map(|id| id.strip_prefix(&format!("{kind}:")))
            .map(|n| n.parse().expect("a number after the kind"))
            .collect();
        numbers.sort_unstable();
        let want: Vec<usize> = (0..numbers.len()).collect();
        assert_eq!(numbers, want, "{kind}: {ids:?}");
        assert!(
            !numbers.is_empty(),
            "{kind} is listed, present or not: {ids:?}"
        );
    }
    if !rows
        .iter()
        .any(|r| r["kind"] == "wgpu" && r["available"] == true)
    {
        // Prints why, or fails under TENSORFIT_REQUIRE=wgpu.
        tensorfit_testing::skip("planning every listed device", "wgpu", "no adapter listed");
        return;
    }
    // Every available device is planned under its id.
    let plan = plan_json(&job("infer", "4", "20", &[]));
    let planned: BTreeSet<&str> = plan["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["device"].as_str().unwrap())
        .collect();
    for r in rows.iter().filter(|r| r["available"] == true) {
        let id = r["device"].as_str().unwrap();
        assert!(planned.contains(id), "{id} is planned: {planned:?}");
    }
}
