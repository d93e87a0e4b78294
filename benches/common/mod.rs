//! The seed-network benchmark body shared by every device's bench: one training step
//! (forward + backward + Adam) at batch 32, length 50 (truncated BPTT 50), and inference
//! at batch 100, length 200.
//!
//! Besides criterion's own report, each benchmark first prints the median of a few timed
//! runs as milliseconds and model GFLOP/s (forward LSTM FLOPs = Σ over layers
//! 2·4·H·(I+H)·B·T; a training step counts 3× forward). Every timed call ends by reading
//! the loss (or the probabilities) back, which waits for the device, so the device's work
//! is inside the timed region.
//!
//! [`flags`] and [`programs`] serve the benches run by hand, without criterion.

// (Each bench uses part of this module.)
#![allow(dead_code)]

pub mod flags;
pub mod programs;

use std::time::Instant;

use anyhow::Result;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use tensorfit::core::Backend;
use tensorfit::nn::{
    Batch, Job, ModelDescription, ParamStore, TemporalOrder, TrainOptions, Trainer,
};

fn trainer(backend: Box<dyn Backend>, chunk: usize) -> Result<Trainer> {
    let cfg = ModelDescription::seed();
    let opts = TrainOptions {
        tbptt: chunk,
        chunk,
        ..TrainOptions::default()
    };
    Ok(Trainer::new(
        backend,
        cfg.clone(),
        &ParamStore::init(&cfg, 1)?,
        opts,
    )?)
}

/// Median milliseconds of `runs` calls after one warm-up call (which also compiles any
/// GPU pipelines).
pub fn median_ms(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[runs / 2])
}

/// One workload: `step` on a fresh trainer (truncated BPTT = `steps`) and one batch of
/// `batch` × `steps`, timed for the printed figures (`label`, with `flops` model FLOPs
/// per call) and then by criterion as `id`. `step` returns the loss it read back.
fn workload(
    group: &mut BenchmarkGroup<'_, WallTime>,
    backend: Box<dyn Backend>,
    (batch, steps): (usize, usize),
    (id, label): (&str, &str),
    flops: f64,
    step: fn(&mut Trainer, &Batch) -> tensorfit::core::Result<f32>,
) -> Result<()> {
    let mut tr = trainer(backend, steps)?;
    let data = TemporalOrder::new(7).batch(batch, steps)?;
    let ms = median_ms(5, || {
        step(&mut tr, &data)?;
        Ok(())
    })?;
    println!(
        "{label}: median {ms:.1} ms, {:.1} model GFLOP/s",
        flops / ms / 1e6
    );
    group.bench_function(id, |bench| bench.iter(|| step(&mut tr, &data).ok()));
    Ok(())
}

/// Runs both workloads on backends from `open` in the criterion group `name`; a failure
/// is printed and ends the process with status 1.
pub fn seed_benches(c: &mut Criterion, name: &str, open: impl Fn() -> Result<Box<dyn Backend>>) {
    if let Err(e) = try_seed_benches(c, name, open) {
        eprintln!("{name} benchmark failed: {e:#}");
        std::process::exit(1);
    }
}

fn try_seed_benches(
    c: &mut Criterion,
    name: &str,
    open: impl Fn() -> Result<Box<dyn Backend>>,
) -> Result<()> {
    let cfg = ModelDescription::seed();
    let train_b32_t50 = Job::Train {
        batch: 32,
        seq_len: 50,
        eval: None,
    };
    let infer_b100_t200 = Job::Eval {
        batch: 100,
        seq_len: 200,
    };
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    workload(
        &mut group,
        open()?,
        (32, 50),
        ("train_step_b32_t50", "train step B=32 T=50"),
        train_b32_t50.model_flops(&cfg, 50),
        |tr, b| tr.train_step(&b.x, &b.labels).map(|r| r.loss),
    )?;
    workload(
        &mut group,
        open()?,
        (100, 200),
        ("inference_b100_t200", "inference B=100 T=200"),
        infer_b100_t200.model_flops(&cfg, 200),
        |tr, b| tr.evaluate(&b.x, &b.labels).map(|r| r.loss),
    )?;
    group.finish();
    Ok(())
}
