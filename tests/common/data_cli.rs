//! `train --data` and `eval --data` runs of the data-file tests, on the CPU.

use std::path::Path;

use serde_json::Value;

use super::{arg, json, succeed, tensorfit_command};

/// `train --data data` starting from `from` (`["--model", file]` or `["--init",
/// checkpoint]`): every sequence (no validation), `epochs` epochs of batch 4 at rate 0.02
/// on the CPU, into the checkpoint directory `ck`.
pub fn train_on_data(from: [&str; 2], data: &Path, epochs: &str, ck: &Path) {
    succeed(
        tensorfit_command().arg("train").args(from).args([
            "--data",
            arg(data),
            "--val-fraction",
            "0",
            "--epochs",
            epochs,
            "--batch",
            "4",
            "--lr",
            "0.02",
            "--device",
            "cpu",
            "--checkpoint-dir",
            arg(ck),
            "--json",
        ]),
        "train --data",
    );
}

/// The arguments of `eval --data data` of the checkpoint `ck` on the CPU.
pub fn eval_args<'a>(ck: &'a Path, data: &'a Path) -> [&'a str; 7] {
    [
        "eval",
        "--checkpoint",
        arg(ck),
        "--data",
        arg(data),
        "--device",
        "cpu",
    ]
}

/// `eval --data` of the checkpoint `ck` on the CPU, as its JSON line (`what` names the
/// run in a failure).
pub fn eval_on_data(ck: &Path, data: &Path, what: &str) -> Value {
    json(&succeed(
        tensorfit_command().args(eval_args(ck, data)).arg("--json"),
        what,
    ))
}
