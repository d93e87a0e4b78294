//! `predict --data` with a head on every step writes one row of probabilities per step of
//! every sequence: a tagger built in PyTorch (`tools/per_step_predict_reference.py`:
//! LSTM(4, 6, 2 layers) -> Linear(6, 5) -> tanh -> Linear(5, 3) on every step), brought in
//! with `tensorfit import` and predicted on a padded file (lengths 7, 3, 5, 1, 6), gives
//! PyTorch's per-step probabilities within 1e-5, batch-first [N, T, C] with 0 past each
//! sequence's end and the lengths beside them, on the CPU and on wgpu.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{scratch, succeed, tensorfit_command, wgpu_present};
use safetensors::{Dtype, SafeTensors};

/// The tagger of the reference files, as a description file.
const TAGGER: &str = r#"
[input]
kind = "dense"
features = 4

[recurrent]
cell = "lstm"
hidden = 6
layers = 2

[head]
on = "every_step"
layers = [
  { kind = "dense", name = "tag", units = 5, activation = "tanh" },
]

[loss]
kind = "cross_entropy"
classes = 3
"#;

fn reference_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The PyTorch state dict imported as a checkpoint in the scratch directory `name`.
fn imported(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let model = dir.join("tagger.toml");
    std::fs::write(&model, TAGGER).unwrap();
    let ck = dir.join("tagger.safetensors");
    succeed(
        tensorfit_command()
            .arg("import")
            .arg("--model")
            .arg(&model)
            .arg("--weights")
            .arg(reference_file("per_step_state_dict.safetensors"))
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

/// Imports the tagger, predicts the padded file on `device` and compares with PyTorch.
fn matches_pytorch_on(device: &str) {
    let (dir, ck) = imported(&format!("per-step-{device}"));
    let got = predict(
        &ck,
        &reference_file("per_step_data.safetensors"),
        device,
        &dir,
    );
    let want = std::fs::read(reference_file("per_step_reference.safetensors")).unwrap();
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
    matches_pytorch_on("cpu");
}

#[test]
fn a_pytorch_tagger_predicts_pytorchs_per_step_probabilities_from_a_padded_file_on_wgpu() {
    if !wgpu_present() {
        return;
    }
    matches_pytorch_on("wgpu");
}
