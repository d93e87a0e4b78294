//! Writing a checkpoint holds no copy of the training state beyond the host copy a run
//! keeps anyway (`Session::state`: the snapshot taken before each step, which the host
//! plan counts once): the file is written from it a tensor at a time (header first, then
//! each tensor's bytes), not serialised whole in memory and then written (which held
//! about five copies of the state at once: 6.7 GB of resident memory for an 805 MB
//! state), nor from a second copy read back for it (0.6 copies more here, before).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;

use common::{arg, example_data, scratch, succeed, tensorfit_command};

/// Two LSTM layers of 1024 units over the 3 features of `classify.safetensors`: 12.6
/// million weights, 151 MB of training state (the weights and Adam's two moments).
const HIDDEN: usize = 1024;
const STATE_BYTES: u64 =
    3 * 4 * (4 * HIDDEN * (3 + HIDDEN + 2) + 4 * HIDDEN * (2 * HIDDEN + 2)) as u64;

/// The peak resident memory (bytes) of one epoch of training, saving to `save` if given.
fn peak_of_training(dir: &Path, save: Option<&Path>) -> u64 {
    let model = dir.join("wide.toml");
    std::fs::write(
        &model,
        format!(
            "[input]\nkind = \"dense\"\nfeatures = 3\n\n[recurrent]\ncell = \"lstm\"\nhidden = {HIDDEN}\nlayers = 2\n\n[head]\non = \"last\"\nlayers = []\n\n[loss]\nkind = \"cross_entropy\"\nclasses = 3\n"
        ),
    )
    .unwrap();
    let data = example_data("classify.safetensors");
    let mut cmd = tensorfit_command();
    cmd.args(["train", "--model", arg(&model), "--data", arg(&data)])
        .args(["--epochs", "1", "--device", "cpu", "--json"]);
    if let Some(path) = save {
        cmd.args(["--save", arg(path)]);
    }
    let out = succeed(&mut cmd, "training the wide model");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    v["peak_resident_bytes"].as_u64().unwrap()
}

#[test]
fn writing_a_checkpoint_holds_no_copy_of_the_state_beyond_the_runs_own() {
    let dir = scratch("checkpoint_memory");
    let save = dir.join("wide.safetensors");
    let without = peak_of_training(&dir, None);
    let with = peak_of_training(&dir, Some(&save));
    assert!(std::fs::metadata(&save).unwrap().len() >= STATE_BYTES);
    let extra = with.saturating_sub(without);
    println!(
        "peak {} MB without --save, {} MB with: {:.2} copies of the {} MB state more",
        without / 1_000_000,
        with / 1_000_000,
        extra as f64 / STATE_BYTES as f64,
        STATE_BYTES / 1_000_000
    );
    // Measured 0.00 copies more (0.6 before the one host copy, 5 before streaming); a
    // quarter of the state is the allocator's and the page cache's leeway.
    assert!(
        extra < STATE_BYTES / 4,
        "writing the checkpoint took {extra} bytes more than training without it (state {STATE_BYTES})"
    );
}

/// The flags of a small job of the built-in task on the CPU, for `plan` and `train`.
const SMALL_JOB: [&str; 8] = [
    "--batch",
    "4",
    "--seq-len",
    "10",
    "--tbptt",
    "10",
    "--device",
    "cpu",
];

/// `plan` counts the one host copy of the training state that `train` and `eval` hold
/// (`Session::state`: the snapshot before each step, which a checkpoint is written from
/// and a change of batch shape carries), whether or not the run writes checkpoints. It
/// counted five, as for a run serialising checkpoints, while `train` without `--save`
/// counted two: 6.25 GiB against 4.03 GB for one job; then two for every run.
#[test]
fn plan_counts_the_one_copy_of_the_state_that_training_and_evaluation_hold() {
    let copies = |mode: &str| {
        let v = common::plan_json(&[["--mode", mode].as_slice(), &SMALL_JOB].concat());
        v["host"]["state_copies"].as_u64().unwrap()
    };
    let (train, infer) = (copies("train"), copies("infer"));
    assert!(infer > 0);
    assert_eq!(train, infer, "training counts {train}, evaluation {infer}");
}

/// The device plan (`estimated_peak_bytes`) of `plan` and of a one-step `train` with the
/// same `flags`.
fn planned_by_plan_and_train(flags: &[&str]) -> (u64, u64) {
    let v = common::plan_json(flags);
    let planned = v["chosen"]["estimated_peak_bytes"].as_u64().unwrap();
    let out = succeed(
        tensorfit_command()
            .args(["train", "--steps", "1", "--eval-every", "0", "--json"])
            .args(flags),
        "train",
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let run: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    (planned, run["estimated_peak_bytes"].as_u64().unwrap())
}

/// `plan` plans the job `train` runs with the same flags, its held-out evaluation
/// included (the evaluation's sequences and program): the device plans are the same to
/// the byte. `plan` left the evaluation out, and a run whose evaluation batch (256 by
/// default) is larger than its training batch needed more than `plan` said.
#[test]
fn plan_and_train_plan_the_same_job_alike() {
    let (plan, train) = planned_by_plan_and_train(&SMALL_JOB);
    assert_eq!(plan, train);
    // With another --eval-batch on both, again alike, and another plan than before.
    let smaller =
        planned_by_plan_and_train(&[SMALL_JOB.as_slice(), &["--eval-batch", "4"]].concat());
    assert_eq!(smaller.0, smaller.1);
    assert!(smaller.0 < plan, "{} vs {plan}", smaller.0);
}
