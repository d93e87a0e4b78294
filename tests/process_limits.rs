//! A limit set on the process itself (`ulimit -v`: RLIMIT_AS, its address space) bounds
//! the memory the planner plans for, as a cgroup's limit does: under it a job streams,
//! or is refused before it runs with the limit named, instead of planning for the
//! machine's memory and aborting at the first allocation the kernel refuses.
//!
//! The kernel threads are fixed at two (`RAYON_NUM_THREADS`): each thread's allocator
//! arena takes 64 MiB of address space, so the limits below would mean different things
//! on machines with more CPUs.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use std::process::{Command, Output};

use common::scratch;

const MIB: u64 = 1 << 20;

/// `tensorfit args` under `ulimit -v` of `limit` bytes.
fn under_ulimit_v(limit: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", limit / 1024))
        .arg(env!("CARGO_BIN_EXE_tensorfit"))
        .args(args)
        .env("XDG_CACHE_HOME", scratch("cache"))
        .env("RAYON_NUM_THREADS", "2")
        .output()
        .unwrap()
}

#[test]
fn an_evaluation_whose_input_does_not_fit_under_ulimit_v_is_refused_naming_the_limit() {
    // 200 sequences of 2000 steps of 152 features: 232 MiB of input on the host.
    let args = [
        "eval",
        "--batch",
        "200",
        "--seq-len",
        "2000",
        "--device",
        "cpu",
    ];
    let out = under_ulimit_v(300 * MIB, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
    assert!(
        err.contains("ulimit -v (RLIMIT_AS) of 300.0 MiB") && err.contains("host memory"),
        "{err}"
    );
}

#[test]
fn the_plan_under_ulimit_v_streams_within_what_the_limit_leaves() {
    let limit = 600 * MIB;
    let args = [
        "plan",
        "--json",
        "--mode",
        "infer",
        "--batch",
        "100",
        "--seq-len",
        "2000",
        "--device",
        "cpu",
    ];
    let out = under_ulimit_v(limit, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {err}", out.status);
    let v = common::json(&out);
    let chosen = &v["chosen"];
    let usable = chosen["capacity_bytes"].as_u64().unwrap();
    // The input (116 MiB) and what the process has mapped come off the limit.
    assert!(usable < limit - 116 * MIB, "{chosen}");
    assert!(
        chosen["estimated_peak_bytes"].as_u64().unwrap() <= usable,
        "{chosen}"
    );
    // The whole sequence at once needs 394 MiB.
    assert_ne!(chosen["strategy"], "whole sequence", "{chosen}");
}
