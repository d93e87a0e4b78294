//! `tensorfit import`: a PyTorch state dict (safetensors) of a described model becomes a
//! checkpoint with fresh optimizer state that `predict` runs; a state dict that does not
//! fit is refused naming every tensor at fault, and nothing is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use tensorfit::core::HostTensor;
use tensorfit::nn::{import_state_dict, Checkpoint, ParamStore, SeedShape};

use common::{scratch, succeed, tensorfit_command};

/// The small state dicts of `crates/tensorfit-nn/tests/data/` (written by its
/// `state_dicts.py`).
fn state_dict(dtype: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/tensorfit-nn/tests/data")
        .join(format!("seed_small_state_dict_{dtype}.safetensors"))
}

/// The model of those state dicts (F=10, H=8, D=5, C=6), as the description file `name`
/// (one per test: tests run at once).
fn small_model(name: &str) -> (tensorfit::nn::ModelDescription, PathBuf) {
    let d = SeedShape::SMALL_REFERENCE.description();
    let path = scratch("import").join(name);
    std::fs::write(&path, d.to_toml()).unwrap();
    (d, path)
}

/// `tensorfit import --model MODEL --weights WEIGHTS --output OUTPUT`.
fn import(model: &Path, weights: &Path, output: &Path) -> Command {
    let mut c = tensorfit_command();
    c.arg("import").arg("--model").arg(model);
    c.arg("--weights").arg(weights).arg("--output").arg(output);
    c
}

/// Runs `c`, requires exit status 1, and returns the error output.
fn refused(mut c: Command) -> String {
    let out = c.output().expect("the binary runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "must be refused: {err}");
    err
}

#[test]
fn import_writes_a_checkpoint_of_the_state_dict_with_fresh_optimizer_state() {
    let (model, file) = small_model("small_each_dtype.toml");
    for dtype in ["f32", "f16", "bf16", "f64"] {
        let out = scratch("import").join(format!("imported_{dtype}.safetensors"));
        let weights = state_dict(dtype);
        succeed(&mut import(&file, &weights, &out), dtype);
        let ck = Checkpoint::load(&out).unwrap();
        assert_eq!(ck.config, model);
        assert_eq!((ck.step, ck.optimizer.len()), (0, 0));
        let want = import_state_dict(&model.param_specs().unwrap(), &weights).unwrap();
        assert_eq!(ck.params.len(), want.len());
        for (name, t) in want.iter() {
            assert_eq!(ck.params.get(name), Some(t), "{dtype}: `{name}`");
        }
    }
}

#[test]
fn predict_runs_an_imported_checkpoint_without_a_model_flag() {
    let (_, file) = small_model("small_predict.toml");
    let dir = scratch("import");
    let ck = dir.join("for_predict.safetensors");
    succeed(&mut import(&file, &state_dict("f32"), &ck), "import");
    let (batch, steps) = (2, 5);
    let data: Vec<f32> = (0..batch * steps * 10)
        .map(|i| ((i % 7) as f32 - 3.0) / 3.0)
        .collect();
    let mut inputs = ParamStore::new();
    inputs.insert("input", HostTensor::new([batch, steps, 10], data).unwrap());
    let input = dir.join("small_input.safetensors");
    std::fs::write(
        &input,
        inputs.to_safetensors("", Default::default()).unwrap(),
    )
    .unwrap();
    let output = dir.join("small_probs.safetensors");
    succeed(
        tensorfit_command()
            .args(["predict", "--device", "cpu", "--checkpoint"])
            .arg(&ck)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output),
        "predict",
    );
    let (probs, _) = ParamStore::load(&output, "").unwrap();
    let p = probs.get("probabilities").unwrap();
    assert_eq!(p.shape.dims(), &[batch, 6]);
    for row in p.data.chunks(6) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn a_state_dict_of_another_model_is_refused_naming_every_tensor_and_nothing_is_written() {
    let out = scratch("import").join("never.safetensors");
    let err = refused(import(Path::new("seed"), &state_dict("f32"), &out));
    assert!(
        err.contains("the state dict does not fit the model"),
        "{err}"
    );
    for line in [
        "`lstm.weight_ih_l0` is [32, 10] in the file, the model needs [1000, 152]",
        "`out.weight` is [6, 5] in the file, the model needs [6, 100]",
    ] {
        assert!(err.contains(line), "missing {line:?}: {err}");
    }
    assert!(!out.exists(), "no checkpoint is written");
}

#[test]
fn import_refuses_to_write_over_its_own_weights() {
    let (_, file) = small_model("small_same_file.toml");
    let copy = scratch("import").join("weights_copy.safetensors");
    std::fs::copy(state_dict("f32"), &copy).unwrap();
    let err = refused(import(&file, &copy, &copy));
    assert!(err.contains("is the --weights file"), "{err}");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(state_dict("f32")).unwrap()
    );
}
