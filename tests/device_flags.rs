//! The device flags mean one thing each: a second `--device-memory` for one kind is an
//! error, a size without a unit is a whole number of bytes, and `--device auto` never
//! picks a software GPU, even when it is the only device the job fits on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{json, tensorfit_command, wgpu_present};

fn refused(args: &[&str]) -> String {
    let out = tensorfit_command().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    err
}

#[test]
fn a_kind_capped_twice_or_a_fraction_of_a_byte_is_refused() {
    let e = refused(&[
        "plan",
        "--device-memory",
        "cpu=1GB",
        "--device-memory",
        "cpu=2GB",
    ]);
    assert!(e.contains("gives cpu a cap twice"), "{e}");
    let e = refused(&["plan", "--device-memory", "cpu=1.5"]);
    assert!(e.contains("fraction of a byte"), "{e}");
}

#[test]
fn auto_never_chooses_the_software_gpu_when_the_cpu_is_capped() {
    if !wgpu_present() {
        return;
    }
    let capped = [
        "--batch",
        "4",
        "--seq-len",
        "10",
        "--device-memory",
        "cpu=1KB",
    ];
    let out = tensorfit_command()
        .args(["plan", "--mode", "infer", "--json"])
        .args(capped)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "nothing fits on a device auto may use"
    );
    let v = json(&out);
    assert!(v["chosen"].is_null(), "{v}");
    let software = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["fits"] == true)
        .expect("the software GPU fits");
    assert!(
        software["reason"]
            .as_str()
            .unwrap()
            .contains("--device wgpu"),
        "{software}"
    );
    let e = refused(&[&["eval"], &capped[..]].concat());
    assert!(
        e.contains("software device") && e.contains("--device wgpu"),
        "{e}"
    );
}
