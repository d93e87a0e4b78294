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

use common::{json, losses, scratch, succeed, tensorfit_command};

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

/// A small `train --json` run with `extra` arguments; a failure names `what`.
fn train(what: &str, extra: &[&str]) -> Value {
    let out = succeed(
        tensorfit_command()
            .arg("train")
            .args(SMALL)
            .args(extra)
            .arg("--json"),
        what,
    );
    json(&out)
}

#[test]
fn resuming_gives_exactly_the_uninterrupted_losses() {
    let whole = losses(&train("uninterrupted", &["--steps", "6"]));
    let dir = scratch("exact");
    let dir_s = dir.to_str().unwrap();
    let first = losses(&train(
        "first half",
        &[
            "--steps",
            "3",
            "--checkpoint-dir",
            dir_s,
            "--checkpoint-every",
            "3",
        ],
    ));
    let second = losses(&train("resumed", &["--steps", "3", "--resume", dir_s]));
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
    let file = dir.join("checkpoint.safetensors");
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
        // Only a kill of a run still in progress counts (one that had exited proves nothing).
        let running = child.try_wait().unwrap().is_none();
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();
        kills += usize::from(running);
        let ck = Checkpoint::load(&file).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(ck.step > 0);
        // It resumes: one more step from it.
        let v = train(
            &format!("round {round}"),
            &["--steps", "1", "--resume", dir_s],
        );
        assert!(v["loss"].as_f64().unwrap().is_finite());
        leftover_temporaries_are_ignored(&dir);
    }
    assert_eq!(kills, 10, "every round killed a training run in progress");
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
