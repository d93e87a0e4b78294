//! `predict --data` with a head on every step writes one row of probabilities per step of
//! every sequence: a tagger built in PyTorch (`tools/per_step_predict_reference.py`:
//! LSTM(4, 6, 2 layers) -> Linear(6, 5) -> tanh -> Linear(5, 3) on every step), brought in
//! with `tensorfit import` and predicted on a padded file (lengths 7, 3, 5, 1, 6), gives
//! PyTorch's per-step probabilities within 1e-5, batch-first [N, T, C] with 0 past each
//! sequence's end and the lengths beside them, on the CPU and on wgpu; likewise a
//! bidirectional LSTM tagger, an `nn.TransformerEncoder` tagger and a tagger of learned
//! positions and `nn.Conv1d`s (their state dicts' names as PyTorch writes them). The same
//! rows come
//! from the file as a long CSV and as DL4J's directory; a language model writes every step
//! of every window of a text, and of every line of a `.tsv`; a regression on every step
//! writes every step of a padded file as `predict --input` predicts each sequence alone.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{scratch, succeed, tensorfit_command, wgpu_present};
use safetensors::{Dtype, SafeTensors};

/// A file of tests/data: the tagger's description (`per_step_tagger.toml`), its PyTorch
/// state dict, the padded data and PyTorch's probabilities.
fn reference_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// A tagger made in PyTorch: its description, state dict, padded data file and PyTorch's
/// probabilities, files of tests/data.
struct Tagger {
    model: &'static str,
    state_dict: &'static str,
    data: &'static str,
    probs: &'static str,
}

/// `tools/per_step_predict_reference.py`'s: LSTM(4, 6, 2 layers) -> Linear(6, 5) -> tanh
/// -> Linear(5, 3).
const TAGGER: Tagger = Tagger {
    model: "per_step_tagger.toml",
    state_dict: "per_step_state_dict.safetensors",
    data: "per_step_data.safetensors",
    probs: "per_step_reference.safetensors",
};

/// `tools/bidirectional_reference.py`'s: LSTM(5, 6, 2 layers, bidirectional) ->
/// Linear(12, 4), lengths 6, 3, 1, 4, 6.
const BIDIRECTIONAL: Tagger = Tagger {
    model: "bidirectional_tagger.toml",
    state_dict: "bidirectional_tagger_state_dict.safetensors",
    data: "bidirectional_tagger_data.safetensors",
    probs: "bidirectional_tagger_probs.safetensors",
};

/// `tools/body_reference.py`'s: sinusoidal positions -> `nn.TransformerEncoder` of two
/// `TransformerEncoderLayer(8, 2 heads, ff 16)` with the padded keys masked ->
/// Linear(8, 4), lengths 6, 3, 1, 4, 6.
const ENCODER: Tagger = Tagger {
    model: "encoder_tagger.toml",
    state_dict: "encoder_tagger_state_dict.safetensors",
    data: "encoder_tagger_data.safetensors",
    probs: "encoder_tagger_probs.safetensors",
};

/// `tools/body_reference.py`'s: learned positions (`nn.Embedding(10, 5)`'s table) ->
/// `Conv1d(5, 8, 3)` causal, relu -> `Conv1d(8, 8, 2, dilation=2)` "same", relu, plus its
/// input -> Linear(8, 4), lengths 6, 3, 1, 4, 6.
const CONV: Tagger = Tagger {
    model: "conv_tagger.toml",
    state_dict: "conv_tagger_state_dict.safetensors",
    data: "conv_tagger_data.safetensors",
    probs: "conv_tagger_probs.safetensors",
};

/// The PyTorch state dict of [`TAGGER`] imported as a checkpoint in the scratch
/// directory `name`.
fn imported(name: &str) -> (PathBuf, PathBuf) {
    imported_tagger(&TAGGER, name)
}

/// The PyTorch state dict of `tagger` imported as a checkpoint in the scratch directory
/// `name`.
fn imported_tagger(tagger: &Tagger, name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let ck = dir.join("tagger.safetensors");
    succeed(
        tensorfit_command()
            .arg("import")
            .arg("--model")
            .arg(reference_file(tagger.model))
            .arg("--weights")
            .arg(reference_file(tagger.state_dict))
            .arg("--output")
            .arg(&ck),
        "import",
    );
    (dir, ck)
}

/// The f32 values and shape of tensor `name` of the safetensors bytes `bytes`.
fn f32_tensor(bytes: &[u8], name: &str) -> (Vec<f32>, Vec<usize>) {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let t = st.tensor(name).unwrap();
    assert_eq!(t.dtype(), Dtype::F32, "`{name}`");
    let values = t
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (values, t.shape().to_vec())
}

/// The I64 tensor `name` of the safetensors bytes `bytes`.
fn i64_tensor(bytes: &[u8], name: &str) -> Vec<i64> {
    let st = SafeTensors::deserialize(bytes).unwrap();
    let t = st.tensor(name).unwrap();
    assert_eq!(t.dtype(), Dtype::I64, "`{name}`");
    t.data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// `predict --data data` of `ck` on `device`, written in `dir`: the output file's bytes.
fn predict(ck: &Path, data: &Path, device: &str, dir: &Path) -> Vec<u8> {
    let out = dir.join(format!("probs_{device}.safetensors"));
    succeed(
        tensorfit_command()
            .args([
                "predict",
                "--device",
                device,
                "--batch",
                "2",
                "--checkpoint",
            ])
            .arg(ck)
            .arg("--data")
            .arg(data)
            .arg("--output")
            .arg(&out),
        &format!("predict --data on {device}"),
    );
    std::fs::read(out).unwrap()
}

/// Imports `tagger`, predicts its padded file on `device` and compares with PyTorch.
fn matches_pytorch_on(tagger: &Tagger, device: &str) {
    let (dir, ck) = imported_tagger(tagger, &format!("per-step-{}-{device}", tagger.model));
    let got = predict(&ck, &reference_file(tagger.data), device, &dir);
    let want = std::fs::read(reference_file(tagger.probs)).unwrap();
    let (probs, shape) = f32_tensor(&got, "probabilities");
    let (expected, expected_shape) = f32_tensor(&want, "probabilities");
    assert_eq!(shape, expected_shape, "[N, T, C], batch-first");
    let lengths = i64_tensor(&got, "lengths");
    assert_eq!(lengths, i64_tensor(&want, "lengths"));
    let (steps, classes) = (shape[1], shape[2]);
    for (n, &len) in lengths.iter().enumerate() {
        for t in 0..steps {
            let at = (n * steps + t) * classes;
            let (row, want_row) = (&probs[at..at + classes], &expected[at..at + classes]);
            if t >= len as usize {
                assert!(
                    row.iter().all(|&p| p == 0.0),
                    "[{n}, {t}] past the end: {row:?}"
                );
                continue;
            }
            for (k, (&p, &q)) in row.iter().zip(want_row).enumerate() {
                assert!(
                    (p - q).abs() <= 1e-5,
                    "[{n}, {t}, {k}]: {p} against PyTorch's {q}"
                );
            }
        }
    }
}

#[test]
fn a_pytorch_tagger_predicts_pytorchs_per_step_probabilities_from_a_padded_file_on_the_cpu() {
    matches_pytorch_on(&TAGGER, "cpu");
}

#[test]
fn a_pytorch_tagger_predicts_pytorchs_per_step_probabilities_from_a_padded_file_on_wgpu() {
    if !wgpu_present() {
        return;
    }
    matches_pytorch_on(&TAGGER, "wgpu");
}

#[test]
fn a_pytorch_transformer_encoder_predicts_pytorchs_probabilities_from_a_padded_file() {
    matches_pytorch_on(&ENCODER, "cpu");
    if wgpu_present() {
        matches_pytorch_on(&ENCODER, "wgpu");
    }
}

#[test]
fn a_pytorch_tagger_of_learned_positions_and_convolutions_predicts_pytorchs_probabilities() {
    matches_pytorch_on(&CONV, "cpu");
    if wgpu_present() {
        matches_pytorch_on(&CONV, "wgpu");
    }
}

#[test]
fn a_pytorch_bidirectional_tagger_predicts_pytorchs_probabilities_from_a_padded_file() {
    matches_pytorch_on(&BIDIRECTIONAL, "cpu");
    if wgpu_present() {
        matches_pytorch_on(&BIDIRECTIONAL, "wgpu");
    }
}

/// The bits of tensor `name` of the safetensors bytes `bytes`.
fn bits(bytes: &[u8], name: &str) -> Vec<u32> {
    f32_tensor(bytes, name)
        .0
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn a_long_csv_and_a_dl4j_directory_predict_the_rows_the_tensor_file_does() {
    let (dir, ck) = imported("per-step-formats");
    let data = reference_file("per_step_data.safetensors");
    let want = predict(&ck, &data, "cpu", &dir);
    let bytes = std::fs::read(&data).unwrap();
    let (x, shape) = f32_tensor(&bytes, "input");
    let lengths = i64_tensor(&bytes, "lengths");
    let (steps, features) = (shape[1], shape[2]);
    let step = |n: usize, t: usize| {
        let at = (n * steps + t) * features;
        let v: Vec<String> = x[at..at + features]
            .iter()
            .map(|v| format!("{v:?}"))
            .collect();
        v.join(",")
    };
    // The long CSV keeps a label column (any class); DL4J's features/ alone.
    let (mut csv, features_dir) = (String::new(), dir.join("dl4j/features"));
    std::fs::create_dir_all(&features_dir).unwrap();
    for (n, &len) in lengths.iter().enumerate() {
        let mut file = String::new();
        for t in 0..len as usize {
            csv.push_str(&format!("s{n},{t},{},0\n", step(n, t)));
            file.push_str(&format!("{}\n", step(n, t)));
        }
        std::fs::write(features_dir.join(format!("{n}.csv")), file).unwrap();
    }
    let long = dir.join("rows.csv");
    std::fs::write(&long, csv).unwrap();
    for (what, path) in [("long CSV", long), ("DL4J", dir.join("dl4j"))] {
        let sub = dir.join(what.replace(' ', "_"));
        std::fs::create_dir_all(&sub).unwrap();
        let got = predict(&ck, &path, "cpu", &sub);
        assert_eq!(
            bits(&got, "probabilities"),
            bits(&want, "probabilities"),
            "{what}"
        );
        assert_eq!(i64_tensor(&got, "lengths"), lengths, "{what}");
    }
}

/// A language model of `vocab` token ids with a head on every step.
fn language_model(dir: &Path, vocab: usize) -> PathBuf {
    let model = dir.join("lm.toml");
    let toml = format!(
        "[input]\nkind = \"tokens\"\nvocab = {vocab}\n\n[recurrent]\ncell = \"lstm\"\nhidden = 8\nlayers = 1\n\n[head]\non = \"every_step\"\n\n[loss]\nkind = \"cross_entropy\"\nclasses = {vocab}\n"
    );
    std::fs::write(&model, toml).unwrap();
    model
}

/// Requires `probabilities` [N, T, C] with every real step a distribution, every step
/// past an end 0, and the `lengths` `want` (None: any); returns the lengths.
fn every_step_a_distribution(bytes: &[u8], want: Option<&[i64]>) -> Vec<i64> {
    let (probs, shape) = f32_tensor(bytes, "probabilities");
    let lengths = i64_tensor(bytes, "lengths");
    assert_eq!(shape.len(), 3, "{shape:?}");
    assert_eq!(lengths.len(), shape[0]);
    if let Some(want) = want {
        assert_eq!(lengths, want);
    }
    let (steps, classes) = (shape[1], shape[2]);
    assert_eq!(lengths.iter().copied().max(), Some(steps as i64));
    for (n, &len) in lengths.iter().enumerate() {
        for t in 0..steps {
            let at = (n * steps + t) * classes;
            let sum: f32 = probs[at..at + classes].iter().sum();
            let want = if (t as i64) < len { 1.0 } else { 0.0 };
            assert!((sum - want).abs() < 1e-4, "[{n}, {t}] sums to {sum}");
        }
    }
    lengths
}

#[test]
fn a_language_model_predicts_every_step_of_every_window_of_a_text_and_every_line_of_a_tsv() {
    let dir = scratch("per-step-text");
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/corpus.txt");
    let ck = dir.join("ck");
    succeed(
        tensorfit_command()
            .args(["train", "--model"])
            .arg(language_model(&dir, 30))
            .arg("--data")
            .arg(&corpus)
            .args(["--epochs", "1", "--max-seq-len", "10", "--batch", "4"])
            .args(["--val-fraction", "0", "--device", "cpu", "--checkpoint-dir"])
            .arg(&ck),
        "train a language model",
    );
    let out = dir.join("text.safetensors");
    succeed(
        tensorfit_command()
            .args([
                "predict",
                "--device",
                "cpu",
                "--max-seq-len",
                "10",
                "--checkpoint",
            ])
            .arg(&ck)
            .arg("--data")
            .arg(&corpus)
            .arg("--output")
            .arg(&out),
        "predict a text",
    );
    let lengths = every_step_a_distribution(&std::fs::read(&out).unwrap(), None);
    assert!(
        lengths.len() > 1 && lengths.iter().all(|&l| l == 10),
        "{lengths:?}"
    );

    // A .tsv's lines, each its own length.
    let tsv = dir.join("lines.tsv");
    std::fs::write(&tsv, "the fox\nlazy\nthe quick brown dog\n").unwrap();
    let out = dir.join("tsv.safetensors");
    succeed(
        tensorfit_command()
            .args(["predict", "--device", "cpu", "--checkpoint"])
            .arg(&ck)
            .arg("--data")
            .arg(&tsv)
            .arg("--output")
            .arg(&out),
        "predict a tsv",
    );
    every_step_a_distribution(&std::fs::read(&out).unwrap(), Some(&[7, 4, 19]));
}

/// `name` [dims] of `values` as F32, and `lengths` as I64 when given, written to `path`.
fn write_tensors(path: &Path, name: &str, dims: &[usize], values: &[f32], lengths: Option<&[i64]>) {
    use safetensors::tensor::TensorView;
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut views = vec![(
        name.to_string(),
        TensorView::new(Dtype::F32, dims.to_vec(), &data).unwrap(),
    )];
    let len_bytes: Vec<u8> = lengths
        .unwrap_or(&[])
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    if let Some(l) = lengths {
        views.push((
            "lengths".into(),
            TensorView::new(Dtype::I64, vec![l.len()], &len_bytes).unwrap(),
        ));
    }
    safetensors::serialize_to_file(views, None, path).unwrap();
}

#[test]
fn a_regression_on_every_step_predicts_each_step_of_a_padded_file_as_predict_input_does() {
    let dir = scratch("per-step-regression");
    let model = dir.join("regress.toml");
    std::fs::write(
        &model,
        "[input]\nkind = \"dense\"\nfeatures = 3\n\n[recurrent]\ncell = \"lstm\"\nhidden = 8\nlayers = 1\n\n[head]\non = \"every_step\"\n\n[loss]\nkind = \"mse\"\noutputs = 2\n",
    )
    .unwrap();
    let value = |i: usize| ((i * 37 % 23) as f32 - 11.0) / 11.0;
    // Training: 6 sequences of 4 steps, 2 targets per step ([N, T, K]).
    let train = dir.join("train.safetensors");
    {
        use safetensors::tensor::TensorView;
        let x: Vec<u8> = (0..6 * 4 * 3)
            .flat_map(|i| value(i).to_le_bytes())
            .collect();
        let y: Vec<u8> = (0..6 * 4 * 2)
            .flat_map(|i| value(i + 5).to_le_bytes())
            .collect();
        let views = [
            (
                "input",
                TensorView::new(Dtype::F32, vec![6, 4, 3], &x).unwrap(),
            ),
            (
                "labels",
                TensorView::new(Dtype::F32, vec![6, 4, 2], &y).unwrap(),
            ),
        ];
        safetensors::serialize_to_file(views, None, &train).unwrap();
    }
    let ck = dir.join("ck");
    common::data_cli::train_on_data(["--model", common::arg(&model)], &train, "1", &ck);
    // A padded file without labels: lengths 5, 2, 4.
    let (lengths, steps) = ([5i64, 2, 4], 5);
    let x: Vec<f32> = (0..3 * steps * 3).map(|i| value(i + 7)).collect();
    let padded = dir.join("padded.safetensors");
    write_tensors(&padded, "input", &[3, steps, 3], &x, Some(&lengths));
    let got = predict(&ck, &padded, "cpu", &dir);
    // eval --data reads it with labels [N, T, K] (each length in batches of its own: mse
    // on every step cannot mask padded steps).
    let labelled = dir.join("padded_labelled.safetensors");
    {
        use safetensors::tensor::TensorView;
        let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        let lb: Vec<u8> = lengths.iter().flat_map(|v| v.to_le_bytes()).collect();
        let yb: Vec<u8> = (0..3 * steps * 2)
            .flat_map(|i| value(i).to_le_bytes())
            .collect();
        let views = [
            (
                "input",
                TensorView::new(Dtype::F32, vec![3, steps, 3], &xb).unwrap(),
            ),
            (
                "lengths",
                TensorView::new(Dtype::I64, vec![3], &lb).unwrap(),
            ),
            (
                "labels",
                TensorView::new(Dtype::F32, vec![3, steps, 2], &yb).unwrap(),
            ),
        ];
        safetensors::serialize_to_file(views, None, &labelled).unwrap();
    }
    let scores = common::data_cli::eval_on_data(&ck, &labelled, "eval a padded file");
    assert!(scores["loss"].as_f64().unwrap() > 0.0, "{scores}");
    let (p, shape) = f32_tensor(&got, "predictions");
    assert_eq!(shape, [3, steps, 2]);
    assert_eq!(i64_tensor(&got, "lengths"), lengths);
    for (n, &len) in lengths.iter().enumerate() {
        let len = len as usize;
        let one = dir.join(format!("one_{n}.safetensors"));
        let at = n * steps * 3;
        write_tensors(&one, "input", &[1, len, 3], &x[at..at + len * 3], None);
        let out = dir.join(format!("one_{n}_out.safetensors"));
        succeed(
            tensorfit_command()
                .args(["predict", "--device", "cpu", "--checkpoint"])
                .arg(&ck)
                .arg("--input")
                .arg(&one)
                .arg("--output")
                .arg(&out),
            "predict --input",
        );
        let (alone, shape) = f32_tensor(&std::fs::read(&out).unwrap(), "predictions");
        assert_eq!(shape, [1, len, 2], "batch-first [batch, time, outputs]");
        let row = &p[n * steps * 2..(n * steps + len) * 2];
        for (k, (a, b)) in row.iter().zip(&alone).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6,
                "sequence {n} value {k}: {a} from --data, {b} alone"
            );
        }
        assert!(p[(n * steps + len) * 2..(n + 1) * steps * 2]
            .iter()
            .all(|&v| v == 0.0));
    }
}
