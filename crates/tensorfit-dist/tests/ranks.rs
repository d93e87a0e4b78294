//! The communicator across real MPI ranks: `mpirun -np 2` and `-np 3` (an uneven split)
//! run `tensorfit-dist-check`, whose every rank compares its results with what one process
//! computes (see that program for each scenario). Needs the `mpi` feature and `mpirun`
//! (Open MPI); without either each test prints why it skips, and fails when
//! `TENSORFIT_REQUIRE` names `mpi` (as CI does).
use std::process::Command;
use std::time::Duration;

use tensorfit_testing::mpirun::Run;

const CHECK: &str = env!("CARGO_BIN_EXE_tensorfit-dist-check");

/// Runs `tensorfit-dist-check args` on `ranks` ranks, killing the launch after `limit`
/// (a test must never hang); `None` when MPI is unavailable (the skip is printed).
fn launch(test: &str, ranks: usize, args: &[&str], limit: Duration) -> Option<Run> {
    let not_built = (!cfg!(feature = "mpi"))
        .then_some("built without the `mpi` feature (cargo test -p tensorfit-dist --features mpi)");
    let mut line = vec!["-np".to_string(), ranks.to_string(), CHECK.to_string()];
    line.extend(args.iter().map(|a| a.to_string()));
    tensorfit_testing::mpirun::launch(test, not_built, &line, limit)
}

/// Runs `scenario` on 2 and on 3 ranks and expects every rank to report success.
fn every_rank_passes(test: &str, scenario: &str) {
    for ranks in [2, 3] {
        let Some(run) = launch(test, ranks, &[scenario], Duration::from_secs(120)) else {
            return;
        };
        assert!(run.ok, "{test} on {ranks} ranks failed:\n{}", run.output);
        for rank in 0..ranks {
            let line = format!("rank {rank}/{ranks}: {scenario} ok");
            assert!(
                run.output.contains(&line),
                "{test}: no `{line}` in\n{}",
                run.output
            );
        }
        println!(
            "{test}: {ranks} ranks ok in {:.1} s",
            run.took.as_secs_f64()
        );
    }
}

#[test]
fn all_reduce_broadcast_and_barrier_agree_on_every_rank() {
    every_rank_passes("collectives", "collectives");
}

#[test]
fn averaged_gradients_are_the_mean_and_identical_on_every_rank() {
    every_rank_passes("gradients", "gradients");
}

#[test]
fn sync_batch_norm_over_shards_equals_batch_norm_over_the_whole_batch() {
    every_rank_passes("sync-batch-norm", "sync-batch-norm");
}

#[test]
fn settings_that_differ_on_one_rank_give_every_rank_the_same_error_naming_them() {
    every_rank_passes("agree", "agree");
}

#[cfg(feature = "nccl")]
#[test]
fn an_nccl_id_and_its_failure_reach_every_rank() {
    every_rank_passes("nccl-id", "nccl-id");
}

/// The bound a lost rank must be detected within: the timeout plus start-up and
/// shut-down on a loaded 2-core machine.
const TIMEOUT_S: u64 = 2;
const BOUND: Duration = Duration::from_secs(30);

#[test]
fn a_rank_that_stops_responding_ends_the_others_with_a_timeout_error() {
    let test = "hang";
    let timeout = TIMEOUT_S.to_string();
    let args = ["hang", "--collective-timeout", &timeout];
    let Some(run) = launch(test, 2, &args, BOUND) else {
        return;
    };
    assert!(!run.ok, "{test}: the run succeeded:\n{}", run.output);
    let want = format!(
        "rank 0/2: error: all_reduce_sum of 1000 values did not complete within {TIMEOUT_S} s \
         on rank 0 of 2: another rank stopped responding"
    );
    assert!(
        run.output.contains(&want),
        "{test}: no `{want}` in\n{}",
        run.output
    );
    println!("{test}: ended in {:.1} s", run.took.as_secs_f64());
}

#[test]
fn a_rank_that_exits_mid_run_ends_the_others() {
    let test = "exit";
    for ranks in [2, 3] {
        // A timeout longer than the bound: mpirun itself must end the survivors.
        let Some(run) = launch(test, ranks, &["exit", "--collective-timeout", "600"], BOUND) else {
            return;
        };
        assert!(!run.ok, "{test}: the run succeeded:\n{}", run.output);
        assert!(
            !run.output.contains(": exit ok"),
            "{test}: a rank reported success:\n{}",
            run.output
        );
        println!(
            "{test}: {ranks} ranks ended in {:.1} s",
            run.took.as_secs_f64()
        );
    }
}

#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_one_of_several_ranks() {
    let out = Command::new(CHECK)
        .arg("collectives")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .expect("running tensorfit-dist-check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("this binary was built without MPI: rebuild with `--features mpi`"),
        "{stderr}"
    );
}

#[test]
fn one_process_without_a_launcher_is_a_world_of_one() {
    let out = Command::new(CHECK)
        .arg("gradients")
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .env_remove("PMI_SIZE")
        .output()
        .expect("running tensorfit-dist-check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("rank 0/1: gradients ok"), "{stdout}");
}
