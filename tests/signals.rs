//! Ctrl-C (SIGINT), SIGTERM and SIGHUP end training after the step in progress with a
//! checkpoint of that step, and the conventional exit status (128 + the signal); the
//! interrupted run resumes to exactly the losses of a run that never stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod common;

use std::path::Path;
use std::process::{Child, Command};

use tensorfit::nn::Checkpoint;

use common::{
    json, long_training, losses, scratch, spawn_until, succeed, tensorfit_command, TINY_RUN,
};

/// A training run of a million steps with `extra` flags that checkpoints into `dir`
/// every 5 steps, once it has written its first checkpoint; stdout and stderr are piped.
fn long_run(dir: &Path, extra: &[&str]) -> Child {
    let file = dir.join("checkpoint.safetensors");
    spawn_until(long_training(dir, "5").args(extra), &file)
}

fn send(child: &Child, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal}");
}

fn step_of(path: &Path) -> u64 {
    Checkpoint::load(path).unwrap().step
}

#[test]
fn ctrl_c_finishes_the_step_saves_it_and_resumes_to_the_uninterrupted_losses() {
    let dir = scratch("signals-int");
    let dir_s = dir.to_str().unwrap();
    let child = long_run(&dir, &["--json"]);
    send(&child, "INT");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "exit status of SIGINT");
    let first = json(&out);
    assert_eq!(first["interrupted"], "SIGINT");
    let stopped = first["step"].as_u64().unwrap();
    assert!(stopped >= 5, "{first}");
    assert_eq!(step_of(&dir.join("checkpoint.safetensors")), stopped);
    assert_eq!(losses(&first).len() as u64, stopped);

    let more = |args: &[&str]| {
        json(&succeed(
            tensorfit_command()
                .arg("train")
                .args(TINY_RUN)
                .args(args)
                .arg("--json"),
            "train",
        ))
    };
    let second = more(&["--resume", dir_s, "--steps", "3"]);
    let whole = more(&["--steps", &(stopped + 3).to_string()]);
    let resumed: Vec<f64> = losses(&first).into_iter().chain(losses(&second)).collect();
    assert_eq!(resumed, losses(&whole), "the interruption lost nothing");
}

#[test]
fn sigterm_and_sighup_save_every_output_and_exit_with_their_status() {
    for (signal, code) in [("TERM", 143), ("HUP", 129)] {
        let dir = scratch(&format!("signals-{signal}"));
        let save = dir.join("saved.safetensors");
        let child = long_run(&dir, &["--save", save.to_str().unwrap()]);
        send(&child, signal);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "SIG{signal}: {err}");
        let stopped = step_of(&save);
        assert!(
            err.contains(&format!("stopped by SIG{signal} after step {stopped}")),
            "{err}"
        );
        assert_eq!(step_of(&dir.join("checkpoint.safetensors")), stopped);
    }
}
