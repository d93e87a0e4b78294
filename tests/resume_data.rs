//! A resumed data run (`train --data … --resume DIR`) is the run it continues: every
//! setting that shapes it (epochs, early stopping, the text's windows, validation, the
//! model) comes from its checkpoint when not typed, and a typed value that differs is
//! refused naming both; a run of one kind resumed as the other says what it is and what
//! to pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{
    arg, checkpoint_bits, example_data, json, refused, scratch, spawn_until, succeed,
    tensorfit_command, TINY_RUN,
};
use tensorfit::nn::Checkpoint;

/// Runs `cmd` until `dir/last.safetensors` exists, then sends it SIGTERM and returns what
/// it did.
fn stopped_by_sigterm(cmd: &mut Command, dir: &Path) -> Output {
    let child = spawn_until(cmd, &dir.join("last.safetensors"));
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(sent, "kill -TERM");
    child.wait_with_output().unwrap()
}

/// The lines of `dir/metrics.jsonl` without their times.
fn metrics(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("seconds");
            v
        })
        .collect()
}

/// `run` (a data run into the checkpoint directory it is given) never stopped, and
/// stopped by SIGTERM then resumed with `--resume DIR --data data` and nothing else:
/// requires the resumed run to end where the other did, with its weights, checkpoints
/// and metrics. Returns the resumed run's summary.
fn resumes_as_never_stopped(
    name: &str,
    run: impl Fn(&Path) -> Command,
    data: &Path,
) -> serde_json::Value {
    let whole = scratch(&format!("{name}-whole"));
    let whole_out = succeed(run(&whole).arg("--json"), "the run never stopped");
    let dir = scratch(&format!("{name}-stopped"));
    let out = stopped_by_sigterm(&mut run(&dir), &dir);
    // Where the signal lands is up to the scheduler: a run that had ended resumes too.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(143 | 0)), "{err}");
    let resumed = json(&succeed(
        tensorfit_command().args([
            "train",
            "--resume",
            arg(&dir),
            "--data",
            arg(data),
            "--device",
            "cpu",
            "--json",
        ]),
        "train --resume DIR --data FILE",
    ));
    let never_stopped = json(&whole_out);
    for key in ["steps", "stopped_early", "best_step", "best_val_loss"] {
        assert_eq!(resumed[key], never_stopped[key], "{key}: {resumed}");
    }
    for file in ["last.safetensors", "checkpoint.safetensors"] {
        assert_eq!(
            checkpoint_bits(&dir.join(file)),
            checkpoint_bits(&whole.join(file)),
            "{file}"
        );
    }
    assert_eq!(metrics(&dir), metrics(&whole));
    resumed
}

/// A data run of the example classifier on `classify.safetensors` (9 sequences, a
/// quarter validating) in batches of 2, a latest state every 2 steps into `dir`, with
/// `more` flags.
fn classifier_run(dir: &Path, more: &[&str]) -> Command {
    let mut c = tensorfit_command();
    c.args([
        "train",
        "--model",
        arg(&example_data("classify_model.toml")),
        "--data",
        arg(&example_data("classify.safetensors")),
        "--batch",
        "2",
        "--lr",
        "0.02",
        "--device",
        "cpu",
        "--checkpoint-every",
        "2",
        "--checkpoint-dir",
        arg(dir),
    ]);
    c.args(more);
    c
}

#[test]
fn a_run_stopped_by_sigterm_keeps_its_early_stopping_when_resumed() {
    // It stops early at step 31 of 100 (8 validations without a lower loss); resumed
    // without --stop-patience it trained on to the 10 epochs of the default.
    let data = example_data("classify.safetensors");
    let more = [
        "--epochs",
        "20",
        "--val-fraction",
        "0.25",
        "--eval-every",
        "1",
        "--stop-patience",
        "8",
    ];
    let v = resumes_as_never_stopped("patience", |d| classifier_run(d, &more), &data);
    assert_eq!(v["stopped_early"], true, "{v}");
    // Resumed once more, it stays stopped (it trained on to the next validation).
    let dir = scratch("patience-stopped");
    let before = checkpoint_bits(&dir.join("last.safetensors"));
    let again = json(&succeed(
        tensorfit_command()
            .args(["train", "--resume", arg(&dir), "--data", arg(&data)])
            .args(["--device", "cpu", "--json"]),
        "resuming a run that stopped early",
    ));
    assert_eq!(
        (&again["steps"], &again["stopped_early"]),
        (&v["steps"], &v["stopped_early"])
    );
    assert_eq!(checkpoint_bits(&dir.join("last.safetensors")), before);
}

/// Text of a random sequence of 37 letters a..h repeated 40 times, written in `dir`; and
/// a character language model for it.
fn text_and_model(dir: &Path) -> (PathBuf, PathBuf) {
    let mut x: u64 = 3;
    let period: String = (0..37)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (b'a' + ((x >> 33) % 8) as u8) as char
        })
        .collect();
    let text = dir.join("periodic.txt");
    std::fs::write(&text, period.repeat(40)).unwrap();
    let model = dir.join("lm.toml");
    std::fs::write(
        &model,
        "[input]\nkind = \"tokens\"\nvocab = 9\n\n[recurrent]\ncell = \"lstm\"\nhidden = 16\nlayers = 1\n\n[head]\non = \"every_step\"\nlayers = []\n\n[loss]\nkind = \"cross_entropy\"\nclasses = 9\n",
    )
    .unwrap();
    (text, model)
}

#[test]
fn a_text_run_stopped_by_sigterm_resumes_with_its_own_windows_and_epochs() {
    // Resumed without --max-seq-len and --epochs, it read windows of 100 characters
    // instead of 20, for 10 epochs instead of 3, and wrote `train_loss: 0` lines.
    let (text, model) = text_and_model(&scratch("text-run"));
    let run = |dir: &Path| {
        let mut c = tensorfit_command();
        c.args(["train", "--model", arg(&model), "--data", arg(&text)]);
        c.args(["--max-seq-len", "20", "--epochs", "3", "--batch", "4"]);
        c.args(["--lr", "0.02", "--val-fraction", "0.1", "--device", "cpu"]);
        c.args(["--checkpoint-every", "1", "--checkpoint-dir", arg(dir)]);
        c
    };
    resumes_as_never_stopped("text", run, &text);
}

#[test]
fn every_stored_setting_typed_otherwise_on_resume_is_refused_naming_both() {
    let dir = scratch("resume-refused");
    let data = example_data("classify.safetensors");
    let val = example_data("classify.npz");
    let first = [
        "--epochs",
        "1",
        "--stop-patience",
        "3",
        "--max-seq-len",
        "40",
        "--cut-long",
        "--val",
        arg(&val),
    ];
    succeed(&mut classifier_run(&dir, &first), "the first run");
    let resume = |extra: &[&str]| {
        let args = [
            &["train", "--resume", arg(&dir), "--data", arg(&data)][..],
            extra,
        ]
        .concat();
        refused(&args)
    };
    let shown = val.display();
    for (typed, said) in [
        (&["--epochs", "2"][..], "--epochs 2 (the run's is 1)"),
        (
            &["--stop-patience", "4"],
            "--stop-patience 4 (the run's is 3)",
        ),
        (
            &["--max-seq-len", "30"],
            "--max-seq-len 30 (the run's is 40)",
        ),
        (
            &["--batch-order", "length-grouped"],
            "--batch-order length-grouped (the run's is shuffled)",
        ),
        (
            &["--val-fraction", "0.1"],
            &format!("--val-fraction 0.1 (the run's is none: it validates on --val {shown})"),
        ),
    ] {
        let e = resume(typed);
        assert!(
            e.contains("a resumed run keeps the settings it was started with") && e.contains(said),
            "{typed:?}: {e}"
        );
    }
    // Another --val is judged by its content (the checkpoint keeps the identity of the
    // run's): refused naming both files.
    let e = resume(&["--val", arg(&data)]);
    assert!(
        e.contains(&format!(
            "--val {} is not the data the run resumed from",
            data.display()
        )) && e.contains(&format!("give the run's --val {shown}")),
        "--val: {e}"
    );
    // The run's own values, typed again, are its own (its --val by another spelling).
    let dotted = example_data(".").join("classify.npz");
    let same = [
        &["train", "--resume", arg(&dir), "--data", arg(&data)][..],
        &[
            "--epochs",
            "1",
            "--stop-patience",
            "3",
            "--max-seq-len",
            "40",
        ],
        &["--cut-long", "--val", arg(&dotted), "--device", "cpu"],
    ]
    .concat();
    succeed(tensorfit_command().args(same), "the run's own values");

    // A run without the switches refuses them typed.
    let dir = scratch("resume-refused-switches");
    succeed(&mut classifier_run(&dir, &["--epochs", "1"]), "a plain run");
    let e = refused(&[
        "train",
        "--resume",
        arg(&dir),
        "--data",
        arg(&data),
        "--max-seq-len",
        "40",
        "--cut-long",
    ]);
    assert!(
        e.contains("--max-seq-len 40 (the run's is none), --cut-long (the run's is off) differ"),
        "{e}"
    );
}

#[test]
fn a_checkpoint_from_before_the_data_settings_were_stored_resumes_with_the_flags() {
    let dir = scratch("resume-old-data-run");
    let data = example_data("classify.safetensors");
    succeed(
        &mut classifier_run(&dir, &["--epochs", "1"]),
        "the first run",
    );
    // As written before: run settings without `data`.
    let last = dir.join("last.safetensors");
    let mut ck = Checkpoint::load(&last).unwrap();
    let mut settings: serde_json::Value = serde_json::from_str(&ck.extra["run_settings"]).unwrap();
    settings.as_object_mut().unwrap().remove("data");
    ck.extra.insert("run_settings".into(), settings.to_string());
    ck.save(&last).unwrap();
    let out = succeed(
        tensorfit_command().args([
            "train",
            "--resume",
            arg(&dir),
            "--data",
            arg(&data),
            "--epochs",
            "2",
            "--device",
            "cpu",
            "--json",
        ]),
        "resuming an older checkpoint",
    );
    let v = json(&out);
    assert_eq!(v["steps"], 12, "two epochs of 6 steps: {v}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("written by an older tensorfit and keeps no data settings: continuing with 2 epochs, no early stopping"),
        "{err}"
    );
}

#[test]
fn a_resumed_data_run_refuses_another_model_naming_both() {
    let dir = scratch("resume-model");
    let data = example_data("classify.safetensors");
    succeed(
        &mut classifier_run(&dir, &["--epochs", "1"]),
        "the first run",
    );
    let other = dir.join("wider.toml");
    let wider = std::fs::read_to_string(example_data("classify_model.toml"))
        .unwrap()
        .replace("hidden = 16", "hidden = 24");
    std::fs::write(&other, wider).unwrap();
    let resume = |model: &Path| {
        let mut c = tensorfit_command();
        c.args(["train", "--resume", arg(&dir), "--data", arg(&data)]);
        c.args(["--device", "cpu", "--model", arg(model)]);
        c
    };
    let out = resume(&other).output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!(
            "--model {} (dense 3 → 1 × lstm 24",
            other.display()
        )) && e.contains("is not the model of")
            && e.contains("(dense 3 → 1 × lstm 16")
            && e.contains("drop --model: a resumed run keeps its own"),
        "{e}"
    );
    assert_eq!(
        Checkpoint::load(&dir.join("last.safetensors"))
            .unwrap()
            .step,
        6
    );
    // The run's own model file is its model.
    succeed(
        &mut resume(&example_data("classify_model.toml")),
        "its own model",
    );
}

#[test]
fn a_data_run_resumed_without_data_says_what_it_is_and_what_to_pass() {
    let dir = scratch("resume-without-data");
    let data = example_data("classify.safetensors");
    succeed(
        &mut classifier_run(&dir, &["--epochs", "1"]),
        "the first run",
    );
    let e = refused(&["train", "--resume", arg(&dir)]);
    assert!(
        e.contains(&format!(
            "--resume {}: the latest state of a `train --data` run on {} (step 6, 1 of 1 epochs done), not a run on the built-in task: continue it with --resume {} --data {}",
            dir.display(),
            data.display(),
            dir.display(),
            data.display()
        )),
        "{e}"
    );
    // Its best model is not the state it resumes from.
    let best = dir.join("checkpoint.safetensors");
    let e = refused(&["train", "--resume", arg(&best), "--steps", "1"]);
    assert!(
        e.contains("the best model of a `train --data` run")
            && e.contains(&format!(
                "continue the run from its latest state with --resume {} --data {}",
                dir.display(),
                data.display()
            )),
        "{e}"
    );
    let e = refused(&["train", "--resume", arg(&best), "--data", arg(&data)]);
    assert!(e.contains("the best model of a `train --data` run"), "{e}");
    // A run on the built-in task that took the directory over is its run now.
    let builtin = |more: &[&str]| {
        let mut c = tensorfit_command();
        c.arg("train")
            .args(TINY_RUN)
            .args(["--steps", "1", "--device", "cpu"]);
        succeed(c.args(more), "the built-in task's run");
    };
    builtin(&["--checkpoint-dir", arg(&dir), "--overwrite"]);
    builtin(&["--resume", arg(&dir)]);
}

#[test]
fn a_run_on_the_built_in_task_resumed_with_data_says_what_it_is_and_what_to_pass() {
    let dir = scratch("resume-builtin-with-data");
    let data = example_data("classify.safetensors");
    let mut c = tensorfit_command();
    c.arg("train").args(TINY_RUN).args(["--steps", "2"]);
    succeed(
        c.args(["--device", "cpu", "--checkpoint-dir", arg(&dir)]),
        "built-in",
    );
    for resumed in [dir.clone(), dir.join("checkpoint.safetensors")] {
        let e = refused(&["train", "--resume", arg(&resumed), "--data", arg(&data)]);
        let shown = resumed.display();
        assert!(
            e.contains(&format!(
                "--resume {shown}: a run on the built-in task (step 2), not a `train --data` run: continue it with --resume {shown} without --data"
            )),
            "{e}"
        );
    }
}
