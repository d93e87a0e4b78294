//! The CLI on a regression (the mean-squared-error loss): `eval` of a regression
//! checkpoint feeds it the built-in running-mean task and reports its loss (the MSE) with
//! the JSON keys of a classifier's run, `accuracy` being null.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::nn::LossSpec;

use common::{json, scratch, small_checkpoint, succeed, tensorfit_command};

#[test]
fn eval_of_a_regression_checkpoint_reports_the_mse_and_a_null_accuracy() {
    let mut ck = small_checkpoint();
    ck.config.loss = LossSpec::MeanSquaredError { outputs: 2 };
    ck.params = tensorfit::nn::ParamStore::init(&ck.config, 1).unwrap();
    let path = scratch("regression").join("regression.ck");
    ck.save(&path).unwrap();
    let path = path.to_str().unwrap();
    let args = [
        "eval",
        "--checkpoint",
        path,
        "--batch",
        "8",
        "--seq-len",
        "10",
    ];
    let v = json(&succeed(
        tensorfit_command().args(args).arg("--json"),
        "eval --json",
    ));
    assert!(v["accuracy"].is_null(), "{v}");
    let loss = v["loss"].as_f64().expect("the loss is a number");
    assert!(loss.is_finite() && loss > 0.0, "{v}");
    let out = succeed(tensorfit_command().args(args), "eval");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("loss (mse)") && !text.contains("accuracy"),
        "{text}"
    );
}
