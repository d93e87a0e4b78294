//! `train --data` over sequences of several lengths with `--tbptt`: the scan knows every
//! length and the seed every epoch's batches, so a batch whose shortest sequence ends
//! before the steps its head reads is refused before the first step, and before the
//! checkpoint directory is written, naming the flag, the lengths and what would train; the
//! message says what the model's head reads. A head on every step trains ragged data with
//! `--tbptt-mode windows` (every window scores its steps, masked past each end).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{arg, refused, scratch, succeed, tensorfit_command};

/// Sequences of 2 to 9 steps: batches of 4 grouped by length still pad a sequence of 2 or
/// 3 steps to 4 or more.
const LENGTHS: [usize; 12] = [3, 4, 8, 9, 5, 6, 2, 9, 7, 3, 8, 4];

/// A long CSV of `LENGTHS` with 2 features, labels per step or (on the last row) per
/// sequence, in `dir`.
fn long_csv(dir: &Path, per_step: bool) -> PathBuf {
    let mut text = String::from("sequence,step,f1,f2,label\n");
    for (s, &len) in LENGTHS.iter().enumerate() {
        for t in 0..len {
            let (a, b) = ((s * 7 + t * 3) % 11, (s * 5 + t) % 7);
            let label = match (per_step, t + 1 == len) {
                (true, _) => ((s + t) % 3).to_string(),
                (false, true) => (s % 3).to_string(),
                (false, false) => String::new(),
            };
            text += &format!("s{s},{t},0.{a},-0.{b},{label}\n");
        }
    }
    let path = dir.join(if per_step { "steps.csv" } else { "seqs.csv" });
    std::fs::write(&path, text).unwrap();
    path
}

/// A one-layer LSTM of 6 over 2 features, 3 classes, its head `on` with `layers`.
fn model(dir: &Path, on: &str, layers: &str) -> PathBuf {
    let path = dir.join(format!("{on}.toml"));
    std::fs::write(
        &path,
        format!("[input]\nkind = \"dense\"\nfeatures = 2\n\n[recurrent]\ncell = \"lstm\"\nhidden = 6\nlayers = 1\n\n[head]\non = \"{on}\"\nlayers = {layers}\n\n[loss]\nkind = \"cross_entropy\"\nclasses = 3\n"),
    )
    .unwrap();
    path
}

/// `train --data data --model model` for 2 epochs of batch 4 into `ck`, with `extra`.
fn train<'a>(data: &'a Path, model: &'a Path, ck: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--data",
        arg(data),
        "--model",
        arg(model),
        "--batch",
        "4",
        "--epochs",
        "2",
        "--val-fraction",
        "0",
        "--device",
        "cpu",
        "--checkpoint-dir",
        arg(ck),
    ];
    args.extend_from_slice(extra);
    args
}

/// The number after `at least ` in `message`.
fn at_least(message: &str) -> String {
    let (_, rest) = message.split_once("at least ").expect(message);
    rest.chars().take_while(char::is_ascii_digit).collect()
}

#[test]
fn a_head_on_the_last_step_is_refused_before_the_first_step_naming_the_tbptt_that_trains() {
    let dir = scratch("padded-tbptt").join("last");
    std::fs::create_dir_all(&dir).unwrap();
    let (data, m) = (long_csv(&dir, false), model(&dir, "last", "[]"));
    let ck = dir.join("run");
    for mode in ["last", "windows"] {
        let e = refused(&train(
            &data,
            &m,
            &ck,
            &["--tbptt", "3", "--tbptt-mode", mode],
        ));
        assert!(e.contains("--tbptt 3"), "{e}");
        assert!(e.contains("a batch of epoch 1 pads sequences of"), "{e}");
        assert!(
            e.contains("the head reads each sequence's last step"),
            "{e}"
        );
        assert!(!e.contains("training step"), "refused before any step: {e}");
        assert!(!ck.exists(), "nothing written: {e}");
        if mode == "windows" {
            assert!(e.contains("with --tbptt-mode last"), "{e}");
        }
        // What it says trains, trains.
        let tbptt = at_least(&e);
        succeed(
            tensorfit_command().args(train(&data, &m, &ck, &["--tbptt", &tbptt])),
            &format!("--tbptt {tbptt}, as the refusal of mode {mode} says"),
        );
        assert!(ck.join("last.safetensors").exists());
        std::fs::remove_dir_all(&ck).unwrap();
    }
}

#[test]
fn a_head_on_every_step_in_mode_last_is_refused_saying_what_it_reads() {
    let dir = scratch("padded-tbptt").join("every-last");
    std::fs::create_dir_all(&dir).unwrap();
    let (data, m) = (long_csv(&dir, true), model(&dir, "every_step", "[]"));
    let ck = dir.join("run");
    let e = refused(&train(&data, &m, &ck, &["--tbptt", "3"]));
    assert!(e.contains("--tbptt 3 on"), "{e}");
    assert!(e.contains("the head reads every step"), "{e}");
    assert!(!e.contains("reads each sequence's last step"), "{e}");
    assert!(e.contains("give --tbptt-mode windows"), "{e}");
    assert!(!ck.exists(), "nothing written: {e}");
}

#[test]
fn a_head_on_every_step_trains_ragged_data_in_windows() {
    let dir = scratch("padded-tbptt").join("every-windows");
    std::fs::create_dir_all(&dir).unwrap();
    let (data, m) = (long_csv(&dir, true), model(&dir, "every_step", "[]"));
    let ck = dir.join("run");
    let args = train(&data, &m, &ck, &["--tbptt", "3", "--tbptt-mode", "windows"]);
    succeed(tensorfit_command().args(args), "windows over ragged data");
    assert!(ck.join("checkpoint.safetensors").exists());
    assert!(ck.join("last.safetensors").exists());
}

#[test]
fn a_batchnorm_on_every_step_over_padded_batches_is_refused_naming_the_file_before_writing() {
    let dir = scratch("padded-tbptt").join("every-bn");
    std::fs::create_dir_all(&dir).unwrap();
    let data = long_csv(&dir, true);
    let m = model(&dir, "every_step", "[{ kind = \"batchnorm\" }]");
    let ck = dir.join("run");
    let e = refused(&train(&data, &m, &ck, &[]));
    assert!(
        e.contains("steps.csv: sequences of 2 to 9 steps, in padded batches"),
        "{e}"
    );
    assert!(
        e.contains("`head.0` (batchnorm) mixes the rows of its batch"),
        "{e}"
    );
    assert!(
        !e.contains("no device"),
        "a data matter, not a device's: {e}"
    );
    assert!(!ck.exists(), "nothing written: {e}");
}

#[test]
fn a_batchnorm_on_every_step_trained_on_one_length_evaluates_and_predicts_padded_files() {
    let dir = scratch("padded-tbptt").join("every-bn-eval");
    std::fs::create_dir_all(&dir).unwrap();
    let ragged = long_csv(&dir, true);
    // The same file cut to sequences of 2 steps: one length, no padding.
    let text = std::fs::read_to_string(&ragged).unwrap();
    let uniform = dir.join("uniform.csv");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.split(',')
                .nth(1)
                .is_none_or(|t| t == "step" || t == "0" || t == "1")
        })
        .collect();
    std::fs::write(&uniform, rows.join("\n") + "\n").unwrap();
    let m = model(&dir, "every_step", "[{ kind = \"batchnorm\" }]");
    let ck = dir.join("run");
    succeed(
        tensorfit_command().args(train(&uniform, &m, &ck, &[])),
        "train on one length",
    );
    let ck_file = ck.join("checkpoint.safetensors");
    let v = common::data_cli::eval_on_data(&ck_file, &ragged, "eval --data of padded batches");
    assert!(v["loss"].as_f64().is_some_and(f64::is_finite), "{v}");
    let out = dir.join("probs.safetensors");
    succeed(
        tensorfit_command().args([
            "predict",
            "--checkpoint",
            arg(&ck_file),
            "--data",
            arg(&ragged),
            "--device",
            "cpu",
            "--output",
            arg(&out),
        ]),
        "predict --data of padded batches",
    );
}
