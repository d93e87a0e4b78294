//! Ranks of one `mpirun … tensorfit train` started differently (docs/distributed.md,
//! Settings every rank shares): before any other collective the ranks compare one digest
//! of their model description (activations included), tensors, run settings, data and
//! program shapes, and stop together, exit status 1, with a message naming each setting
//! that differs and the ranks of each value — never a crash inside MPI, a wait for the
//! collective timeout, or a model trained on gradients of two different networks. Needs
//! the `mpi` feature and `mpirun`; without either each test prints why it skips.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use tensorfit::core::Activation;
use tensorfit::nn::{HeadLayer, HeadLayerKind, ModelDescription};

use common::ranks::{cpu_train, line, not_built, BOUND};
use common::{arg, example_data, scratch};

/// What every message of ranks that disagree starts with.
const DISAGREE: &str = "the ranks were started with different settings: ";

/// Writes `toml` as the model file `name` of the test `test`.
fn model_file(test: &str, name: &str, toml: &str) -> PathBuf {
    let path = scratch(test).join(name);
    std::fs::write(&path, toml).unwrap();
    path
}

/// `train` with `zero` on rank 0 and `one` on rank 1: both stop together, exit status 1,
/// with the message naming what differs (each of `wants`), never waiting for the
/// collective timeout and never crashing.
fn refused_naming(test: &str, zero: &[&str], one: &[&str], wants: &[&str]) {
    let line = line("train", &[(1, zero), (1, one)], &[]);
    let Some(run) = tensorfit_testing::mpirun::launch(test, not_built(), &line, BOUND) else {
        return;
    };
    assert_eq!(run.code, Some(1), "{test}:\n{}", run.output);
    assert!(run.output.contains(DISAGREE), "{test}:\n{}", run.output);
    for want in wants {
        assert!(
            run.output.contains(want),
            "{test}: no `{want}` in\n{}",
            run.output
        );
    }
    for never in [
        "did not complete",
        "MPI_ERR",
        "panicked",
        "signal 6",
        "signal 11",
    ] {
        assert!(
            !run.output.contains(never),
            "{test}: `{never}` in\n{}",
            run.output
        );
    }
    println!("{test}: refused in {:.1?}", run.took);
}

/// The built-in task's flags of a short run on the CPU, with a 300 s collective timeout
/// (a rank left waiting would fail the test by its message, not by a timer).
fn builtin<'a>(model: &'a str, batch: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut more = vec!["--steps", "3", "--collective-timeout", "300"];
    more.extend_from_slice(extra);
    cpu_train(model, (batch, "5", "4"), &more)
}

fn lstm(hidden: usize) -> String {
    ModelDescription::lstm_classifier(152, hidden, 1, 6).to_toml()
}

#[test]
fn lstm_models_of_different_sizes_stop_every_rank_naming_the_models_line() {
    let test = "agree lstm 16 vs 128";
    let (a, b) = (
        model_file("agree-size", "small.toml", &lstm(16)),
        model_file("agree-size", "large.toml", &lstm(128)),
    );
    refused_naming(
        test,
        &builtin(arg(&a), "4", &[]),
        &builtin(arg(&b), "4", &[]),
        &[
            "the model description: line ",
            "`hidden = 16` on rank 0, `hidden = 128` on rank 1",
            "the model's tensors",
        ],
    );
}

#[test]
fn an_lstm_on_one_rank_and_a_gru_on_the_other_stop_every_rank_naming_the_cell() {
    let test = "agree lstm vs gru";
    let gru = lstm(16).replace("cell = \"lstm\"", "cell = \"gru\"");
    let (a, b) = (
        model_file("agree-cell", "lstm.toml", &lstm(16)),
        model_file("agree-cell", "gru.toml", &gru),
    );
    refused_naming(
        test,
        &builtin(arg(&a), "4", &[]),
        &builtin(arg(&b), "4", &[]),
        &["`cell = \"lstm\"` on rank 0, `cell = \"gru\"` on rank 1"],
    );
}

#[test]
fn dense_heads_of_the_same_shapes_with_other_activations_stop_every_rank() {
    let test = "agree activations";
    let mut cfg = ModelDescription::lstm_classifier(152, 12, 1, 6);
    cfg.head.layers = vec![HeadLayer {
        name: "dense".into(),
        kind: HeadLayerKind::Dense {
            units: 8,
            activation: Activation::Tanh,
        },
        residual: false,
    }];
    let tanh = cfg.to_toml();
    assert!(tanh.contains("activation = \"tanh\""), "{tanh}");
    let relu = tanh.replace("activation = \"tanh\"", "activation = \"relu\"");
    let (a, b) = (
        model_file("agree-activation", "tanh.toml", &tanh),
        model_file("agree-activation", "relu.toml", &relu),
    );
    refused_naming(
        test,
        &builtin(arg(&a), "4", &[]),
        &builtin(arg(&b), "4", &[]),
        &[
            "the model description: line ",
            "activation = \"tanh\", name = \"dense\" },` on rank 0",
            "activation = \"relu\", name = \"dense\" },` on rank 1",
        ],
    );
}

#[test]
fn a_different_batch_seed_or_learning_rate_stops_every_rank_at_the_start() {
    let model = model_file("agree-flags", "m.toml", &lstm(12));
    let m = arg(&model);
    refused_naming(
        "agree batch",
        &builtin(m, "8", &[]),
        &builtin(m, "4", &[]),
        &["--batch: `8` on rank 0, `4` on rank 1"],
    );
    refused_naming(
        "agree seed and lr",
        &builtin(m, "4", &["--seed", "2", "--lr", "0.01"]),
        &builtin(m, "4", &[]),
        &[
            "--seed: `2` on rank 0, `1` on rank 1",
            "--lr: `0.01` on rank 0, `0.001` on rank 1",
        ],
    );
}

/// `train --data data` of `model` on the CPU in batches of 2, then `extra`.
fn on_data<'a>(model: &'a str, data: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--model",
        model,
        "--data",
        data,
        "--batch",
        "2",
        "--device",
        "cpu",
        "--collective-timeout",
        "300",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn a_different_val_fraction_or_epochs_stops_every_rank_at_the_start() {
    let model = example_data("classify_model.toml");
    let data = example_data("classify.safetensors");
    let (m, d) = (arg(&model), arg(&data));
    refused_naming(
        "agree val fraction",
        &on_data(m, d, &["--val-fraction", "0.25"]),
        &on_data(m, d, &["--val-fraction", "0.5"]),
        &["--val-fraction: `0.25` on rank 0, `0.5` on rank 1"],
    );
    // The rank with fewer epochs would end while the other waited at its next step.
    refused_naming(
        "agree epochs",
        &on_data(m, d, &["--epochs", "1"]),
        &on_data(m, d, &["--epochs", "2"]),
        &["--epochs: `1` on rank 0, `2` on rank 1"],
    );
    // So would the rank with the smaller step budget.
    refused_naming(
        "agree step budget",
        &on_data(m, d, &["--epochs", "2", "--steps", "3"]),
        &on_data(m, d, &["--epochs", "2", "--steps", "4"]),
        &["--steps: `3` on rank 0, `4` on rank 1"],
    );
}

#[test]
fn different_data_files_stop_every_rank_naming_the_sequences_of_each() {
    let model = example_data("reviews_model.toml");
    let data = example_data("reviews.tsv");
    // The same file less its last line: one sequence fewer.
    let text = std::fs::read_to_string(&data).unwrap();
    let fewer = scratch("agree-data").join("fewer.tsv");
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&fewer, lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    let (m, d, f) = (arg(&model), arg(&data), arg(&fewer));
    let zero = on_data(m, d, &["--val-fraction", "0"]);
    let one = on_data(m, f, &["--val-fraction", "0"]);
    let six = format!("--data: `{} sequences, ", lines.len());
    let five = format!("` on rank 0, `{} sequences, ", lines.len() - 1);
    refused_naming("agree data", &zero, &one, &[&six, &five]);
}
