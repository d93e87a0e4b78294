//! The distributed tests' rank program: `mpirun -np N tensorfit-dist-check <scenario>
//! [--collective-timeout SECONDS]`. Each rank checks its results against what one
//! process computes, prints `rank R/N: <scenario> ok`, and exits 0; a failed check or
//! collective prints `rank R/N: error: …` and exits 1. Scenarios:
//!
//! - `collectives`: all-reduce (a buffer and a large one), broadcasts of bytes and f32
//!   from a non-zero root, barrier;
//! - `gradients`: [`GradientBucket::average`] equals the mean of every rank's gradients,
//!   bitwise the same on every rank (small and large buffers);
//! - `sync-batch-norm`: a batch split unevenly over the ranks gives the statistics and
//!   the input gradient of BatchNorm over the whole batch;
//! - `nccl-id`: a made-up NCCL id, and a failure to make one, reach every rank;
//! - `nccl`: every rank on its GPU (`cuda:{local rank}`) chooses NCCL with the others, and
//!   `collectives` passes over the NCCL communicator (the GPU check runs it on one rank;
//!   it fails where NCCL or a GPU is missing);
//! - `agree`: settings the same on every rank pass; then one that differs on the last
//!   rank (a value of several lines, of another length on each rank) gives every rank
//!   the same error, naming the setting, its line that differs and the ranks of each;
//! - `hang`: the last rank stops responding after one collective; the others must end
//!   with a timeout error;
//! - `exit`: the last rank exits after one collective; the others must not hang.
use std::time::Duration;

use tensorfit_dist::{
    agree, sync_backward_sums, sync_batch_stats, world, BatchStats, Communicator, GradientBucket,
    DEFAULT_COLLECTIVE_TIMEOUT,
};
#[cfg(feature = "nccl")]
use tensorfit_dist::{agree_path, launcher, nccl, AllReducePath, NcclCommunicator};

type Result<T> = std::result::Result<T, String>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (scenario, timeout) = match parse(&args) {
        Ok(parsed) => parsed,
        Err(why) => {
            eprintln!("error: {why}");
            std::process::exit(2);
        }
    };
    let mut comm = match world(timeout) {
        Ok(comm) => comm,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let who = format!("rank {}/{}", comm.rank(), comm.size());
    let outcome = match scenario.as_str() {
        // The NCCL communicator takes the world over (and finalises it when dropped).
        #[cfg(feature = "nccl")]
        "nccl" => nccl_collectives(comm),
        _ => {
            let outcome = run(&scenario, comm.as_mut());
            // Finalises MPI, unless a collective timed out (then the lost rank would
            // hold it).
            drop(comm);
            outcome
        }
    };
    match outcome {
        Ok(()) => println!("{who}: {scenario} ok"),
        Err(why) => {
            eprintln!("{who}: error: {why}");
            std::process::exit(1);
        }
    }
}

fn parse(args: &[String]) -> Result<(String, Duration)> {
    let usage = "usage: tensorfit-dist-check SCENARIO [--collective-timeout SECONDS]";
    match args {
        [scenario] => Ok((scenario.clone(), DEFAULT_COLLECTIVE_TIMEOUT)),
        [scenario, flag, seconds] if flag == "--collective-timeout" => {
            let s: f64 = seconds
                .parse()
                .map_err(|_| format!("--collective-timeout {seconds:?} is not seconds"))?;
            Duration::try_from_secs_f64(s)
                .map(|t| (scenario.clone(), t))
                .map_err(|e| format!("--collective-timeout {seconds}: {e}"))
        }
        _ => Err(usage.into()),
    }
}

fn run(scenario: &str, comm: &mut dyn Communicator) -> Result<()> {
    match scenario {
        "collectives" => collectives(comm),
        "gradients" => gradients(comm),
        "sync-batch-norm" => sync_batch_norm(comm),
        #[cfg(feature = "nccl")]
        "nccl-id" => nccl_id(comm),
        "agree" => agree_settings(comm),
        "hang" | "exit" => lose_a_rank(comm, scenario == "hang"),
        other => Err(format!("unknown scenario {other:?}")),
    }
}

fn dist(e: tensorfit_dist::DistError) -> String {
    e.to_string()
}

/// A deterministic value for element `i` of rank `rank`'s data (no generator needed).
fn value(rank: usize, i: usize) -> f32 {
    ((rank * 7919 + i) as f32 * 0.618).sin()
}

fn collectives(comm: &mut dyn Communicator) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    for n in [5, 300_007] {
        // Small integers: every summation order gives the exact sum.
        let mut v: Vec<f32> = (0..n).map(|i| ((rank + 1) * (i % 100)) as f32).collect();
        comm.all_reduce_sum(&mut v).map_err(dist)?;
        let want = |i: usize| ((size * (size + 1) / 2) * (i % 100)) as f32;
        if let Some(i) = (0..n).find(|&i| v[i] != want(i)) {
            return Err(format!(
                "all-reduce of {n}: element {i} is {}, not {}",
                v[i],
                want(i)
            ));
        }
    }
    let root = size - 1;
    let mut bytes = [rank as u8; 3];
    comm.broadcast_bytes(&mut bytes, root).map_err(dist)?;
    let mut floats = [rank as f32 + 0.5; 2];
    comm.broadcast_f32(&mut floats, root).map_err(dist)?;
    if bytes != [root as u8; 3] || floats != [root as f32 + 0.5; 2] {
        return Err(format!(
            "broadcast from {root}: got {bytes:?} and {floats:?}"
        ));
    }
    comm.barrier().map_err(dist)
}

fn gradients(comm: &mut dyn Communicator) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    // A large gradient too: MPI picks another algorithm for large buffers (a ring).
    let sizes = vec![7, 1000, 1, 300_000];
    let offsets: Vec<usize> = sizes
        .iter()
        .scan(0, |at, &n| {
            *at += n;
            Some(*at - n)
        })
        .collect();
    let mut grads: Vec<Vec<f32>> = sizes
        .iter()
        .zip(&offsets)
        .map(|(&n, &at)| (0..n).map(|i| value(rank, at + i)).collect())
        .collect();
    let mut bucket = GradientBucket::new(sizes.clone());
    let mut views: Vec<&mut [f32]> = grads.iter_mut().map(|g| g.as_mut_slice()).collect();
    bucket.average(comm, &mut views).map_err(dist)?;
    for (p, g) in grads.iter().enumerate() {
        for (i, &got) in g.iter().enumerate() {
            let want = (0..size)
                .map(|r| value(r, offsets[p] + i) as f64)
                .sum::<f64>()
                / size as f64;
            if (got as f64 - want).abs() > 1e-6 {
                return Err(format!("gradient {p}[{i}] is {got}, the mean is {want}"));
            }
        }
    }
    same_on_every_rank(comm, grads.concat().iter().map(|v| v.to_bits() as u64))
}

/// Fails unless `bits` hash to the same value as on rank 0.
fn same_on_every_rank(comm: &mut dyn Communicator, bits: impl Iterator<Item = u64>) -> Result<()> {
    // FNV-1a over the values' bits.
    let hash = bits.fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let mut root = hash.to_le_bytes();
    comm.broadcast_bytes(&mut root, 0).map_err(dist)?;
    if u64::from_le_bytes(root) == hash {
        Ok(())
    } else {
        Err(format!("results differ from rank 0's (hash {hash:x})"))
    }
}

/// The rows of a global batch of `batch` that rank `rank` of `size` holds (the first
/// `batch % size` ranks hold one more).
fn shard(batch: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
    let (base, extra) = (batch / size, batch % size);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

const EPS: f64 = 1e-5;

/// BatchNorm's input gradient for `x`'s rows from the global statistics and the global
/// sums of dy and dy·(x − mean) (gamma 1): PyTorch's `batch_norm_backward_elemt`.
fn input_gradient(
    x: &[f32],
    dy: &[f32],
    stats: &BatchStats,
    sum_dy: &[f32],
    sum_dy_xmu: &[f32],
) -> Vec<f64> {
    let channels = stats.mean.len();
    let n = stats.count as f64;
    x.iter()
        .zip(dy)
        .enumerate()
        .map(|(k, (&x, &dy))| {
            let c = k % channels;
            let invstd = 1.0 / (stats.var[c] as f64 + EPS).sqrt();
            let xmu = x as f64 - stats.mean[c] as f64;
            invstd
                * (dy as f64
                    - sum_dy[c] as f64 / n
                    - xmu * invstd * invstd * sum_dy_xmu[c] as f64 / n)
        })
        .collect()
}

/// Per-channel Σ dy and Σ dy·(x − mean) over `x`'s rows.
fn backward_sums(x: &[f32], dy: &[f32], mean: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let channels = mean.len();
    let (mut s, mut sx) = (vec![0.0f64; channels], vec![0.0f64; channels]);
    for (k, (&x, &dy)) in x.iter().zip(dy).enumerate() {
        let c = k % channels;
        s[c] += dy as f64;
        sx[c] += dy as f64 * (x as f64 - mean[c] as f64);
    }
    let f32s = |v: Vec<f64>| v.into_iter().map(|v| v as f32).collect();
    (f32s(s), f32s(sx))
}

fn sync_batch_norm(comm: &mut dyn Communicator) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let (batch, channels) = (10, 4);
    // Channel means far from zero: a sum-of-squares formula would lose the variance.
    let x: Vec<f32> = (0..batch * channels)
        .map(|k| 10.0 * (k % channels) as f32 + value(0, k))
        .collect();
    let dy: Vec<f32> = (0..batch * channels).map(|k| value(1, k)).collect();
    let rows = shard(batch, rank, size);
    let (xs, dys) = (
        &x[rows.start * channels..rows.end * channels],
        &dy[rows.start * channels..rows.end * channels],
    );

    let whole = BatchStats::of(&x, channels).map_err(dist)?;
    let local = BatchStats::of(xs, channels).map_err(dist)?;
    let synced = sync_batch_stats(comm, &local).map_err(dist)?;
    close("count", &[synced.count as f32], &[whole.count as f32], 0.0)?;
    close("mean", &synced.mean, &whole.mean, 1e-6)?;
    close("variance", &synced.var, &whole.var, 1e-5)?;

    let (whole_dy, whole_dy_xmu) = backward_sums(&x, &dy, &whole.mean);
    let (mut sum_dy, mut sum_dy_xmu) = backward_sums(xs, dys, &synced.mean);
    sync_backward_sums(comm, &mut sum_dy, &mut sum_dy_xmu).map_err(dist)?;
    close("sum of dy", &sum_dy, &whole_dy, 1e-5)?;
    close("sum of dy·(x − mean)", &sum_dy_xmu, &whole_dy_xmu, 1e-5)?;
    let got = input_gradient(xs, dys, &synced, &sum_dy, &sum_dy_xmu);
    let want = input_gradient(&x, &dy, &whole, &whole_dy, &whole_dy_xmu);
    let want = &want[rows.start * channels..rows.end * channels];
    let f32s = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<_>>();
    close("input gradient", &f32s(&got), &f32s(want), 1e-4)?;
    same_on_every_rank(
        comm,
        synced
            .mean
            .iter()
            .chain(&synced.var)
            .map(|v| v.to_bits() as u64),
    )
}

/// `got` within `rtol` of `want`, relative to `want`'s largest magnitude (at least 1).
fn close(what: &str, got: &[f32], want: &[f32], rtol: f64) -> Result<()> {
    let scale = want.iter().fold(1.0f64, |m, &v| m.max(v.abs() as f64));
    match got
        .iter()
        .zip(want)
        .position(|(&g, &w)| (g as f64 - w as f64).abs() > rtol * scale)
    {
        Some(i) => Err(format!(
            "{what}[{i}] is {}, one batch gives {}",
            got[i], want[i]
        )),
        None if got.len() == want.len() => Ok(()),
        None => Err(format!(
            "{what}: {} values, one batch has {}",
            got.len(),
            want.len()
        )),
    }
}

fn agree_settings(comm: &mut dyn Communicator) -> Result<()> {
    let (rank, size) = (comm.rank(), comm.size());
    let same = [("--batch", "8".to_string()), ("model", "a\nb".repeat(500))];
    agree(comm, &same).map_err(|e| format!("the same settings: {e}"))?;
    let last = rank + 1 == size;
    let model = format!(
        "[model]\nhidden = {}\n{}",
        if last { 128 } else { 16 },
        "x\n".repeat(rank * 300)
    );
    let differing = [("--batch", "8".to_string()), ("the model", model)];
    let err = match agree(comm, &differing) {
        Ok(()) => return Err("a model that differs on the last rank was agreed".into()),
        Err(e) => e.to_string(),
    };
    let others: Vec<String> = (0..size - 1).map(|r| r.to_string()).collect();
    let want = format!(
        "the model: line 2 differs: `hidden = 16` on rank{} {}, `hidden = 128` on rank {}; ",
        if size > 2 { "s" } else { "" },
        others.join(", "),
        size - 1
    );
    if !err.contains(&want) || err.contains("--batch") {
        return Err(format!("no `{want}` (and no --batch) in: {err}"));
    }
    // Every rank holds the same message.
    let mut bytes = err.clone().into_bytes();
    let mut len = [bytes.len() as f32];
    comm.broadcast_f32(&mut len, 0).map_err(dist)?;
    if len[0] as usize != bytes.len() {
        return Err(format!(
            "rank 0's message has {} bytes, this rank's {}",
            len[0],
            bytes.len()
        ));
    }
    let mine = bytes.clone();
    comm.broadcast_bytes(&mut bytes, 0).map_err(dist)?;
    if bytes != mine {
        return Err(format!("rank 0's message differs from this rank's: {err}"));
    }
    Ok(())
}

#[cfg(feature = "nccl")]
fn nccl_id(comm: &mut dyn Communicator) -> Result<()> {
    let root = comm.size() - 1;
    let made = std::array::from_fn(|i| (i * 3) as u8);
    let id = nccl::share_id(comm, root, || Ok(made)).map_err(dist)?;
    if id.0 != made {
        return Err("the NCCL id differs from the root's".into());
    }
    match nccl::share_id(comm, root, || Err("no libnccl here".into())) {
        Err(e) if e.to_string() == format!("NCCL unavailable: on rank {root}: no libnccl here") => {
            Ok(())
        }
        other => Err(format!("root's failure to make an id arrived as {other:?}")),
    }
}

#[cfg(feature = "nccl")]
fn nccl_collectives(mut comm: Box<dyn Communicator>) -> Result<()> {
    let path = agree_path(comm.as_mut(), true).map_err(dist)?;
    if path != AllReducePath::Nccl {
        return Err(format!(
            "every rank is on a GPU, yet NCCL was not chosen: {path:?}"
        ));
    }
    let ordinal = launcher()
        .map_err(dist)?
        .and_then(|l| l.local_rank)
        .unwrap_or(0);
    let mut nccl = NcclCommunicator::join(comm, ordinal).map_err(dist)?;
    collectives(&mut nccl)
}

fn lose_a_rank(comm: &mut dyn Communicator, hang: bool) -> Result<()> {
    let mut v = vec![1.0f32; 1000];
    comm.all_reduce_sum(&mut v).map_err(dist)?;
    if comm.rank() == comm.size() - 1 {
        if hang {
            // Stops responding, but long enough only for the others' timeout to end
            // the run (bounded, so a broken test leaves no process behind for long).
            std::thread::sleep(Duration::from_secs(60));
        } else {
            std::process::exit(3);
        }
    }
    for _ in 0..10 {
        comm.all_reduce_sum(&mut v).map_err(dist)?;
    }
    Err("the collectives completed without the lost rank".into())
}
