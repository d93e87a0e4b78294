//! A regression of K outputs from files: `labels` [N, K] (or [N, T, K] per step) in the
//! tensor formats, the last K columns of a long CSV, K values per line of DL4J's label
//! files, all read alike (`train`, `eval`, and `predict`, which reads no labels); labels
//! that do not fit the model's K are refused naming the layout it needs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::data_cli::{eval_on_data, train_on_data};
use common::{arg, refused, scratch, succeed, tensorfit_command};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

const N: usize = 8;
const T: usize = 4;
const F: usize = 3;
const K: usize = 3;
const LENGTHS: [i64; N] = [4, 3, 2, 4, 1, 4, 3, 2];

/// A model of F features and K outputs read from the last step.
fn model(dir: &Path) -> PathBuf {
    let path = dir.join("regress3.toml");
    let toml = format!(
        "[input]\nkind = \"dense\"\nfeatures = {F}\n\n[recurrent]\ncell = \"lstm\"\nhidden = 8\nlayers = 1\n\n[head]\non = \"last\"\n\n[loss]\nkind = \"mse\"\noutputs = {K}\n"
    );
    std::fs::write(&path, toml).unwrap();
    path
}

fn value(i: usize) -> f32 {
    ((i * 37 % 23) as f32 - 11.0) / 11.0
}

/// Input [N, T, F] (0 past each length) and targets [N, K].
fn data() -> (Vec<f32>, Vec<f32>) {
    let mut x: Vec<f32> = (0..N * T * F).map(value).collect();
    for (n, &len) in LENGTHS.iter().enumerate() {
        for v in &mut x[(n * T + len as usize) * F..(n + 1) * T * F] {
            *v = 0.0;
        }
    }
    (x, (0..N * K).map(|i| value(i + 11)).collect())
}

fn le<T: Copy, const B: usize>(v: &[T], f: impl Fn(T) -> [u8; B]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// The tensor file: `input`, `lengths` and, when given, `labels` of shape `label_shape`.
fn tensor_file(path: &Path, labels: Option<(&[f32], Vec<usize>)>) {
    let (x, _) = data();
    let (xb, lb) = (le(&x, f32::to_le_bytes), le(&LENGTHS, i64::to_le_bytes));
    let mut views = vec![
        (
            "input",
            TensorView::new(Dtype::F32, vec![N, T, F], &xb).unwrap(),
        ),
        (
            "lengths",
            TensorView::new(Dtype::I64, vec![N], &lb).unwrap(),
        ),
    ];
    let yb = labels.as_ref().map(|(y, _)| le(y, f32::to_le_bytes));
    if let (Some((_, shape)), Some(yb)) = (labels, yb.as_ref()) {
        views.push(("labels", TensorView::new(Dtype::F32, shape, yb).unwrap()));
    }
    safetensors::serialize_to_file(views, None, path).unwrap();
}

/// Step `t` of sequence `n` as CSV fields.
fn step(x: &[f32], n: usize, t: usize) -> String {
    let at = (n * T + t) * F;
    let v: Vec<String> = x[at..at + F].iter().map(|v| format!("{v:?}")).collect();
    v.join(",")
}

/// Sequence `n`'s K targets as CSV fields.
fn targets(y: &[f32], n: usize) -> String {
    let v: Vec<String> = y[n * K..(n + 1) * K]
        .iter()
        .map(|v| format!("{v:?}"))
        .collect();
    v.join(",")
}

#[test]
fn k_targets_per_sequence_train_evaluate_and_predict_alike_from_tensors_a_long_csv_and_dl4j() {
    let dir = scratch("multi-output");
    let model = model(&dir);
    let (x, y) = data();
    let tensors = dir.join("data.safetensors");
    tensor_file(&tensors, Some((&y, vec![N, K])));
    let ck = dir.join("ck");
    train_on_data(["--model", arg(&model)], &tensors, "2", &ck);
    let want = eval_on_data(&ck, &tensors, "eval tensors")["loss"]
        .as_f64()
        .unwrap();
    assert!(want.is_finite() && want > 0.0, "{want}");

    // The long CSV: the last K columns, filled on each sequence's last row only.
    let mut csv = String::new();
    let features = dir.join("dl4j/features");
    let labels = dir.join("dl4j/labels");
    std::fs::create_dir_all(&features).unwrap();
    std::fs::create_dir_all(&labels).unwrap();
    for (n, &len) in LENGTHS.iter().enumerate() {
        let mut file = String::new();
        for t in 0..len as usize {
            let last = t + 1 == len as usize;
            let label = if last {
                targets(&y, n)
            } else {
                ",".repeat(K - 1)
            };
            csv.push_str(&format!("s{n},{t},{},{label}\n", step(&x, n, t)));
            file.push_str(&format!("{}\n", step(&x, n, t)));
        }
        std::fs::write(features.join(format!("{n}.csv")), file).unwrap();
        std::fs::write(labels.join(format!("{n}.csv")), targets(&y, n) + "\n").unwrap();
    }
    let long = dir.join("rows.csv");
    std::fs::write(&long, csv).unwrap();
    for (what, path) in [("long CSV", &long), ("DL4J", &dir.join("dl4j"))] {
        let got = eval_on_data(&ck, path, what)["loss"].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-6 * want,
            "{what}: {got} against {want}"
        );
    }

    // predict reads no labels: [N, K] predictions from a file without them.
    let unlabelled = dir.join("inputs.safetensors");
    tensor_file(&unlabelled, None);
    let out = dir.join("predictions.safetensors");
    succeed(
        tensorfit_command()
            .args(["predict", "--device", "cpu", "--checkpoint"])
            .arg(&ck)
            .arg("--data")
            .arg(&unlabelled)
            .arg("--output")
            .arg(&out),
        "predict --data",
    );
    let bytes = std::fs::read(&out).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(st.tensor("predictions").unwrap().shape(), [N, K]);
    // A long CSV keeps its K target columns to predict, and says so when they are missing.
    let bare = dir.join("bare.csv");
    std::fs::write(&bare, format!("s0,0,{}\n", step(&x, 0, 0))).unwrap();
    let err = refused(&[
        "predict",
        "--checkpoint",
        arg(&ck),
        "--data",
        arg(&bare),
        "--output",
        arg(&out),
    ]);
    assert!(err.contains("y1,...,y3"), "{err}");
    assert!(err.contains("its last K columns"), "{err}");
}

#[test]
fn labels_that_do_not_fit_the_models_outputs_are_refused_naming_the_layout() {
    let dir = scratch("multi-output-refused");
    let model = model(&dir);
    let train = |data: &Path| {
        refused(&[
            "train",
            "--model",
            arg(&model),
            "--data",
            arg(data),
            "--epochs",
            "1",
            "--device",
            "cpu",
        ])
    };
    let two = dir.join("two.safetensors");
    tensor_file(&two, Some((&[0.5; N * 2], vec![N, 2])));
    let err = train(&two);
    assert!(err.contains(&format!("expected [{N}, {K}]")), "{err}");
    assert!(err.contains(&format!("[{N}, {T}, {K}]")), "{err}");

    // A row of the long CSV with some of its K label fields filled.
    let csv = dir.join("partial.csv");
    std::fs::write(&csv, "s0,0,0.1,0.2,0.3,,,\ns0,1,0.1,0.2,0.3,1.0,,2.0\n").unwrap();
    let err = train(&csv);
    assert!(err.contains("partial.csv:2"), "{err}");
    assert!(err.contains("2 of the 3 label fields"), "{err}");
    assert!(err.contains("y1,...,y3"), "{err}");

    // A DL4J label line with one value for K = 3.
    let (features, labels) = (dir.join("d/features"), dir.join("d/labels"));
    std::fs::create_dir_all(&features).unwrap();
    std::fs::create_dir_all(&labels).unwrap();
    std::fs::write(features.join("0.csv"), "0.1,0.2,0.3\n0.4,0.5,0.6\n").unwrap();
    std::fs::write(labels.join("0.csv"), "0.5\n").unwrap();
    let err = train(&dir.join("d"));
    assert!(err.contains("labels/0.csv:1"), "{err}");
    assert!(err.contains("3 f32 targets"), "{err}");
}
