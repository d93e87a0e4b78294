//! What a shape inside a plan's bound costs against the exact plan of that shape (issue
//! 30: within 10%, interleaved medians): training steps and evaluations of `--shape` on a
//! trainer planned for `--bound` (`Trainer::with_bound`, as `train --data` plans) and on
//! one planned for exactly `--shape` (`Trainer::with_layout`), from the same state, timed
//! in turns so that the machine's drift hits both alike. Two models: an LSTM of 2 × 64
//! units over 16 features with a BatchNorm head on the last step (whole batches), and the
//! same over padded batches (`TrainOptions::padded`, random lengths in `1..=T`, so the
//! masked kernels run). Both trainers run the same batches; the bound's does not plan,
//! allocate or pad.
//!
//! Prints a Markdown table: per model and phase the median of `--rounds` turns (after
//! two warm-ups, which build each shape's programs) on each trainer, and their ratio.
//!
//!   cargo bench --bench bound_shape -- --rounds 200 --bound 32:120 --shape 3:10

mod common;

use std::time::Instant;

use anyhow::Result;
use common::flags::{median, sizes, Flags};
use tensorfit::core::{Activation, Backend, HostTensor, Layout};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    InputSpec, Job, ModelDescription, OptimConfig, ParamStore, Program, ProgramKey, Rng, SeedShape,
    TrainOptions, Trainer,
};
use tensorfit::plan::{Limits, MemoryPlan, ProgramSpec};

const FEATURES: usize = 16;

/// The plan of `keys` for the CPU backend, as the engine's `plan_job` makes it.
fn plan(model: &ModelDescription, opts: &TrainOptions, keys: &[ProgramKey]) -> Result<Layout> {
    let programs = keys
        .iter()
        .map(|&k| Program::build(model, &opts.optim, k))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let specs: Vec<ProgramSpec<'_>> = programs.iter().map(Program::spec).collect();
    let limits = Limits::from(&CpuBackend::new().info());
    Ok(MemoryPlan::new(&specs, limits)?.layout())
}

/// Training (and evaluating) batches of at most `batch` × `steps`.
fn job((batch, steps): (usize, usize)) -> Job {
    Job::Train {
        batch,
        seq_len: steps,
        eval: Some((batch, steps)),
    }
}

/// A batch of `shape` (`[T, B, F]` normal inputs, zero past each length), its labels, and
/// with `padded` random lengths in `1..=T`.
struct Batch {
    x: HostTensor,
    labels: Vec<f32>,
    lengths: Option<Vec<f32>>,
}

fn batch((b, t): (usize, usize), padded: bool, rng: &mut Rng) -> Result<Batch> {
    let lengths: Vec<usize> = (0..b)
        .map(|_| if padded { rng.int_inclusive(1, t) } else { t })
        .collect();
    let mut x = vec![0.0; t * b * FEATURES];
    for s in 0..t {
        for r in (0..b).filter(|&r| s < lengths[r]) {
            let at = (s * b + r) * FEATURES;
            x[at..at + FEATURES]
                .iter_mut()
                .for_each(|v| *v = rng.normal());
        }
    }
    Ok(Batch {
        x: HostTensor::new([t, b, FEATURES], x)?,
        labels: (0..b).map(|_| rng.int_inclusive(0, 2) as f32).collect(),
        lengths: padded.then(|| lengths.iter().map(|&l| l as f32).collect()),
    })
}

/// One training step and one evaluation of `d` on `t`: their microseconds.
fn time(t: &mut Trainer, d: &Batch) -> Result<(f64, f64)> {
    let lengths = d.lengths.as_deref();
    let started = Instant::now();
    t.train_step_at(&d.x, &d.labels, lengths)?;
    let train = started.elapsed().as_secs_f64() * 1e6;
    let started = Instant::now();
    t.evaluate_at(&d.x, &d.labels, lengths)?;
    Ok((train, started.elapsed().as_secs_f64() * 1e6))
}

fn main() -> Result<()> {
    let flags = Flags::parse(&[
        ("--rounds", "a count"),
        ("--bound", "batch:steps"),
        ("--shape", "batch:steps"),
    ])?;
    let rounds: usize = flags.get("--rounds", 200)?;
    let [bb, bt] = sizes(
        "--bound",
        &flags.get("--bound", "32:120".to_string())?,
        "batch:steps",
    )?;
    let [sb, st] = sizes(
        "--shape",
        &flags.get("--shape", "3:10".to_string())?,
        "batch:steps",
    )?;
    let (bound, small) = ((bb, bt), (sb, st));
    anyhow::ensure!(sb <= bb && st <= bt, "--shape must lie inside --bound");
    let mut model = SeedShape {
        features: FEATURES,
        hidden: 64,
        layers: 2,
        dense: 5,
        classes: 3,
        activation: Activation::Tanh,
    }
    .description();
    model.input = InputSpec::Dense { features: FEATURES };
    println!("| {small:?} on a plan for | model | phase | bound µs | exact µs | bound / exact |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for padded in [false, true] {
        let opts = TrainOptions {
            tbptt: 40,
            chunk: 40,
            padded,
            optim: OptimConfig::adam(0.001),
            ..TrainOptions::default()
        };
        let params = ParamStore::init(&model, 4)?;
        let bound_layout = plan(&model, &opts, &opts.bound_programs(&model, job(bound)))?;
        let exact_layout = plan(&model, &opts, &opts.job_programs(&model, job(small)))?;
        let cpu = || Box::new(CpuBackend::new());
        let mut on_bound = Trainer::with_bound(
            cpu(),
            model.clone(),
            &params,
            opts.clone(),
            bound_layout,
            job(bound),
        )?;
        let mut exact = Trainer::with_layout(cpu(), model.clone(), &params, opts, exact_layout)?;
        let mut rng = Rng::new(5);
        let batches = (0..8)
            .map(|_| batch(small, padded, &mut rng))
            .collect::<Result<Vec<_>>>()?;
        let mut runs = (Vec::new(), Vec::new());
        for round in 0..rounds + 2 {
            let d = &batches[round % batches.len()];
            let (b, e) = (time(&mut on_bound, d)?, time(&mut exact, d)?);
            if round >= 2 {
                runs.0.push(b);
                runs.1.push(e);
            }
        }
        let what = if padded { "padded" } else { "whole" };
        for (phase, pick) in [
            (
                "train step",
                (|r: &(f64, f64)| r.0) as fn(&(f64, f64)) -> f64,
            ),
            ("evaluation", |r: &(f64, f64)| r.1),
        ] {
            let b = median(runs.0.iter().map(pick).collect());
            let e = median(runs.1.iter().map(pick).collect());
            println!(
                "| {bound:?} | LSTM 2×64, {what} | {phase} | {b:.1} | {e:.1} | {:.3} |",
                b / e
            );
        }
    }
    Ok(())
}
