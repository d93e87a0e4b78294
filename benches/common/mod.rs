//! The seed-network benchmark body shared by every device's bench: one training step
//! (forward + backward + Adam) at batch 32, length 50 (truncated BPTT 50), and inference
//! at batch 100, length 200.
//!
//! Besides criterion's own report, each benchmark first prints the median of a few timed
//! runs as milliseconds and model GFLOP/s (forward LSTM FLOPs = Σ over layers
//! 2·4·H·(I+H)·B·T; a training step counts 3× forward). Every timed call ends by reading
//! the loss (or the probabilities) back, which waits for the device, so the device's work
//! is inside the timed region.

use std::time::Instant;

use anyhow::Result;
use criterion::Criterion;
use tensorfit::core::Backend;
use tensorfit::nn::{Batch, ModelConfig, ParamStore, TemporalOrder, TrainOptions, Trainer};

fn trainer(backend: Box<dyn Backend>, chunk: usize) -> Result<Trainer> {
    let cfg = ModelConfig::seed();
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
fn median_ms(runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
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

fn report(name: &str, ms: f64, flops: f64) {
    println!(
        "{name}: median {ms:.1} ms, {:.1} model GFLOP/s",
        flops / ms / 1e6
    );
}

fn data(batch: usize, steps: usize) -> Result<Batch> {
    Ok(TemporalOrder::new(7).batch(batch, steps)?)
}

/// Runs both workloads on backends from `open` in the criterion group `name`.
pub fn seed_benches(
    c: &mut Criterion,
    name: &str,
    open: impl Fn() -> Result<Box<dyn Backend>>,
) -> Result<()> {
    let cfg = ModelConfig::seed();
    let mut group = c.benchmark_group(name);
    group.sample_size(10);

    let (b, t) = (32, 50);
    let mut tr = trainer(open()?, t)?;
    let batch = data(b, t)?;
    let ms = median_ms(5, || {
        tr.train_step(&batch.x, &batch.labels)?;
        Ok(())
    })?;
    report(
        "train step B=32 T=50",
        ms,
        3.0 * cfg.lstm_forward_flops(b, t),
    );
    group.bench_function("train_step_b32_t50", |bench| {
        bench.iter(|| tr.train_step(&batch.x, &batch.labels).map(|r| r.loss).ok())
    });

    let (b, t) = (100, 200);
    let mut tr = trainer(open()?, t)?;
    let batch = data(b, t)?;
    let ms = median_ms(5, || {
        tr.evaluate(&batch.x, &batch.labels)?;
        Ok(())
    })?;
    report("inference B=100 T=200", ms, cfg.lstm_forward_flops(b, t));
    group.bench_function("inference_b100_t200", |bench| {
        bench.iter(|| tr.evaluate(&batch.x, &batch.labels).map(|r| r.loss).ok())
    });
    group.finish();
    Ok(())
}
