//! Outputs are never lost: every output path is checked before any work, an output never
//! replaces one of the run's inputs, a write that fails (a full disk) leaves the previous
//! file intact and no temporary file behind, and an output another process is writing is
//! refused at the start (the last rename would lose one of the two).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use tensorfit::core::HostTensor;
use tensorfit::nn::{Checkpoint, ParamStore};
use tensorfit::output_lock::OutputLock;

use common::{
    example_data, long_training, names_in, scratch, small_checkpoint, tensorfit_command, SmallDisk,
    TINY_RUN,
};

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

/// The message of a command refused because process `pid` writes the output `path`.
fn held_by(err: &str, path: &Path, pid: u32) {
    assert!(
        err.contains(&format!(
            "{}: is the output of another tensorfit process (process {pid})",
            path.display()
        )),
        "{err}"
    );
}

#[test]
fn two_runs_saving_to_one_file_the_second_is_refused_while_the_first_runs() {
    let dir = scratch("outputs-save-twice");
    let save = dir.join("model.safetensors");
    // Both exited 0, and the model of whichever renamed first was lost.
    let mut first = long_training(&dir.join("first"), "1000")
        .arg("--save")
        .arg(&save)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("training (") {
        line.clear();
        assert!(
            lines.read_line(&mut line).unwrap() > 0,
            "the first run ended"
        );
    }
    let second = [
        &["train", "--steps", "1", "--save", s(&save)][..],
        &TINY_RUN,
    ]
    .concat();
    let err = fails(&second);
    let pid = first.id();
    first.kill().unwrap();
    first.wait().unwrap();
    held_by(&err, &save, pid);
    assert!(
        !err.contains("training ("),
        "refused before training: {err}"
    );
    // Its lock ends with it, even killed; a run that ends leaves no lock file behind.
    let out = tensorfit(&second);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names_in(&dir), ["first", "model.safetensors"]);
}

#[test]
fn every_output_written_at_the_end_is_refused_while_another_process_writes_it() {
    let dir = scratch("outputs-held");
    let (ck, input) = checkpoint_and_input(&dir);
    let out = dir.join("out.safetensors");
    let me = std::process::id();
    let held = OutputLock::hold(&out).unwrap();
    let data = example_data("classify.safetensors");
    let model = example_data("classify_model.toml");
    let train_data = [
        "train",
        "--model",
        s(&model),
        "--data",
        s(&data),
        "--epochs",
        "1",
        "--save",
        s(&out),
    ];
    let predict = [
        "predict",
        "--checkpoint",
        s(&ck),
        "--input",
        s(&input),
        "--output",
        s(&out),
    ];
    // Refused before its weights are read.
    let import = [
        "import",
        "--model",
        "seed",
        "--weights",
        "unread.safetensors",
        "--output",
        s(&out),
    ];
    let plot = dir.join("plan.svg");
    let held_plot = OutputLock::hold(&plot).unwrap();
    let plan = ["plan", "--plot", s(&plot)];
    for args in [&train_data[..], &predict, &import] {
        held_by(&fails(args), &out, me);
    }
    held_by(&fails(&plan), &plot, me);
    assert!(!out.exists() && !plot.exists());
    drop((held, held_plot));
    assert!(tensorfit(&predict).status.success());
    assert!(!names_in(&dir).iter().any(|n| n.ends_with(".lock")));
}
