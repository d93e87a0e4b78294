//! Crash-safe checkpoints: resuming continues exactly where an uninterrupted run would
//! be, and a training process killed (SIGKILL) at random moments always leaves a
//! checkpoint that loads and resumes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tensorfit::nn::{Checkpoint, Rng};

use common::{scratch, tensorfit_command};

const SMALL: [&str; 8] = [
    "--batch",
    "8",
    "--seq-len",
    "12",
    "--eval-batch",
    "16",
    "--eval-every",
    "0",
];

fn train(extra: &[&str]) -> Value {
    let out = tensorfit_command()
        .arg("train")
        .args(SMALL)
        .args(extra)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn losses(v: &Value) -> Vec<f64> {
    v["losses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn resuming_gives_exactly_the_uninterrupted_losses() {
    let whole = losses(&train(&["--steps", "6"]));
    let dir = scratch("exact");
    let dir_s = dir.to_str().unwrap();
    let first = losses(&train(&[
        "--steps",
        "3",
        "--checkpoint-dir",
        dir_s,
        "--checkpoint-every",
        "3",
    ]));
    let second = losses(&train(&["--steps", "3", "--resume", dir_s]));
    let resumed: Vec<f64> = first.into_iter().chain(second).collect();
    assert_eq!(
        resumed, whole,
        "losses after resuming must equal the uninterrupted run's exactly"
    );
}

#[test]
fn killed_at_random_moments_the_latest_checkpoint_always_resumes() {
    let dir = scratch("killed");
    let dir_s = dir.to_str().unwrap();
    let mut rng = Rng::new(2026);
    let mut kills = 0;
    for round in 0..10 {
        let mut child = tensorfit_command()
            .arg("train")
            .args(SMALL)
            .args([
                "--steps",
                "100000",
                "--checkpoint-dir",
                dir_s,
                "--checkpoint-every",
                "1",
                "--json",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The first round dies once a checkpoint exists; later ones anywhere.
        let file = dir.join("checkpoint.safetensors");
        if round == 0 {
            for _ in 0..600 {
                if file.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let wait = 20 + rng.int_inclusive(0, 600) as u64;
        std::thread::sleep(Duration::from_millis(wait));
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        kills += 1;
        let ck = Checkpoint::load(&file).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(ck.step > 0);
        // It resumes: one more step from it.
        let out = tensorfit_command()
            .arg("train")
            .args(SMALL)
            .args(["--steps", "1", "--resume", dir_s, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["loss"].as_f64().unwrap().is_finite());
        leftover_temporaries_are_ignored(&dir);
    }
    assert_eq!(kills, 10);
}

/// A kill can leave a temporary file behind; it never replaces the checkpoint.
fn leftover_temporaries_are_ignored(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(
            name == "checkpoint.safetensors" || name.starts_with(".checkpoint.safetensors.tmp"),
            "{name}"
        );
    }
}
