//! What `predict` reads: `--input` or `--data`, and without either it asks for both;
//! `--input` reads F64 as `--data` does (rounded to f32), and refuses a value beyond
//! f32's range naming it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::{arg, example_data, refused, scratch, succeed, tensorfit_command};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

#[test]
fn predict_without_input_or_data_asks_for_either() {
    let dir = scratch("predict-neither");
    let out = dir.join("p.safetensors");
    let err = refused(&["predict", "--checkpoint", "ck", "--output", arg(&out)]);
    assert!(
        err.contains("--input") && err.contains("--data"),
        "must name both: {err}"
    );
}

/// `input` [2, 5, 3] as `dtype` (F32 or F64) in `path`, or with `value` at element 4.
fn input_file(path: &Path, dtype: Dtype, value: Option<f64>) {
    let mut x: Vec<f64> = (0..30).map(|i| (i % 7) as f64 / 7.0 - 0.4).collect();
    if let Some(v) = value {
        x[4] = v;
    }
    let bytes: Vec<u8> = match dtype {
        Dtype::F64 => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        _ => x.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
    };
    let views = [(
        "input",
        TensorView::new(dtype, vec![2, 5, 3], &bytes).unwrap(),
    )];
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn predict_args<'a>(ck: &'a Path, input: &'a Path, out: &'a Path) -> [&'a str; 9] {
    [
        "predict",
        "--device",
        "cpu",
        "--checkpoint",
        arg(ck),
        "--input",
        arg(input),
        "--output",
        arg(out),
    ]
}

#[test]
fn predict_input_reads_f64_as_data_does() {
    let dir = scratch("predict-f64");
    let ck = dir.join("ck");
    common::data_cli::train_on_data(
        ["--model", arg(&example_data("classify_model.toml"))],
        &example_data("classify.safetensors"),
        "1",
        &ck,
    );
    let mut got = Vec::new();
    for (dtype, name) in [(Dtype::F32, "f32"), (Dtype::F64, "f64")] {
        let input = dir.join(format!("{name}.safetensors"));
        input_file(&input, dtype, None);
        let out = dir.join(format!("{name}_out.safetensors"));
        succeed(
            tensorfit_command().args(predict_args(&ck, &input, &out)),
            name,
        );
        let bytes = std::fs::read(&out).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        got.push(st.tensor("probabilities").unwrap().data().to_vec());
    }
    assert_eq!(got[0], got[1], "F64 input rounded to f32 predicts as F32");

    let input = dir.join("huge.safetensors");
    input_file(&input, Dtype::F64, Some(1e300));
    let out = dir.join("huge_out.safetensors");
    let err = refused(&predict_args(&ck, &input, &out));
    assert!(err.contains("1e300") && err.contains("element 4"), "{err}");
    assert!(err.contains("beyond f32's range"), "{err}");
}
