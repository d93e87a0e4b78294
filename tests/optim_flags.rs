//! The optimizer, clipping and schedule flags of `train`: bad values are refused before
//! anything runs, with an error naming the flag; `--help` documents each flag.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tensorfit_command;

fn refused(args: &[&str]) -> String {
    let out = tensorfit_command()
        .arg("train")
        .args(["--steps", "10"])
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must be refused: {err}"
    );
    err
}

#[test]
fn each_bad_optimizer_setting_is_refused_naming_its_flag() {
    for (args, flag) in [
        (vec!["--clip-norm", "-1"], "--clip-norm"),
        (vec!["--clip-value", "0"], "--clip-value"),
        (vec!["--optimizer", "sgd", "--momentum", "1"], "--momentum"),
        (
            vec!["--optimizer", "sgd", "--momentum", "-0.5"],
            "--momentum",
        ),
        (vec!["--optimizer", "sgd", "--nesterov"], "--nesterov"),
        (vec!["--schedule", "linear"], "--schedule"),
        (vec!["--warmup-steps", "11"], "--warmup-steps"),
        (vec!["--lr", "0"], "--lr"),
        (vec!["--optimizer", "rmsprop"], "--optimizer"),
        (vec!["--schedule", "step"], "--step-size"),
    ] {
        let err = refused(&args);
        assert!(
            err.contains(flag),
            "{args:?}: the error must name {flag}: {err}"
        );
    }
}

#[test]
fn help_documents_every_optimizer_flag() {
    let out = tensorfit_command()
        .args(["train", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--optimizer",
        "--lr",
        "--momentum",
        "--nesterov",
        "--weight-decay",
        "--clip-norm",
        "--clip-value",
        "--schedule",
        "--step-size",
        "--gamma",
        "--t-max",
        "--warmup-steps",
        "--factor",
        "--patience",
        "--min-lr",
    ] {
        assert!(help.contains(flag), "train --help must document {flag}");
    }
}

/// `plan --json` with `args`: the chosen plan's peak bytes.
fn planned_peak(args: &[&str]) -> u64 {
    let out = common::succeed(
        tensorfit_command()
            .args(["plan", "--batch", "8", "--seq-len", "20", "--tbptt", "20"])
            .args(["--device", "cpu", "--json"])
            .args(args),
        "plan",
    );
    common::json(&out)["chosen"]["estimated_peak_bytes"]
        .as_u64()
        .unwrap()
}

#[test]
fn plan_holds_the_state_of_the_optimizer_it_is_given() {
    let adam = planned_peak(&[]);
    let sgd = planned_peak(&["--optimizer", "sgd", "--momentum", "0.9"]);
    // SGD keeps one buffer per parameter where Adam keeps two moments: one f32 tensor of
    // the seed network's 1,434,406 parameters less (arenas are aligned to 256 bytes).
    let one_copy = 1_434_406u64 * 4;
    assert!(
        adam > sgd && (adam - sgd).abs_diff(one_copy) <= 256 * 16,
        "adam {adam}, sgd {sgd}: expected a difference of about {one_copy}"
    );
    let out = tensorfit_command()
        .args([
            "plan",
            "--device",
            "cpu",
            "--optimizer",
            "sgd",
            "--momentum",
            "1.5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--momentum"), "{err}");
}
