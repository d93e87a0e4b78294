//! `predict --data` on files without labels: a model trained on a labelled file predicts
//! the same inputs without their labels (safetensors without `labels`, a `.npy` of the
//! inputs alone, a `.tsv` of text lines or of labels the model never saw, a DL4J
//! directory without `labels/`) with the probabilities, bit for bit, it gives the
//! labelled file; `eval --data` still refuses a file without labels, naming them.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::data_cli::{eval_args, train_on_data};
use common::{arg, example_data, refused, scratch, succeed, tensorfit_command};
use safetensors::tensor::TensorView;
use safetensors::SafeTensors;

/// A checkpoint of the example model `model` trained one epoch on `data`, in the scratch
/// directory `name`.
fn trained(name: &str, model: &str, data: &Path) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let ck = dir.join("ck");
    train_on_data(["--model", arg(&example_data(model))], data, "1", &ck);
    (dir, ck)
}

/// [`trained`] on the example `data`, and the bits of the probabilities it predicts for
/// that labelled file: what the unlabelled copies must give.
fn labelled_run(name: &str, model: &str, data: &str) -> (PathBuf, PathBuf, Vec<u32>) {
    let labelled = example_data(data);
    let (dir, ck) = trained(name, model, &labelled);
    let want = predicted_bits(&ck, &labelled, &dir.join("labelled.safetensors"));
    (dir, ck, want)
}

/// The bits of the tensor `probabilities` (a regression's `predictions`) that `predict --checkpoint ck --data data` wrote
/// to `out` (a run that must succeed).
fn predicted_bits(ck: &Path, data: &Path, out: &Path) -> Vec<u32> {
    succeed(
        tensorfit_command().args([
            "predict",
            "--checkpoint",
            arg(ck),
            "--data",
            arg(data),
            "--output",
            arg(out),
            "--device",
            "cpu",
        ]),
        &format!("predict --data {}", data.display()),
    );
    let bytes = std::fs::read(out).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    // A classifier writes `probabilities`, a regression `predictions`.
    let p = st
        .tensor("probabilities")
        .or_else(|_| st.tensor("predictions"))
        .unwrap();
    p.data()
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// `from`'s tensors `keep` written to `to` as safetensors.
fn copy_tensors(from: &Path, keep: &[&str], to: &Path) {
    let bytes = std::fs::read(from).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let views: Vec<(String, TensorView)> = keep
        .iter()
        .map(|&name| (name.to_string(), st.tensor(name).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, to).unwrap();
}

#[test]
fn predict_reads_tensor_files_without_labels_as_it_reads_them_with() {
    let (dir, ck, want) = labelled_run(
        "unlabelled-tensors",
        "classify_model.toml",
        "classify.safetensors",
    );
    let labelled = example_data("classify.safetensors");
    let unlabelled = dir.join("inputs.safetensors");
    copy_tensors(&labelled, &["input", "lengths"], &unlabelled);
    let got = predicted_bits(&ck, &unlabelled, &dir.join("unlabelled.safetensors"));
    assert_eq!(got, want, "safetensors without `labels`");

    // examples/data/input.npy is the same `input` alone, every sequence its 9 steps.
    let full = dir.join("full.safetensors");
    copy_tensors(&labelled, &["input", "labels"], &full);
    let want = predicted_bits(&ck, &full, &dir.join("full_out.safetensors"));
    let npy = example_data("input.npy");
    let got = predicted_bits(&ck, &npy, &dir.join("npy_out.safetensors"));
    assert_eq!(got, want, ".npy of the inputs alone");
}

#[test]
fn predict_reads_regression_and_per_step_files_without_labels() {
    // A regression: placeholders are 0.0 targets.
    let (dir, ck, want) = labelled_run(
        "unlabelled-regress",
        "regress_model.toml",
        "regress.safetensors",
    );
    let unlabelled = dir.join("inputs.safetensors");
    copy_tensors(
        &example_data("regress.safetensors"),
        &["input", "lengths"],
        &unlabelled,
    );
    let got = predicted_bits(&ck, &unlabelled, &dir.join("unlabelled.safetensors"));
    assert_eq!(got, want, "regression without `labels`");

    // A head on every step: placeholders are one per step, as its labels were.
    let dir = scratch("unlabelled-every-step");
    let toml = std::fs::read_to_string(example_data("tokens_model.toml")).unwrap();
    let model = dir.join("every_step.toml");
    std::fs::write(&model, toml.replace("on = \"last\"", "on = \"every_step\"")).unwrap();
    let labelled = example_data("tokens.safetensors");
    let ck = dir.join("ck");
    train_on_data(["--model", arg(&model)], &labelled, "1", &ck);
    let want = predicted_bits(&ck, &labelled, &dir.join("labelled.safetensors"));
    let unlabelled = dir.join("tokens.safetensors");
    copy_tensors(&labelled, &["tokens", "lengths"], &unlabelled);
    let got = predicted_bits(&ck, &unlabelled, &dir.join("unlabelled.safetensors"));
    assert_eq!(got, want, "labels per step");
}

#[test]
fn predict_reads_a_tsv_of_text_alone_or_with_unknown_labels() {
    let (dir, ck, want) = labelled_run("unlabelled-tsv", "reviews_model.toml", "reviews.tsv");
    let labelled = example_data("reviews.tsv");
    let lines = std::fs::read_to_string(&labelled).unwrap();
    // Every line's text alone; then the same lines under labels the model never saw.
    let (mut text, mut unknown) = (String::new(), String::new());
    for (i, line) in lines.lines().enumerate() {
        let (_, t) = line.split_once('\t').unwrap();
        text.push_str(&format!("{t}\n"));
        unknown.push_str(&format!("?{i}\t{t}\n"));
    }
    for (name, contents) in [("text.tsv", text), ("unknown.tsv", unknown)] {
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        let got = predicted_bits(&ck, &path, &dir.join(format!("{name}.out")));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn predict_reads_a_dl4j_directory_without_labels() {
    let (dir, ck, want) = labelled_run("unlabelled-dl4j", "classify_model.toml", "dl4j");
    let labelled = example_data("dl4j");
    let features = dir.join("data/features");
    std::fs::create_dir_all(&features).unwrap();
    for entry in std::fs::read_dir(labelled.join("features")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, features.join(path.file_name().unwrap())).unwrap();
    }
    let got = predicted_bits(&ck, &dir.join("data"), &dir.join("unlabelled.safetensors"));
    assert_eq!(got, want, "features/ without labels/");
}

#[test]
fn eval_refuses_the_unlabelled_files_predict_reads_naming_the_missing_labels() {
    let labelled = example_data("classify.safetensors");
    let (dir, ck) = trained("unlabelled-eval", "classify_model.toml", &labelled);
    let unlabelled = dir.join("inputs.safetensors");
    copy_tensors(&labelled, &["input", "lengths"], &unlabelled);
    predicted_bits(&ck, &unlabelled, &dir.join("predicted.safetensors"));
    let err = refused(&eval_args(&ck, &unlabelled));
    assert!(err.contains("has no `labels`"), "{err}");

    let (dir, ck) = trained(
        "unlabelled-eval-tsv",
        "reviews_model.toml",
        &example_data("reviews.tsv"),
    );
    let tsv = dir.join("text.tsv");
    std::fs::write(&tsv, "loved it\n").unwrap();
    predicted_bits(&ck, &tsv, &dir.join("predicted.safetensors"));
    let err = refused(&eval_args(&ck, &tsv));
    assert!(
        err.contains("no TAB between the label and the text"),
        "{err}"
    );
}

#[test]
fn predict_on_a_long_csv_without_its_label_column_says_it_needs_one() {
    let labelled = example_data("classify.safetensors");
    let (dir, ck) = trained("unlabelled-csv", "classify_model.toml", &labelled);
    let csv = dir.join("rows.csv");
    std::fs::write(&csv, "s0,0,0.5,0.1,0.2\ns0,1,0.3,0.2,0.1\n").unwrap();
    let out = dir.join("out.safetensors");
    let predict_on = |data: &Path| {
        refused(&[
            "predict",
            "--checkpoint",
            arg(&ck),
            "--data",
            arg(data),
            "--output",
            arg(&out),
        ])
    };
    let err = predict_on(&csv);
    assert!(err.contains("a long CSV keeps its label column"), "{err}");
    // A CSV that cannot be read at all is not told about labels.
    let err = predict_on(&dir.join("missing.csv"));
    assert!(err.contains("No such file"), "{err}");
    assert!(!err.contains("label column"), "{err}");
}
