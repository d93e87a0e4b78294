//! A resumed data run reads the data it trained on (`train --data … --resume DIR`): its
//! checkpoints keep the identity of `--data` and `--val` (path, size, a sampled content
//! hash, the sequences read), and resuming on another file, or on a file that changed, is
//! refused naming what differs; the same content moved elsewhere resumes with a note; a
//! checkpoint written before the identity was kept resumes with a warning.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{arg, example_data, refused, scratch, succeed, tensorfit_command};
use tensorfit::data::IDENTITY_KEY;
use tensorfit::nn::Checkpoint;

/// `train` of `model` on `data` (then `extra`) on the CPU in batches of 2, checkpointing
/// into `dir`; the arguments, to be resumed. One epoch unless `extra` says.
fn run_args<'a>(model: &'a str, data: &'a Path, dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train",
        "--model",
        model,
        "--data",
        arg(data),
        "--batch",
        "2",
        "--device",
        "cpu",
        "--checkpoint-dir",
        arg(dir),
    ];
    v.extend_from_slice(extra);
    if !extra.contains(&"--epochs") {
        v.extend(["--epochs", "1"]);
    }
    v
}

/// The arguments that resume the run of `dir` on `data` (then `extra`).
fn resume_args<'a>(data: &'a Path, dir: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train",
        "--data",
        arg(data),
        "--device",
        "cpu",
        "--resume",
        arg(dir),
    ];
    v.extend_from_slice(extra);
    v
}

/// A copy of the example file `name` in the scratch directory `dir`.
fn copy_of(name: &str, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let to = dir.join(name);
    std::fs::copy(example_data(name), &to).unwrap();
    to
}

fn classify_model() -> String {
    arg(&example_data("classify_model.toml")).to_string()
}

/// A fresh checkpoint directory of the test `name`.
fn fresh(name: &str) -> PathBuf {
    let dir = scratch(name).join("ck");
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn resuming_on_another_data_file_is_refused_naming_the_files_and_what_differs() {
    let ck = fresh("resume-other-file");
    let model = classify_model();
    let data = example_data("classify.safetensors");
    succeed(
        tensorfit_command().args(run_args(&model, &data, &ck, &[])),
        "train",
    );
    // The same sequences in another format: other bytes.
    let other = example_data("classify.npz");
    let err = refused(&resume_args(&other, &ck, &[]));
    for want in [
        "--data",
        "classify.npz is not the data the run resumed from",
        "classify.safetensors",
        "bytes (the run's:",
        "content hash",
        "--init",
    ] {
        assert!(err.contains(want), "no `{want}` in: {err}");
    }
}

#[test]
fn resuming_after_the_data_file_changed_in_place_is_refused() {
    let dir = scratch("resume-changed");
    let ck = fresh("resume-changed");
    let data = copy_of("reviews.tsv", &dir);
    let model = arg(&example_data("reviews_model.toml")).to_string();
    succeed(
        tensorfit_command().args(run_args(&model, &data, &ck, &["--val-fraction", "0"])),
        "train",
    );
    // Two characters of a text swapped: the same size, lines and characters.
    let text = std::fs::read_to_string(&data).unwrap();
    std::fs::write(&data, text.replacen("a fine film", "a fine flim", 1)).unwrap();
    let err = refused(&resume_args(&data, &ck, &[]));
    assert!(
        err.contains("reviews.tsv is not the data the run resumed from")
            && err.contains("content hash")
            && !err.contains("bytes (the run's:"),
        "{err}"
    );
}

#[test]
fn resuming_on_a_moved_copy_of_the_data_continues_with_a_note() {
    let ck = fresh("resume-moved");
    let model = classify_model();
    let data = example_data("classify.safetensors");
    succeed(
        tensorfit_command().args(run_args(&model, &data, &ck, &["--epochs", "2"])),
        "train",
    );
    let moved = copy_of(
        "classify.safetensors",
        &scratch("resume-moved").join("elsewhere"),
    );
    let out = succeed(
        tensorfit_command().args(resume_args(&moved, &ck, &["--epochs", "2"])),
        "resume on a moved copy",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: --data") && err.contains("holds the same content as the run's"),
        "{err}"
    );
}

#[test]
fn resuming_without_the_val_file_keeps_the_runs_and_another_is_refused() {
    let ck = fresh("resume-val");
    let model = classify_model();
    let data = example_data("classify.safetensors");
    let val = example_data("classify.npz");
    succeed(
        tensorfit_command().args(run_args(&model, &data, &ck, &["--val", arg(&val)])),
        "train with --val",
    );
    // Without --val the run's own is used (as every setting not typed again), and
    // checked by its identity like --data.
    let out = succeed(
        tensorfit_command().args(resume_args(&data, &ck, &[])),
        "resume without --val",
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("to validate on, from") && said.contains("classify.npz"),
        "{said}"
    );
    let other = example_data("classify_compressed.npz");
    let err = refused(&resume_args(&data, &ck, &["--val", arg(&other)]));
    assert!(
        err.contains("--val") && err.contains("classify_compressed.npz is not the data"),
        "{err}"
    );
}

#[test]
fn a_checkpoint_without_the_datas_identity_resumes_with_a_warning_that_it_cannot_be_checked() {
    let ck = fresh("resume-old");
    let model = classify_model();
    let data = example_data("classify.safetensors");
    succeed(
        tensorfit_command().args(run_args(&model, &data, &ck, &["--epochs", "2"])),
        "train",
    );
    // As an older tensorfit wrote it.
    let last = ck.join("last.safetensors");
    let mut old = Checkpoint::load(&last).unwrap();
    assert!(old.extra.remove(IDENTITY_KEY).is_some());
    old.save(&last).unwrap();
    let out = succeed(
        tensorfit_command().args(resume_args(&data, &ck, &["--epochs", "2"])),
        "resume an old checkpoint",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning:") && err.contains("cannot be checked"),
        "{err}"
    );
}
