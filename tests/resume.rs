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
fn sgd_with_nesterov_cosine_and_clipping_resumes_bit_identically() {
    let optim = [
        "--optimizer",
        "sgd",
        "--lr",
        "0.05",
        "--momentum",
        "0.9",
        "--nesterov",
        "--schedule",
        "cosine",
        "--t-max",
        "6",
        "--warmup-steps",
        "2",
        "--clip-norm",
        "0.5",
    ];
    let dir = scratch("exact-sgd");
    let whole_file = dir.join("whole.safetensors");
    let mut args = optim.to_vec();
    args.extend(["--steps", "6", "--save", whole_file.to_str().unwrap()]);
    let whole = train("uninterrupted", &args);
    let ck_dir = dir.join("run");
    let ck_s = ck_dir.to_str().unwrap();
    let mut args = optim.to_vec();
    args.extend(["--steps", "3", "--checkpoint-dir", ck_s]);
    let first = train("first half", &args);
    let second = train("resumed", &["--steps", "3", "--resume", ck_s]);
    for key in ["losses", "lrs", "grad_norms"] {
        let values = |v: &Value| v[key].as_array().unwrap().clone();
        let resumed: Vec<Value> = values(&first).into_iter().chain(values(&second)).collect();
        assert_eq!(resumed, values(&whole), "{key} after resuming");
    }
    assert_eq!(
        values_len(&whole, "grad_norms"),
        6,
        "a norm is reported every step"
    );
    let a = Checkpoint::load(&whole_file).unwrap();
    let b = Checkpoint::load(&ck_dir.join("checkpoint.safetensors")).unwrap();
    assert!(b
        .optimizer
        .iter()
        .all(|(n, _)| n.starts_with("sgd.momentum.")));
    assert_eq!(
        (a.params, a.optimizer),
        (b.params, b.optimizer),
        "bit-identical weights and momentum"
    );
}

fn values_len(v: &Value, key: &str) -> usize {
    v[key].as_array().map_or(0, Vec::len)
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
                "--overwrite",
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

/// A kill can leave a temporary file behind; it never replaces the checkpoint, and the
/// next run on the directory removes it (so there is never more than the latest one).
fn leftover_temporaries_are_ignored(dir: &Path) {
    let mut temporaries = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        temporaries += usize::from(name.starts_with(".checkpoint.safetensors.tmp"));
        assert!(
            ["checkpoint.safetensors", ".lock"].contains(&name.as_str())
                || name.starts_with(".checkpoint.safetensors.tmp"),
            "{name}"
        );
    }
    assert!(
        temporaries <= 1,
        "stale temporaries pile up in {}",
        dir.display()
    );
}

/// Runs `train` with exactly `args` (no SMALL defaults) and returns the output.
fn train_raw(args: &[&str]) -> std::process::Output {
    tensorfit_command()
        .arg("train")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_resumed_run_keeps_its_own_batch_lengths_learning_rate_and_seed() {
    let own = [
        "--batch",
        "6",
        "--seq-len",
        "10",
        "--tbptt",
        "5",
        "--lr",
        "0.003",
        "--seed",
        "7",
        "--eval-batch",
        "8",
        "--eval-every",
        "0",
    ];
    let whole = losses(&json(&succeed(
        tensorfit_command()
            .arg("train")
            .args(own)
            .args(["--steps", "4", "--json"]),
        "uninterrupted",
    )));
    let dir = scratch("own-settings");
    let dir_s = dir.to_str().unwrap();
    let first = json(&succeed(
        tensorfit_command().arg("train").args(own).args([
            "--steps",
            "2",
            "--json",
            "--checkpoint-dir",
            dir_s,
        ]),
        "first half",
    ));
    // The README's own command: no settings repeated.
    let second = json(&succeed(
        tensorfit_command().args(["train", "--resume", dir_s, "--steps", "2", "--json"]),
        "resumed with no flags",
    ));
    let resumed: Vec<f64> = losses(&first).into_iter().chain(losses(&second)).collect();
    assert_eq!(resumed, whole);
}

#[test]
fn flags_that_differ_from_the_resumed_run_are_refused_naming_both_values() {
    let dir = scratch("differing-flags");
    let dir_s = dir.to_str().unwrap();
    let mut args = SMALL.to_vec();
    args.extend(["--steps", "1", "--checkpoint-dir", dir_s]);
    assert!(train_raw(&args).status.success());
    for (flag, value, stored) in [
        ("--batch", "16", "8"),
        ("--seq-len", "30", "12"),
        ("--tbptt", "4", "12"),
        ("--tbptt-mode", "windows", "last"),
        ("--lr", "0.01", "0.001"),
        ("--seed", "3", "1"),
        ("--eval-batch", "32", "16"),
    ] {
        let out = train_raw(&["--resume", dir_s, "--steps", "1", flag, value]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {err}");
        assert!(
            err.contains(&format!("{flag} {value} (the run's is {stored})")),
            "{flag}: {err}"
        );
    }
    // Repeating the run's own values is fine.
    let mut same = vec!["--resume", dir_s, "--steps", "1"];
    same.extend(SMALL);
    assert!(train_raw(&same).status.success());
    assert_eq!(
        Checkpoint::load(&dir.join("checkpoint.safetensors"))
            .unwrap()
            .step,
        2
    );
}

#[test]
fn a_checkpoint_from_before_run_settings_resumes_with_a_note() {
    let dir = scratch("old-checkpoint");
    let file = dir.join("old.safetensors");
    let mut args = SMALL.to_vec();
    args.extend(["--steps", "1", "--save", file.to_str().unwrap()]);
    assert!(train_raw(&args).status.success());
    let mut ck = Checkpoint::load(&file).unwrap();
    ck.extra.remove("run_settings");
    ck.extra.insert("seed".into(), "1".into());
    ck.save(&file).unwrap();
    let mut resume = vec!["--resume", file.to_str().unwrap(), "--steps", "1"];
    resume.extend(SMALL);
    let out = train_raw(&resume);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("written by an older tensorfit and keeps no run settings")
            && err.contains("batch 8, length 12"),
        "{err}"
    );
}

#[test]
fn a_step_count_past_the_largest_is_refused_naming_steps() {
    let dir = scratch("wrap");
    let file = dir.join("ck.safetensors");
    let mut args = SMALL.to_vec();
    args.extend(["--steps", "2", "--save", file.to_str().unwrap()]);
    assert!(train_raw(&args).status.success());
    let out = train_raw(&[
        "--resume",
        file.to_str().unwrap(),
        "--steps",
        "18446744073709551615",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--steps 18446744073709551615")
            && err.contains("passes the largest step count"),
        "{err}"
    );
    assert_eq!(Checkpoint::load(&file).unwrap().step, 2);
}

#[test]
fn optimizer_flags_that_differ_from_the_resumed_run_are_refused_naming_both_values() {
    let dir = scratch("differing-optimizer");
    let dir_s = dir.to_str().unwrap();
    let own = [
        "--optimizer",
        "sgd",
        "--momentum",
        "0.9",
        "--clip-norm",
        "0.5",
    ];
    let mut args = SMALL.to_vec();
    args.extend(own);
    args.extend(["--steps", "1", "--checkpoint-dir", dir_s]);
    assert!(train_raw(&args).status.success());
    // They were all refused as "drop --clip-norm", the run's own values too, and neither
    // value was named.
    for (typed, said) in [
        (
            &["--clip-norm", "1"][..],
            "--clip-norm 1 (the run's is 0.5)",
        ),
        (&["--nesterov"], "--nesterov (the run's is off)"),
        (&["--clip-value", "2"], "--clip-value 2 (the run's is none)"),
        (
            &["--optimizer", "adam"],
            "--optimizer adam (the run's is sgd)",
        ),
    ] {
        let out = train_raw(&[&["--resume", dir_s, "--steps", "1"][..], typed].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{typed:?}: {err}");
        assert!(
            err.contains(
                "a resumed run keeps the optimizer, clipping and schedule it was started with"
            ) && err.contains(said),
            "{typed:?}: {err}"
        );
    }
    let same = train_raw(&[&["--resume", dir_s, "--steps", "1"][..], &own].concat());
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert_eq!(
        Checkpoint::load(&dir.join("checkpoint.safetensors"))
            .unwrap()
            .step,
        2
    );
}
