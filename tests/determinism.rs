//! Determinism: the same seed gives the same losses on the CPU, run after run, whatever
//! the thread count (`RAYON_NUM_THREADS` sizes the kernel pool, which runs every CPU
//! kernel, the reference GEMM's row blocks included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{json, losses, succeed, tensorfit_command};

fn losses_with(threads: &str) -> Vec<f64> {
    let out = succeed(
        tensorfit_command()
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
            .env("RAYON_NUM_THREADS", threads),
        &format!("train with {threads} threads"),
    );
    losses(&json(&out))
}

#[test]
fn same_seed_same_losses_with_one_or_two_threads() {
    let one = losses_with("1");
    let two = losses_with("2");
    let again = losses_with("2");
    println!("1 thread: {one:?}\n2 threads: {two:?}");
    assert_eq!(one, two, "the thread count changed the losses");
    assert_eq!(two, again, "two runs with the same seed differ");
}
