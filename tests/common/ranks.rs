//! Launching `tensorfit` on MPI ranks from the distributed tests (`tests/distributed*.rs`):
//! bounded in time, skipped (saying why) without the `mpi` feature or mpirun.

use std::time::Duration;

use serde_json::Value;
use tensorfit_testing::mpirun::Run;

use super::scratch;

pub const BIN: &str = env!("CARGO_BIN_EXE_tensorfit");

/// A launch that outlives this has hung: the test fails instead of waiting.
pub const BOUND: Duration = Duration::from_secs(300);

/// Why this build cannot launch ranks, if it cannot.
pub fn not_built() -> Option<&'static str> {
    (!cfg!(feature = "mpi"))
        .then_some("built without the `mpi` feature (cargo test --features mpi --test distributed)")
}

/// `train`'s flags for a short run of `model` on the CPU: batches of `batch` sequences of
/// `seq_len` steps, no evaluation but the last, of `eval_batch` sequences; then `extra`.
pub fn cpu_train<'a>(
    model: &'a str,
    (batch, seq_len, eval_batch): (&'a str, &'a str, &'a str),
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut v = vec![
        "--model",
        model,
        "--batch",
        batch,
        "--seq-len",
        seq_len,
        "--device",
        "cpu",
        "--eval-every",
        "0",
        "--eval-batch",
        eval_batch,
    ];
    v.extend_from_slice(extra);
    v
}

/// mpirun's arguments for `tensorfit command` on the ranks of each part
/// (`-np N₁ tensorfit command ARGS₁ : -np N₂ …`), with `env` (`NAME=VALUE`) exported to
/// every rank and a cache of this test run's own.
pub fn line(command: &str, parts: &[(usize, &[&str])], env: &[&str]) -> Vec<String> {
    let cache = format!("XDG_CACHE_HOME={}", scratch("cache").display());
    let mut line = vec!["-x".to_string(), cache];
    for e in env {
        line.extend(["-x".to_string(), e.to_string()]);
    }
    for (i, (ranks, args)) in parts.iter().enumerate() {
        if i > 0 {
            line.push(":".into());
        }
        line.extend(["-np", &ranks.to_string(), BIN, command].map(String::from));
        line.extend(args.iter().map(|a| a.to_string()));
    }
    line
}

/// `tensorfit command` on the ranks of each part, which must succeed; `None` when MPI is
/// unavailable (the skip is printed).
pub fn launch(test: &str, command: &str, parts: &[(usize, &[&str])]) -> Option<Run> {
    let line = line(command, parts, &[]);
    let run = tensorfit_testing::mpirun::launch(test, not_built(), &line, BOUND)?;
    assert!(run.ok, "{test}: {parts:?} failed:\n{}", run.output);
    Some(run)
}

/// The numbers under `key` of `v` (one, or a list).
pub fn numbers(v: &Value, key: &str) -> Vec<f32> {
    match &v[key] {
        Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap() as f32).collect(),
        x => vec![x.as_f64().unwrap_or(f64::NAN) as f32],
    }
}

/// The pid of the rank `rank` of a launch whose environment holds `mark`.
pub fn rank_pid(mark: &str, rank: usize) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let env = std::fs::read(e.path().join("environ")).ok()?;
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        let has = |v: &str| vars.contains(&v.as_bytes());
        (has(mark) && has(&want)).then_some(pid)
    })
}
