//! More kinds of data files through the CLI: token ids (`tokens`), regression targets
//! (f32 labels), a TSV of `label<TAB>text` (characters as tokens, the vocabulary kept in
//! the checkpoint), and a text corpus, which trains a language model (a head on every step)
//! that `generate` continues.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::data_cli::{eval_on_data, train_on_data};
use common::{arg, example_data, scratch, succeed, tensorfit_command};
use tensorfit::nn::Checkpoint;

/// Trains `model` on every sequence of `data` into a checkpoint directory of `name`.
fn train(name: &str, model: &str, data: &Path, epochs: &str) -> PathBuf {
    let ck = scratch(name).join("ck");
    train_on_data(["--model", arg(&example_data(model))], data, epochs, &ck);
    ck
}

/// `eval --data` of a checkpoint, as its JSON line.
fn eval(ck: &Path, data: &Path) -> serde_json::Value {
    eval_on_data(ck, data, "eval --data")
}

#[test]
fn a_token_classifier_trains_from_a_tokens_file_to_full_accuracy_on_its_sequences() {
    let data = example_data("tokens_classify.safetensors");
    let ck = train("tokens", "tokens_model.toml", &data, "40");
    let v = eval(&ck, &data);
    assert_eq!(v["sequences"], 12, "{v}");
    assert!(v["accuracy"].as_f64().unwrap() >= 0.99, "{v}");
}

#[test]
fn a_regression_trains_from_f32_targets_and_predicts_one_value_per_sequence() {
    let data = example_data("regress.safetensors");
    let ck = train("regress", "regress_model.toml", &data, "30");
    let v = eval(&ck, &data);
    assert_eq!(v["accuracy"], serde_json::Value::Null, "{v}");
    // The targets are means of about 6 normal values (variance ~0.17): trained, the
    // squared error is well below what predicting 0 gives.
    assert!(v["loss"].as_f64().unwrap() < 0.05, "{v}");
    let out = scratch("regress").join("predictions.safetensors");
    succeed(
        tensorfit_command().args([
            "predict",
            "--checkpoint",
            arg(&ck),
            "--data",
            arg(&data),
            "--output",
            arg(&out),
            "--device",
            "cpu",
        ]),
        "predict --data",
    );
    let bytes = std::fs::read(&out).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.tensor("predictions").unwrap().shape(), &[12, 1]);
}

#[test]
fn a_tsv_classifier_keeps_its_vocabulary_in_the_checkpoint_and_reads_unknown_characters() {
    let data = example_data("reviews.tsv");
    let ck = train("tsv", "reviews_model.toml", &data, "30");
    let saved = Checkpoint::load(&ck.join("checkpoint.safetensors")).unwrap();
    let vocab = &saved.extra["data.vocabulary"];
    assert!(vocab.contains("\"labels\":[\"neg\",\"pos\"]"), "{vocab}");
    let v = eval(&ck, &data);
    assert_eq!(v["sequences"], 6, "{v}");
    assert!(v["accuracy"].as_f64().unwrap() >= 0.99, "{v}");
    // Characters the training text did not have read as the unknown id; a label it did
    // not have is refused, naming the line.
    let other = scratch("tsv").join("other.tsv");
    std::fs::write(&other, "pos\tzqx loved it!\nneg\tdull\n").unwrap();
    assert_eq!(eval(&ck, &other)["sequences"], 2);
    std::fs::write(&other, "pos\tfine\nmeh\tso so\n").unwrap();
    let out = tensorfit_command()
        .args(["eval", "--checkpoint", arg(&ck), "--data", arg(&other)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("other.tsv:2:1"), "{err}");
}

/// `train --model MODEL --data corpus.txt`, which must fail with exit code 1: its stderr.
fn refused_corpus(model: &Path) -> String {
    let out = tensorfit_command()
        .args([
            "train",
            "--model",
            arg(model),
            "--data",
            arg(&example_data("corpus.txt")),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{err}");
    err
}

#[test]
fn a_text_corpus_trains_a_language_model_that_generate_continues() {
    // A model whose vocabulary is too small, or whose head reads the last step only, is
    // refused naming what it needs.
    let err = refused_corpus(&example_data("tokens_model.toml"));
    assert!(err.contains("character ids"), "{err}");
    let dir = scratch("corpus");
    let toml = std::fs::read_to_string(example_data("tokens_model.toml")).unwrap();
    let last_step = dir.join("last.toml");
    let last_toml = toml
        .replace("vocab = 20", "vocab = 40")
        .replace("classes = 3", "classes = 40");
    std::fs::write(&last_step, last_toml).unwrap();
    let err = refused_corpus(&last_step);
    assert!(err.contains("on = \"every_step\""), "{err}");

    // The same model with a head on every step and the vocabulary's classes trains on the
    // text's windows, and `generate` continues a prime with the text's characters.
    let lm = dir.join("lm.toml");
    let lm_toml = toml
        .replace("vocab = 20", "vocab = 40")
        .replace("on = \"last\"", "on = \"every_step\"")
        .replace("classes = 3", "classes = 40");
    std::fs::write(&lm, lm_toml).unwrap();
    let ck = dir.join("lm.safetensors");
    let corpus = example_data("corpus.txt");
    let out = succeed(
        tensorfit_command().args([
            "train",
            "--model",
            arg(&lm),
            "--data",
            arg(&corpus),
            "--max-seq-len",
            "20",
            "--batch",
            "4",
            "--epochs",
            "30",
            "--lr",
            "0.02",
            "--device",
            "cpu",
            "--save",
            arg(&ck),
            "--json",
        ]),
        "train on a text corpus",
    );
    // One line per validation, then the run's summary.
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let best = lines
        .iter()
        .filter_map(|v| v["val_loss"].as_f64())
        .fold(f64::INFINITY, f64::min);
    // Uniform guessing over the text's 29 characters costs ln(29) ≈ 3.4 nats.
    assert!(best < 1.0, "best validation loss {best}: {lines:?}");
    let out = succeed(
        tensorfit_command().args([
            "generate",
            "--checkpoint",
            arg(&ck),
            "--prime",
            "the quick",
            "--length",
            "40",
            "--temperature",
            "0.5",
            "--seed",
            "1",
            "--device",
            "cpu",
        ]),
        "generate",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let text = text.trim_end_matches('\n');
    let known: std::collections::HashSet<char> =
        std::fs::read_to_string(&corpus).unwrap().chars().collect();
    assert!(text.chars().count() >= 40, "{text:?}");
    assert!(text.chars().all(|c| known.contains(&c)), "{text:?}");
}
