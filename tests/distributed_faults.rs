//! Stops and faults across the ranks of `mpirun -np N tensorfit train`
//! (docs/distributed.md, Faults): an interrupt on one rank, or on mpirun, stops every
//! rank after the same step — agreed on at that step's exchange — with rank 0's
//! checkpoint of that step written and one exit status, never a rank left waiting for
//! the collective timeout. A rank whose device runs out of memory mid-step falls back and
//! every rank carries on with the same step and weights. A rank that stops responding
//! ends the run with a timeout error. Needs the `mpi` feature and `mpirun`; without
//! either each test prints why it skips.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use tensorfit::nn::{Checkpoint, ModelDescription};
use tensorfit_testing::mpirun::{Launched, Run};

use common::ranks::{cpu_train, launch, line, not_built, numbers, rank_pid, BIN, BOUND};
use common::{arg, scratch};

/// A small classifier without BatchNorm (one LSTM layer of 12 units straight into the
/// output layer), as a model file: steps of a few milliseconds.
fn small() -> String {
    ModelDescription::lstm_classifier(152, 12, 1, 6).to_toml()
}

/// Starts 2 ranks training [`small`] for a million steps with a checkpoint every step into
/// `ck`, marked with `mark` in their environment, with `mca` before the ranks; returns
/// once rank 0 has written a checkpoint (training is under way). `None` without MPI.
fn long_run(
    test: &str,
    ck: &Path,
    mark: &str,
    (mca, timeout): (&[&str], &str),
) -> Option<Launched> {
    let model = scratch(test).join("model.toml");
    std::fs::write(&model, small()).unwrap();
    let run = [
        "--steps",
        "1000000",
        "--checkpoint-dir",
        arg(ck),
        "--checkpoint-every",
        "1",
        "--collective-timeout",
        timeout,
    ];
    let args = cpu_train(arg(&model), ("4", "5", "4"), &run);
    let mut line: Vec<String> = mca.iter().map(|s| s.to_string()).collect();
    line.extend(self::line("train", &[(2, &args[..])], &[mark]));
    let launched = tensorfit_testing::mpirun::spawn(test, not_built(), &line)?;
    let waiting = Instant::now();
    while !ck.join("checkpoint.safetensors").exists() && waiting.elapsed() < BOUND {
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(launched)
}

fn kill(signal: &str, pid: u32) {
    let _ = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}

/// The run ended within a bound far below the collective timeout (120 s), with rank 0's
/// report of `signal` and its checkpoint of the step it stopped after.
fn stopped_together(test: &str, run: &Run, signal: &str, took: Duration, ck: &Path) {
    assert!(
        took < Duration::from_secs(60) && !run.output.contains("did not complete"),
        "{test}: ended {took:?} after the signal:\n{}",
        run.output
    );
    // The weights check at the end is a collective that compares the ranks' weights: it
    // passed, or the run would have failed saying so.
    assert!(
        !run.output.contains("differ from rank 0"),
        "{test}:\n{}",
        run.output
    );
    let saved = Checkpoint::load(&ck.join("checkpoint.safetensors")).unwrap();
    let stopped = format!("stopped by {signal} after step {} ", saved.step);
    let written = format!("checkpoint of step {} written", saved.step);
    assert!(
        run.output.contains(&stopped) && run.output.contains(&written),
        "{test}: no '{stopped}' and '{written}' in\n{}",
        run.output
    );
    println!(
        "{test}: both ranks stopped after step {}, {took:.1?} after the signal",
        saved.step
    );
}

#[test]
fn an_interrupt_on_one_rank_stops_every_rank_after_the_same_step_with_its_checkpoint() {
    let test = "sigint on rank 1";
    let ck = scratch("sigint-rank").join("ck");
    let _ = std::fs::remove_dir_all(&ck);
    let mark = format!("TENSORFIT_TEST_LAUNCH={}-sigint-rank", std::process::id());
    let Some(launched) = long_run(test, &ck, &mark, (&[], "120")) else {
        return;
    };
    let pid = rank_pid(&mark, 1).expect("rank 1 is running");
    kill("-INT", pid);
    let signalled = Instant::now();
    let run = launched.finish(BOUND);
    // Every rank exits with SIGINT's status, 130, which mpirun passes on.
    assert_eq!(run.code, Some(130), "{test}:\n{}", run.output);
    stopped_together(test, &run, "SIGINT", signalled.elapsed(), &ck);
}

#[test]
fn ctrl_c_on_mpirun_stops_every_rank_after_the_same_step_with_its_checkpoint() {
    let test = "sigint on mpirun";
    let ck = scratch("sigint-mpirun").join("ck");
    let _ = std::fs::remove_dir_all(&ck);
    let mark = format!("TENSORFIT_TEST_LAUNCH={}-sigint-mpirun", std::process::id());
    // Open MPI 4.1 answers Ctrl-C by waiting odls_base_sigkill_timeout (1 s by default),
    // sending every rank SIGTERM, waiting as long again and sending SIGKILL: 1 s is
    // short for the ranks to agree and rank 0 to write on a loaded machine, so 5. (Nor
    // does mpirun read the ranks' output while it ends the job: a --json report larger
    // than a pipe's buffer would block rank 0.)
    let mca = ["--mca", "odls_base_sigkill_timeout", "5"];
    let Some(launched) = long_run(test, &ck, &mark, (&mca, "120")) else {
        return;
    };
    kill("-INT", launched.pid());
    let signalled = Instant::now();
    let run = launched.finish(BOUND);
    assert!(!run.ok, "{test}: the launch succeeded:\n{}", run.output);
    stopped_together(test, &run, "SIGTERM", signalled.elapsed(), &ck);
}

#[test]
fn an_out_of_memory_on_rank_1_falls_back_and_every_rank_carries_on_with_the_same_weights() {
    let test = "oom on rank 1";
    let model = scratch("oom-rank").join("model.toml");
    std::fs::write(&model, small()).unwrap();
    let args = cpu_train(arg(&model), ("8", "6", "8"), &["--steps", "6", "--json"]);
    let Some(clean) = launch(test, "train", &[(2, &args[..])]) else {
        return;
    };
    let want: serde_json::Value = serde_json::from_str(clean.stdout.trim()).unwrap();
    // A step of this run executes about 20 ops: op 70 falls early in step 4, before its
    // exchange, op 80 late in it, on the update's side (TENSORFIT_INJECT_OOM counts every
    // op the process executes).
    for op in ["70", "80"] {
        let env = format!("{}={op}", tensorfit_engine::faults::INJECT_OOM_VAR);
        // Rank 0 as before; rank 1, a part of its own, with the fault.
        let mut line = line("train", &[(1, &args[..])], &[]);
        line.extend([":", "-np", "1", "-x", &env, BIN, "train"].map(String::from));
        line.extend(args.iter().map(|s| s.to_string()));
        let run = tensorfit_testing::mpirun::launch(test, not_built(), &line, BOUND).unwrap();
        assert!(run.ok, "{test} at op {op}:\n{}", run.output);
        assert!(
            run.output.contains("rank 1: warning: step") && run.output.contains("injected fault"),
            "{test} at op {op}: rank 1 did not fall back:\n{}",
            run.output
        );
        let got: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(
            numbers(&got, "losses"),
            numbers(&want, "losses"),
            "{test} at op {op}"
        );
        // The run checked that both ranks hold the same weights; they are the clean run's.
        assert_eq!(
            got["weights_hash"], want["weights_hash"],
            "{test} at op {op}"
        );
    }
}

#[test]
fn a_rank_that_stops_responding_ends_the_training_with_a_timeout_error() {
    let test = "stopped rank";
    let ck = scratch("stopped").join("ck");
    // Marks this launch's processes, so that the test stops one of its own ranks.
    let mark = format!("TENSORFIT_TEST_LAUNCH={}-stopped", std::process::id());
    let Some(launched) = long_run(test, &ck, &mark, (&[], "2")) else {
        return;
    };
    let pid = rank_pid(&mark, 1).expect("rank 1 is running");
    kill("-STOP", pid);
    let stopped = Instant::now();
    let run = launched.finish(BOUND);
    kill("-KILL", pid);
    assert!(!run.ok, "{test}: the launch succeeded:\n{}", run.output);
    assert!(
        run.output.contains("did not complete within 2 s") && !run.output.contains("panicked"),
        "{test}: no timeout error in\n{}",
        run.output
    );
    let took = stopped.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "{test}: ended {took:?} after the stop"
    );
    println!("{test}: the run ended {took:.1?} after rank 1 stopped");
}
