//! The CLI counts steps as checkpoints and schedules do, as optimizer updates: with
//! windowed truncated BPTT and a head on every step a minibatch of T steps takes one per
//! window (`ceil(T / L)`), the run ends at the first minibatch at or past `--steps`, a
//! checkpoint or an evaluation falls at each multiple a minibatch passes, and a resumed
//! run continues the same count.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ok_json, scratch, succeed, tensorfit_command};
use tensorfit::nn::Checkpoint;

/// Truncated BPTT of 5 steps in `mode`, batches of 4, on the CPU.
fn windows_of_5(mode: &str) -> [&str; 8] {
    [
        "--tbptt",
        "5",
        "--tbptt-mode",
        mode,
        "--batch",
        "4",
        "--device",
        "cpu",
    ]
}

/// A language model of the built-in per-step task, minibatches of 4 × 20 steps.
fn lm_run<'a>(mode: &'a str, steps: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "train",
        "--model",
        "examples/models/char_lm.toml",
        "--seq-len",
        "20",
        "--steps",
        steps,
        "--eval-batch",
        "4",
    ];
    args.extend(windows_of_5(mode));
    args.extend_from_slice(extra);
    args
}

#[test]
fn a_windowed_run_counts_an_update_per_window_as_a_step_and_resumes_the_same_count() {
    // Windows of 5 over 20 steps: 4 updates a minibatch; 6 steps asked is 2 minibatches.
    let dir = scratch("windowed-steps").join("run");
    let d = dir.to_str().unwrap();
    let v = ok_json(&lm_run(
        "windows",
        "6",
        &["--checkpoint-dir", d, "--checkpoint-every", "3", "--json"],
    ));
    assert_eq!(
        (v["step"].as_u64(), v["steps"].as_u64()),
        (Some(8), Some(8)),
        "{v}"
    );
    assert_eq!(
        v["losses"].as_array().unwrap().len(),
        2,
        "one loss a minibatch: {v}"
    );
    let ck = Checkpoint::load(&dir.join("checkpoint.safetensors")).unwrap();
    assert_eq!(ck.step, 8, "the checkpoint counts the same steps");
    let resumed = ok_json(&[
        "train", "--resume", d, "--steps", "4", "--device", "cpu", "--json",
    ]);
    assert_eq!(resumed["step"].as_u64(), Some(12), "{resumed}");
    // The plain mode takes one update a minibatch.
    let v = ok_json(&lm_run("last", "6", &["--json"]));
    assert_eq!(v["step"].as_u64(), Some(6), "{v}");
}

#[test]
fn an_evaluation_falls_at_each_multiple_a_minibatch_passes() {
    // Every 3 steps with 4 a minibatch: steps 4, 8 and 12 pass 3, 6 and 9 (and 12).
    let out = succeed(
        tensorfit_command().args(lm_run("windows", "12", &["--eval-every", "3"])),
        "train",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let evaluated: Vec<&str> = err
        .lines()
        .map(|l| l.trim_start_matches('\r'))
        .filter(|l| l.starts_with("step") && l.contains("held-out"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(evaluated, ["4/12", "8/12", "12/12"], "{err}");
}

#[test]
fn training_from_a_text_counts_the_same_steps_as_its_checkpoint() {
    let dir = scratch("windowed-steps").join("text");
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("text.txt");
    std::fs::write(
        &text,
        "the quick brown fox jumps over the lazy dog. ".repeat(40),
    )
    .unwrap();
    let model = dir.join("lm.toml");
    std::fs::write(
        &model,
        "[input]\nkind = \"tokens\"\nvocab = 40\n\n[recurrent]\ncell = \"lstm\"\nhidden = 8\nlayers = 1\n\n[head]\non = \"every_step\"\nlayers = []\n\n[loss]\nkind = \"cross_entropy\"\nclasses = 40\n",
    )
    .unwrap();
    let run = |mode: &str, out: &std::path::Path| {
        let (m, t, o) = (
            model.to_str().unwrap(),
            text.to_str().unwrap(),
            out.to_str().unwrap(),
        );
        let args = [
            "train",
            "--model",
            m,
            "--data",
            t,
            "--max-seq-len",
            "20",
            "--epochs",
            "1",
            "--val-fraction",
            "0",
            "--checkpoint-dir",
            o,
            "--json",
        ];
        let mut command = tensorfit_command();
        command.args(args).args(windows_of_5(mode));
        let out = succeed(&mut command, "train --data");
        // A line per epoch, then the run's summary.
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str::<serde_json::Value>(stdout.lines().last().unwrap()).unwrap()
    };
    let windows = run("windows", &dir.join("windows"));
    let last = run("last", &dir.join("last"));
    let (w, l) = (
        windows["steps"].as_u64().unwrap(),
        last["steps"].as_u64().unwrap(),
    );
    assert!(
        l > 0 && w == 4 * l,
        "4 windows of 5 a batch of 20 steps: {w} vs {l}"
    );
    for (name, steps) in [("windows", w), ("last", l)] {
        let ck = Checkpoint::load(&dir.join(name).join("checkpoint.safetensors")).unwrap();
        assert_eq!(
            ck.step, steps,
            "{name}: the checkpoint counts the steps the run reported"
        );
    }
}
