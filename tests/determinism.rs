//! Determinism: the same seed gives the same losses on the CPU, run after run, whatever
//! the thread count (rayon's and matrixmultiply's).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tensorfit_command;

fn losses(threads: &str) -> Vec<f64> {
    let out = tensorfit_command()
        .args([
            "train",
            "--steps",
            "5",
            "--batch",
            "32",
            "--seq-len",
            "20",
            "--eval-every",
            "0",
            "--eval-batch",
            "32",
            "--device",
            "cpu",
            "--json",
        ])
        .env("RAYON_NUM_THREADS", threads)
        .env("MATMUL_NUM_THREADS", threads)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn same_seed_same_losses_with_one_or_two_threads() {
    let one = losses("1");
    let two = losses("2");
    let again = losses("2");
    println!("1 thread: {one:?}\n2 threads: {two:?}");
    assert_eq!(one, two, "the thread count changed the losses");
    assert_eq!(two, again, "two runs with the same seed differ");
}
