//! Outputs are never lost: every output path is checked before any work, an output never
//! replaces one of the run's inputs, and a write that fails (a full disk) leaves the
//! previous file intact and no temporary file behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tensorfit::core::HostTensor;
use tensorfit::nn::{Checkpoint, ParamStore};

use common::{names_in, scratch, small_checkpoint, tensorfit_command, SmallDisk, TINY_RUN};

fn tensorfit(args: &[&str]) -> Output {
    tensorfit_command().args(args).output().unwrap()
}

/// Requires exit code 1 without a panic; returns stderr.
fn fails(args: &[&str]) -> String {
    let out = tensorfit(args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    err
}

/// `predict` of `input` by the checkpoint `ck` into `output`, which must fail; returns
/// stderr.
fn predict_fails(ck: &Path, input: &Path, output: &Path) -> String {
    fails(&[
        "predict",
        "--checkpoint",
        s(ck),
        "--input",
        s(input),
        "--output",
        s(output),
    ])
}

/// A small model's checkpoint and a matching input of 3 sequences, written in `dir`.
fn checkpoint_and_input(dir: &Path) -> (PathBuf, PathBuf) {
    let ck = dir.join("model.safetensors");
    small_checkpoint().save(&ck).unwrap();
    (ck, input_file(dir, "input.safetensors", 3))
}

/// An input of `batch` sequences of 7 steps, written as `dir/name`.
fn input_file(dir: &Path, name: &str, batch: usize) -> PathBuf {
    let mut inputs = ParamStore::new();
    inputs.insert("input", HostTensor::zeros([batch, 7, 152]));
    let input = dir.join(name);
    std::fs::write(&input, inputs.to_safetensors("", HashMap::new()).unwrap()).unwrap();
    input
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_save_path_that_cannot_be_written_is_refused_before_the_first_step() {
    let dir = scratch("outputs-save");
    let missing = dir.join("nosuchdir").join("model.safetensors");
    let err = fails(&["train", "--steps", "3", "--save", s(&missing)]);
    assert!(
        err.contains("--save") && err.contains("nosuchdir") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!err.contains("training ("), "it trained first: {err}");

    let err = fails(&["train", "--steps", "3", "--save", s(&dir)]);
    assert!(err.contains("is a directory"), "{err}");

    let file = dir.join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = fails(&["train", "--steps", "3", "--checkpoint-dir", s(&file)]);
    assert!(err.contains("is a file, not a directory"), "{err}");
    assert!(!err.contains("File exists"), "{err}");
}

#[test]
fn a_prediction_output_that_cannot_be_written_is_refused_before_the_run() {
    let dir = scratch("outputs-predict-missing");
    let (ck, input) = checkpoint_and_input(&dir);
    let out = dir.join("nosuchdir").join("probs.safetensors");
    let err = predict_fails(&ck, &input, &out);
    assert!(
        err.contains("--output") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!err.contains("chosen:"), "it planned and ran first: {err}");
}

#[test]
fn predict_refuses_to_overwrite_its_input_or_its_checkpoint() {
    let dir = scratch("outputs-same");
    let (ck, input) = checkpoint_and_input(&dir);
    let before = (std::fs::read(&ck).unwrap(), std::fs::read(&input).unwrap());
    // The same files under other spellings.
    let input_again = dir.join(".").join("input.safetensors");
    let ck_again = dir
        .join("..")
        .join("outputs-same")
        .join("model.safetensors");
    for (output, flag) in [(&input_again, "--input"), (&ck_again, "--checkpoint")] {
        let err = predict_fails(&ck, &input, output);
        assert!(err.contains(&format!("is the {flag} file")), "{err}");
    }
    assert_eq!(
        (std::fs::read(&ck).unwrap(), std::fs::read(&input).unwrap()),
        before,
        "the inputs are unchanged"
    );
}

#[test]
fn a_full_disk_keeps_the_previous_prediction_and_no_temporary_file() {
    let Some(disk) = SmallDisk::mount("outputs-full-disk", 64 * 1024) else {
        return;
    };
    let dir = scratch("outputs-full-disk-inputs");
    let (ck, small) = checkpoint_and_input(&dir);
    // 1000 sequences: probabilities larger than the disk has room for.
    let large = input_file(&dir, "large.safetensors", 1000);
    let out = disk.path.join("probs.safetensors");
    let predict = |input: &Path| {
        tensorfit(&[
            "predict",
            "--checkpoint",
            s(&ck),
            "--input",
            s(input),
            "--output",
            s(&out),
        ])
    };
    assert!(predict(&small).status.success());
    let previous = std::fs::read(&out).unwrap();
    disk.fill("filler", 0);
    let result = predict(&large);
    let err = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{err}");
    assert!(err.contains("probs.safetensors"), "{err}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        previous,
        "previous result intact"
    );
    assert_eq!(names_in(&disk.path), ["filler", "probs.safetensors"]);
}

#[test]
fn a_closed_stderr_or_stdout_does_not_stop_training() {
    let dir = scratch("outputs-closed");
    let save = dir.join("model.safetensors");
    // The third run also prints the CPU backend's kernel profile to the closed stderr
    // as the backend is dropped.
    for (closed, json, profile) in [
        ("stderr", false, "0"),
        ("stdout", true, "0"),
        ("stderr", false, "1"),
    ] {
        let mut cmd = tensorfit_command();
        cmd.env("TENSORFIT_PROFILE", profile);
        cmd.arg("train")
            .args(TINY_RUN)
            .args(["--steps", "12"])
            .arg("--save")
            .arg(&save);
        if json {
            cmd.arg("--json");
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        // The reading end closes before the run writes anything after its start.
        match closed {
            "stderr" => drop(child.stderr.take()),
            _ => drop(child.stdout.take()),
        }
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "closed {closed} (profile {profile}): {status}"
        );
        assert_eq!(Checkpoint::load(&save).unwrap().step, 12);
        std::fs::remove_file(&save).unwrap();
    }
}

#[test]
fn runs_leave_no_directory_of_their_own_in_the_temporary_directory() {
    let tmp = scratch("outputs-tmpdir");
    for _ in 0..2 {
        let out = tensorfit_command()
            .args(["devices", "--json"])
            .env_remove("XDG_RUNTIME_DIR")
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let left = names_in(&tmp);
    assert!(left.len() <= 1, "one runtime directory per run: {left:?}");
}
