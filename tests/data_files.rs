//! `train`, `eval`, `predict` and `plan` on data files (`--data`): a classifier trains from
//! DL4J's CSV layout and from safetensors; eval and predict read the same files; bad files
//! exit 1 naming the file and line; early stopping keeps the best checkpoint; every
//! validation is a line of metrics.jsonl; the read-ahead is in the plan.

// Helpers outside #[test] functions unwrap too: a failure is the test's failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::data_cli::{eval_on_data, train_on_data};
use common::{arg, example_data, json, scratch, succeed, tensorfit_command};
use serde_json::Value;
use tensorfit::nn::{Cell, Checkpoint, ModelDescription, ParamStore};

/// The scratch directory `name` and an untrained checkpoint of
/// `examples/data/classify_model.toml` (3 features, 3 classes) in it.
fn untrained(name: &str) -> (PathBuf, PathBuf) {
    untrained_cell(name, Cell::Lstm)
}

/// [`untrained`] with its recurrent layer a `cell`.
fn untrained_cell(name: &str, cell: Cell) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let mut cfg = ModelDescription::load(&example_data("classify_model.toml")).unwrap();
    cfg.recurrent_mut().unwrap().cell = cell;
    let ck = Checkpoint {
        params: ParamStore::init(&cfg, 3).unwrap(),
        config: cfg,
        optimizer: ParamStore::new(),
        step: 0,
        extra: Default::default(),
    };
    let path = dir.join("untrained.safetensors");
    ck.save(&path).unwrap();
    (dir, path)
}

fn run(args: &[&str]) -> Output {
    tensorfit_command()
        .args(args)
        .output()
        .expect("the binary runs")
}

/// The JSON lines a `--json` run printed.
fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Trains the example model on `data` (every sequence, no validation) into `dir` and
/// returns the accuracy `eval --data` then measures on the same file.
fn train_then_eval(name: &str, data: &Path) -> f64 {
    train_cell_then_eval(name, data, Cell::Lstm)
}

/// [`train_then_eval`] with the recurrent layer a `cell`.
fn train_cell_then_eval(name: &str, data: &Path, cell: Cell) -> f64 {
    let (dir, init) = untrained_cell(name, cell);
    let ck = dir.join("ck");
    train_on_data(["--init", arg(&init)], data, "60", &ck);
    let v = eval_on_data(&ck, data, "eval --data");
    assert_eq!(v["sequences"], 12, "{v}");
    v["accuracy"].as_f64().unwrap()
}

#[test]
fn a_classifier_trains_from_the_dl4j_csv_layout_to_full_accuracy_on_its_sequences() {
    let accuracy = train_then_eval("dl4j", &example_data("dl4j"));
    assert!(accuracy >= 0.99, "accuracy {accuracy}");
}

#[test]
fn a_classifier_trains_from_safetensors_to_full_accuracy_on_its_sequences() {
    let accuracy = train_then_eval("safetensors", &example_data("classify.safetensors"));
    assert!(accuracy >= 0.99, "accuracy {accuracy}");
}

#[test]
fn a_gru_classifier_trains_from_padded_batches_of_a_file_too() {
    // The file's sequences have lengths 4 to 9: batches are padded and carry lengths.
    let data = example_data("classify.safetensors");
    let accuracy = train_cell_then_eval("gru-padded", &data, Cell::Gru);
    assert!(accuracy >= 0.99, "accuracy {accuracy}");
}

/// The ids (metadata) and probabilities [N, 3] of a file `predict --data` wrote.
fn read_predictions(path: &Path) -> (Vec<String>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let ids = serde_json::from_str(&meta.metadata().as_ref().unwrap()["ids"]).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let p = st.tensor("probabilities").unwrap();
    assert_eq!(p.shape()[1], 3);
    let values = p
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (ids, values)
}

#[test]
fn predict_writes_every_sequences_probabilities_in_file_order_with_its_id() {
    let (dir, init) = untrained("predict");
    // `predict --data data` into the scratch file `name`, read back.
    let predict = |data: &Path, name: &str, extra: &[&str]| {
        let out = dir.join(name);
        succeed(
            tensorfit_command()
                .args(["predict", "--checkpoint", arg(&init), "--data", arg(data)])
                .args(["--output", arg(&out), "--device", "cpu"])
                .args(extra),
            &format!("predict --data {}", data.display()),
        );
        read_predictions(&out)
    };
    let (ids, values) = predict(
        &example_data("dl4j"),
        "probs.safetensors",
        &["--batch", "5"],
    );
    // DL4J's files in the order of their numbers, each row its file's number.
    let want: Vec<String> = (0..12).map(|i| i.to_string()).collect();
    assert_eq!(ids, want);
    assert_eq!(values.len(), 12 * 3);
    for row in values.chunks(3) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{row:?}");
    }
    // The same sequences from safetensors give the same probabilities, row for row.
    let (_, values2) = predict(
        &example_data("classify.safetensors"),
        "probs2.safetensors",
        &[],
    );
    common::assert_close("probabilities", &values2, &values, 1e-4, 1e-3);
}

#[test]
fn a_bad_file_of_each_format_exits_1_naming_the_file_and_line() {
    let (dir, init) = untrained("bad");
    // DL4J's layout with a word among the numbers.
    let dl4j = dir.join("dl4j");
    for sub in ["features", "labels"] {
        std::fs::create_dir_all(dl4j.join(sub)).unwrap();
        for i in 0..2 {
            let from = example_data("dl4j").join(sub).join(format!("{i}.csv"));
            std::fs::copy(from, dl4j.join(sub).join(format!("{i}.csv"))).unwrap();
        }
    }
    std::fs::write(dl4j.join("features/1.csv"), "0.5,0.25,1\n0.5,abc,1\n").unwrap();
    // A long CSV with a short row.
    let csv = dir.join("seq.csv");
    std::fs::write(
        &csv,
        "sequence,step,f1,f2,f3,label\ns0,0,1,2,3,0\ns0,1,1,2,0\n",
    )
    .unwrap();
    // A tensor file whose labels are floats, the first not a whole number.
    let st = dir.join("float_labels.safetensors");
    let x = vec![0u8; 2 * 4 * 3 * 4];
    let y: Vec<u8> = [0.5f32, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let tensors = [
        (
            "input",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2, 4, 3], &x)
                .unwrap(),
        ),
        (
            "labels",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], &y).unwrap(),
        ),
    ];
    std::fs::write(&st, safetensors::serialize(tensors, None).unwrap()).unwrap();
    let cases = [
        (
            dl4j.clone(),
            "features/1.csv:2:2: `abc` is not a number".to_string(),
        ),
        (csv.clone(), "seq.csv:3: 5 fields".to_string()),
        (
            st.clone(),
            "float_labels.safetensors (byte 232): label 0.5 at `labels`[0] is not a class id"
                .to_string(),
        ),
    ];
    for (data, want) in cases {
        for args in [
            vec![
                "eval",
                "--checkpoint",
                arg(&init),
                "--data",
                arg(&data),
                "--device",
                "cpu",
            ],
            vec![
                "train",
                "--init",
                arg(&init),
                "--data",
                arg(&data),
                "--device",
                "cpu",
            ],
        ] {
            let out = run(&args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&want),
                "{args:?}: want `{want}` in: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

#[test]
fn early_stopping_keeps_the_best_checkpoint_and_metrics_has_a_line_per_validation() {
    let (dir, init) = untrained("early");
    let ck = dir.join("ck");
    let val = example_data("classify.npz");
    let out = succeed(
        tensorfit_command().args([
            "train",
            "--data",
            arg(&example_data("dl4j")),
            "--val",
            arg(&val),
            "--init",
            arg(&init),
            "--epochs",
            "40",
            "--batch",
            "4",
            "--lr",
            "0.3",
            "--eval-every",
            "3",
            "--stop-patience",
            "2",
            "--device",
            "cpu",
            "--checkpoint-dir",
            arg(&ck),
            "--json",
        ]),
        "train --data --stop-patience",
    );
    let mut lines = json_lines(&out);
    let summary = lines.pop().unwrap();
    assert_eq!(summary["stopped_early"], true, "{summary}");
    let metrics: Vec<Value> = std::fs::read_to_string(ck.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        metrics, lines,
        "metrics.jsonl holds the lines --json printed"
    );
    assert!(metrics.len() >= 3, "{metrics:?}");
    let losses: Vec<f64> = metrics
        .iter()
        .map(|m| m["val_loss"].as_f64().unwrap())
        .collect();
    let (best_at, best) = losses
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .unwrap();
    // Stopped after two validations in a row without a lower loss.
    assert_eq!(best_at + 3, losses.len(), "{losses:?}");
    assert_eq!(summary["best_step"], metrics[best_at]["step"]);
    // The checkpoint is the best model: its step, and its validation loss.
    let saved = Checkpoint::load(&ck.join("checkpoint.safetensors")).unwrap();
    assert_eq!(Some(saved.step), metrics[best_at]["step"].as_u64());
    let eval = eval_on_data(&ck, &val, "eval of the kept checkpoint");
    let got = eval["loss"].as_f64().unwrap();
    assert!(
        (got - best).abs() < 1e-4,
        "kept checkpoint's loss {got}, best {best}"
    );
}

/// A safetensors file of `n` sequences of `t` steps of the seed network's 152 features
/// (6 classes) in `dir`.
fn seed_like(dir: &std::path::Path, n: usize, t: usize) -> std::path::PathBuf {
    let f = 152;
    let x: Vec<u8> = (0..n * t * f)
        .flat_map(|i| ((i % 7) as f32).to_le_bytes())
        .collect();
    let y: Vec<u8> = (0..n as i64).flat_map(|l| (l % 6).to_le_bytes()).collect();
    let tensors = [
        (
            "input",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![n, t, f], &x)
                .unwrap(),
        ),
        (
            "labels",
            safetensors::tensor::TensorView::new(safetensors::Dtype::I64, vec![n], &y).unwrap(),
        ),
    ];
    let path = dir.join("seed_like.safetensors");
    std::fs::write(&path, safetensors::serialize(tensors, None).unwrap()).unwrap();
    path
}

#[test]
fn plan_with_data_plans_the_run_train_with_data_makes() {
    // Two batches of 32 (the last batch no smaller: a run reports its current plan) of
    // 70 steps: neither plan's seed-case truncation (50) nor its batch (100).
    let dir = scratch("plan-as-train");
    let path = seed_like(&dir, 64, 70);
    let plan = json(&succeed(
        tensorfit_command().args(["plan", "--data", arg(&path), "--device", "cpu", "--json"]),
        "plan --data",
    ));
    let train = json(&succeed(
        tensorfit_command().args([
            "train",
            "--data",
            arg(&path),
            "--epochs",
            "1",
            "--val-fraction",
            "0",
            "--device",
            "cpu",
            "--json",
        ]),
        "train --data",
    ));
    assert_eq!(
        plan["chosen"]["estimated_peak_bytes"], train["estimated_peak_bytes"],
        "plan: {}\ntrain: {train}",
        plan["chosen"]
    );
    assert_eq!(train["estimated_peak_bytes"], train["measured_peak_bytes"]);
}

#[test]
fn plan_with_data_counts_the_batches_read_ahead_in_the_host_memory() {
    // The seed network's input (152 features), 24 sequences of 50 steps: 6 batches of 4.
    let dir = scratch("plan");
    let (t, f) = (50usize, 152usize);
    let path = seed_like(&dir, 24, t);
    let plan = |read_ahead: &str| {
        json(&succeed(
            tensorfit_command().args([
                "plan",
                "--data",
                arg(&path),
                "--read-ahead",
                read_ahead,
                "--batch",
                "4",
                "--device",
                "cpu",
                "--json",
            ]),
            "plan --data",
        ))
    };
    // docs/data.md: a batch is (B·T·F + labels)·4 + B·16 bytes; besides the one in use
    // the reader holds up to read_ahead + 1, never more than the other 5 batches.
    let per_batch = ((4 * t * f + 4) * 4 + 4 * 16) as u64;
    let read_ahead = |v: &Value| v["host"]["read_ahead"].as_u64().unwrap();
    let (none, two, six) = (plan("0"), plan("2"), plan("6"));
    assert_eq!(read_ahead(&none), per_batch, "{}", none["host"]);
    assert_eq!(read_ahead(&two), 3 * per_batch);
    assert_eq!(read_ahead(&six), 5 * per_batch);
}

/// `examples/models/bidirectional_tagger.toml` on `examples/data/rising.npz`, or the same
/// model reading forwards only: the final validation accuracy per step and the planned
/// and measured peaks.
fn tagger_accuracy(bidirectional: bool) -> (f64, Value) {
    let model = tensorfit_testing::repo_file("examples/models/bidirectional_tagger.toml");
    let text = std::fs::read_to_string(&model).unwrap();
    let text = text.replace(
        "bidirectional = true",
        &format!("bidirectional = {bidirectional}"),
    );
    let dir = scratch(&format!("tagger-{bidirectional}"));
    let file = dir.join("tagger.toml");
    std::fs::write(&file, text).unwrap();
    let data = example_data("rising.npz");
    let out = run(&[
        "train",
        "--model",
        arg(&file),
        "--data",
        arg(&data),
        "--epochs",
        "10",
        "--device",
        "cpu",
        "--save",
        arg(&dir.join("ck.safetensors")),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_lines(&out).pop().unwrap();
    (summary["val_accuracy"].as_f64().unwrap(), summary)
}

#[test]
fn the_bidirectional_tagger_example_learns_what_reading_forwards_cannot() {
    // Each step is tagged by whether the next value is larger (docs/models.md's table:
    // 98.5% against 73.2%).
    let (both_ways, summary) = tagger_accuracy(true);
    assert!(both_ways >= 0.95, "bidirectional: {both_ways} {summary}");
    assert_eq!(
        summary["estimated_peak_bytes"],
        summary["measured_peak_bytes"]
    );
    let (forwards, summary) = tagger_accuracy(false);
    assert!(forwards <= 0.80, "forwards only: {forwards} {summary}");
}
