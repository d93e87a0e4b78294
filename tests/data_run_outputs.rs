//! What a data run leaves and keeps (`train --data`): the curves image beside
//! metrics.jsonl; `--resume` of a run stopped by a signal, which ends with the weights,
//! best checkpoint and metrics of a run never stopped; and a best checkpoint that cannot
//! be written, which warns while the run goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{
    arg, checkpoint_bits, example_data, interrupted, scratch, spawn_until_every, succeed,
    tensorfit_command,
};
use tensorfit::nn::Checkpoint;

/// `train --data` of the example classifier, validating on a quarter of the sequences
/// every 2 steps, checkpointing into `dir` every 2 steps, for `epochs` epochs of 5 steps
/// (9 sequences in batches of 2).
fn training(dir: &Path, epochs: &str) -> Command {
    let mut c = tensorfit_command();
    c.args([
        "train",
        "--model",
        arg(&example_data("classify_model.toml")),
        "--data",
        arg(&example_data("classify.safetensors")),
        "--val-fraction",
        "0.25",
        "--epochs",
        epochs,
        "--batch",
        "2",
        "--lr",
        "0.02",
        "--eval-every",
        "2",
        "--checkpoint-every",
        "2",
        "--device",
        "cpu",
        "--checkpoint-dir",
        arg(dir),
    ]);
    c
}

/// The validation losses of a metrics.jsonl, by step.
fn val_losses(dir: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| Some((v["step"].as_u64()?, v["val_loss"].as_f64()?)))
        .collect()
}

#[test]
fn a_data_run_leaves_an_svg_of_its_training_and_validation_curves() {
    let dir = scratch("curves");
    succeed(&mut training(&dir, "3"), "train --data");
    let svg = std::fs::read_to_string(dir.join("curves.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    for label in ["training", "validation", "step", "loss"] {
        assert!(
            texts.iter().any(|t| t.trim() == label),
            "no `{label}` in the image"
        );
    }
    // One line per curve (and the legend's two marks).
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert!(lines >= 2, "{lines} polylines");
}

#[test]
fn a_data_run_stopped_by_a_signal_resumes_to_the_weights_of_a_run_never_stopped() {
    let whole = scratch("resume-whole");
    succeed(&mut training(&whole, "20"), "train --data");

    // Stopped inside an epoch (where the signal lands is up to the scheduler: a stop
    // between epochs is tried again).
    let mut attempt = 0;
    let (dir, stopped) = loop {
        attempt += 1;
        let dir = scratch(&format!("resume-stopped-{attempt}"));
        let out = interrupted(&mut training(&dir, "20"), &dir.join("last.safetensors"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        let stopped = Checkpoint::load(&dir.join("last.safetensors")).unwrap();
        assert!(stopped.step < 100, "the run ended before the signal: {err}");
        let position = &stopped.extra["data.position"];
        if !position.contains("\"batches_done\":0") || attempt == 8 {
            assert!(!position.contains("\"batches_done\":0"), "{position}");
            break (dir, stopped);
        }
    };

    let resumed = succeed(
        tensorfit_command().args([
            "train",
            "--resume",
            arg(&dir),
            "--data",
            arg(&example_data("classify.safetensors")),
            "--epochs",
            "20",
            "--device",
            "cpu",
            "--json",
        ]),
        "train --resume",
    );
    let last = String::from_utf8_lossy(&resumed.stdout);
    let summary = last.lines().last().unwrap();
    assert!(summary.contains("\"steps\":100"), "{summary}");
    for file in ["last.safetensors", "checkpoint.safetensors"] {
        assert_eq!(
            checkpoint_bits(&dir.join(file)),
            checkpoint_bits(&whole.join(file)),
            "{file}: stopped at step {} and resumed",
            stopped.step
        );
    }
    assert_eq!(val_losses(&dir), val_losses(&whole));
}

#[test]
fn a_best_checkpoint_that_cannot_be_written_warns_and_the_run_goes_on() {
    let dir = scratch("save-fails");
    let elsewhere = scratch("save-fails-elsewhere");
    let save = elsewhere.join("best.safetensors");
    let mut cmd = training(&dir, "20");
    cmd.args(["--save", arg(&save)]);
    // The run writes its bests within milliseconds: look every millisecond, so that the
    // directory goes before the next best.
    let child = spawn_until_every(&mut cmd, &save, std::time::Duration::from_millis(1));
    // From now on every --save fails: its directory is gone. (The run may be writing a
    // new best into it meanwhile: its temporary file makes the directory not empty for
    // a moment, so the removal tries again.)
    let mut removed = std::fs::remove_dir_all(&elsewhere);
    for _ in 0..100 {
        match &removed {
            Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                std::thread::sleep(std::time::Duration::from_millis(5));
                removed = std::fs::remove_dir_all(&elsewhere);
            }
            _ => break,
        }
    }
    removed.unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: step") && err.contains("the best model so far was not saved"),
        "{err}"
    );
    assert!(err.contains("done: 100 steps"), "{err}");
}

#[test]
fn a_step_budget_ends_a_data_run_and_stays_its_budget_when_resumed() {
    // 12 sequences, a quarter validating: 9 train, in 5 batches (the last of 1) an epoch.
    let steps = |dir: &Path| {
        Checkpoint::load(&dir.join("last.safetensors"))
            .unwrap()
            .step
    };
    let position = |dir: &Path| {
        let ck = Checkpoint::load(&dir.join("last.safetensors")).unwrap();
        ck.extra["data.position"].clone()
    };
    // Without --epochs: the epochs the budget needs (2), ended within the second.
    let dir = scratch("budget");
    let args: Vec<_> = training(&dir, "10")
        .get_args()
        .map(|a| a.to_owned())
        .collect();
    let mut cmd = tensorfit_command();
    let mut skip = false;
    for a in &args {
        // The same run without its --epochs.
        match (skip, a.to_str()) {
            (true, _) => skip = false,
            (false, Some("--epochs")) => skip = true,
            _ => {
                cmd.arg(a);
            }
        }
    }
    let out = succeed(cmd.args(["--steps", "8"]), "train --data --steps 8");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("2 epochs of 5 steps"), "{err}");
    assert!(err.contains("done: 8 steps"), "{err}");
    assert_eq!(steps(&dir), 8);
    let at = position(&dir);
    assert!(
        at.contains("\"epoch\":1") && at.contains("\"batches_done\":3"),
        "{at}"
    );
    // The last validation is at the budget's step.
    assert_eq!(val_losses(&dir).last().map(|v| v.0), Some(8));

    // With --epochs too: whichever comes first.
    let first = scratch("budget-epochs");
    succeed(training(&first, "1").args(["--steps", "8"]), "1 epoch");
    assert_eq!(steps(&first), 5);

    // Resumed, the run keeps its budget: nothing more to train, and another is refused.
    let resume = ["--resume", arg(&dir)];
    succeed(training(&dir, "2").args(resume), "resumed at its budget");
    assert_eq!(steps(&dir), 8);
    let out = training(&dir, "2")
        .args(resume)
        .args(["--steps", "12"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--steps 12 (the run's is 8)"), "{err}");
}
