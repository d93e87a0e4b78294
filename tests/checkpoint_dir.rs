//! A checkpoint directory belongs to one run: a new run does not replace another run's
//! checkpoint unless told to, two trainers cannot share a directory, `--checkpoint-every
//! 0` is refused, temporaries of killed writers are removed, and a full disk costs a
//! warning, never the previous checkpoint.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};

use tensorfit::nn::Checkpoint;

use common::{long_training, names_in, scratch, tensorfit_command, SmallDisk, TINY_RUN};

fn train(dir: &Path, extra: &[&str]) -> Output {
    tensorfit_command()
        .arg("train")
        .args(TINY_RUN)
        .arg("--checkpoint-dir")
        .arg(dir)
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// Requires exit code 1; returns stderr.
fn refused(out: &Output) -> String {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn step_in(dir: &Path) -> u64 {
    Checkpoint::load(&dir.join("checkpoint.safetensors"))
        .unwrap()
        .step
}

#[test]
fn a_new_run_does_not_replace_another_runs_checkpoint_unless_told() {
    let dir = scratch("ckdir-other-run");
    assert!(train(&dir, &["--steps", "5"]).status.success());
    let err = refused(&train(&dir, &["--steps", "2"]));
    assert!(
        err.contains("holds the checkpoint of another run (step 5)")
            && err.contains("--resume")
            && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(step_in(&dir), 5, "the other run's checkpoint is intact");
    // Continuing that run is allowed, and so is replacing it when asked.
    assert!(
        train(&dir, &["--steps", "1", "--resume", dir.to_str().unwrap()])
            .status
            .success()
    );
    assert_eq!(step_in(&dir), 6);
    assert!(train(&dir, &["--steps", "2", "--overwrite"])
        .status
        .success());
    assert_eq!(step_in(&dir), 2);
}

#[test]
fn a_resumed_run_does_not_replace_a_later_checkpoint_of_itself() {
    let dir = scratch("ckdir-behind");
    let early = dir.join("early.safetensors");
    let ck_dir = dir.join("run");
    let out = train(
        &ck_dir,
        &["--steps", "2", "--save", early.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(train(
        &ck_dir,
        &["--steps", "3", "--resume", ck_dir.to_str().unwrap()]
    )
    .status
    .success());
    let err = refused(&train(
        &ck_dir,
        &["--steps", "1", "--resume", early.to_str().unwrap()],
    ));
    assert!(
        err.contains("holds step 5 of this run, ahead of step 2"),
        "{err}"
    );
    assert_eq!(step_in(&ck_dir), 5);
}

/// A child process that is killed and reaped when dropped, so a failing test leaves no
/// trainer running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A trainer on `dir` that runs until killed, once training has started.
fn running_trainer(dir: &Path) -> Running {
    let mut child = long_training(dir, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its first line is printed once the directory is locked and training starts.
    let stderr = child.stderr.take().unwrap();
    let child = Running(child);
    let mut first = String::new();
    let mut lines = BufReader::new(stderr);
    while !first.starts_with("training (") {
        first.clear();
        assert!(lines.read_line(&mut first).unwrap() > 0, "trainer ended");
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.lines() {});
    child
}

#[test]
fn two_trainers_cannot_share_a_checkpoint_directory() {
    let dir = scratch("ckdir-shared");
    let first = running_trainer(&dir);
    let err = refused(&train(&dir, &["--steps", "2"]));
    assert!(
        err.contains("in use by another training run")
            && err.contains(&format!("process {}", first.0.id())),
        "{err}"
    );
    drop(first);
    // The lock dies with its process, even a killed one.
    let out = train(&dir, &["--steps", "2", "--overwrite"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(step_in(&dir), 2);
}

#[test]
fn checkpoint_every_zero_or_without_a_directory_is_refused() {
    let dir = scratch("ckdir-every");
    let err = refused(&train(&dir, &["--steps", "3", "--checkpoint-every", "0"]));
    assert!(
        err.contains("--checkpoint-every must be at least 1"),
        "{err}"
    );
    let out = tensorfit_command()
        .args(["train", "--steps", "3", "--checkpoint-every", "2"])
        .output()
        .unwrap();
    assert!(
        refused(&out).contains("--checkpoint-every needs --checkpoint-dir"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn temporaries_left_by_killed_writers_are_removed() {
    let dir = scratch("ckdir-stale");
    for pid in [1u32, 4_000_000] {
        std::fs::write(
            dir.join(format!(".checkpoint.safetensors.tmp{pid}")),
            vec![0u8; 1 << 20],
        )
        .unwrap();
    }
    let out = train(&dir, &["--steps", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(names_in(&dir), [".lock", "checkpoint.safetensors"]);
}

#[test]
fn a_full_disk_keeps_the_previous_checkpoint_and_fails_only_the_final_write() {
    // Room for one seed checkpoint (17.2 MB), not for a second beside it.
    let Some(disk) = SmallDisk::mount("ckdir-full-disk", 24 << 20) else {
        return;
    };
    let out = train(&disk.path, &["--steps", "3", "--checkpoint-every", "1"]);
    let err = refused(&out);
    assert!(
        err.contains("warning: step 2") && err.contains("the previous checkpoint is kept"),
        "{err}"
    );
    assert!(err.contains("step 3 could not be saved"), "{err}");
    assert_eq!(step_in(&disk.path), 1, "the last good checkpoint is intact");
    assert_eq!(
        names_in(&disk.path),
        [".lock", "checkpoint.safetensors"],
        "no temporary file keeps the disk full"
    );
}
