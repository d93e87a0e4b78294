//! `tensorfit bench`: median time per training step or inference on the chosen device.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use tensorfit::nn::{BuiltinTask, OptimConfig};

use super::{
    at_least_one, begin, check_task_length, request, summary, DeviceArgs, Exit, JobMode, ModelArg,
    BENCH_DATA_SEED, UNTRAINED_SEED,
};

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    /// The model: a preset (seed) or a model description file.
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse, default_value = "seed")]
    model: ModelArg,
    #[arg(long, value_enum, default_value_t = JobMode::Train)]
    mode: JobMode,
    #[arg(long, default_value_t = super::TRAIN_BATCH, value_parser = at_least_one::<usize>)]
    batch: usize,
    #[arg(long, default_value_t = 50, value_parser = at_least_one::<usize>)]
    seq_len: usize,
    /// Truncated-BPTT length (training; defaults to the whole sequence).
    #[arg(long, value_parser = at_least_one::<usize>)]
    tbptt: Option<usize>,
    /// Timed repetitions after one warm-up (1 to 100000).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    iters: u32,
    #[command(flatten)]
    dev: DeviceArgs,
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> Result<Exit> {
    let cfg = a.model.load()?.model;
    check_task_length(&cfg, a.seq_len, "--seq-len")?;
    let tbptt = a.tbptt.unwrap_or(a.seq_len);
    let job = a.mode.job(a.batch, a.seq_len);
    let flops = job.model_flops(&cfg, tbptt);
    let req = request(cfg.clone(), job, tbptt, OptimConfig::default(), &a.dev)?;
    let params = tensorfit::Model::new(cfg.clone(), UNTRAINED_SEED)?.into_parameters();
    let mut run = begin(&req, &params, a.json)?;
    let data = BuiltinTask::for_model(&cfg, BENCH_DATA_SEED)?.batch(a.batch, a.seq_len)?;
    let train = a.mode == JobMode::Train;
    // Straight on the device: the timing is of the run, not of recovery snapshots.
    run.set_recovery(false);
    let mut once = || -> Result<()> {
        if train {
            run.train_step(&data.x, &data.labels)?;
        } else {
            run.evaluate(&data.x, &data.labels)?;
        }
        Ok(())
    };
    once()?;
    let mut ms = Vec::new();
    for i in 0..a.iters as usize {
        let t = Instant::now();
        once()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if !a.json && std::io::stderr().is_terminal() {
            err!("\rrun {}/{}: {:.1} ms", i + 1, a.iters, ms[i]);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let gflops = flops / median / 1e6;
    if a.json {
        let mut out = summary(&run);
        out["mode"] = json!(a.mode.name());
        out["ms_per_step"] = json!(median);
        out["gflops"] = json!(gflops);
        out["runs_ms"] = json!(ms);
        outln!("{out}");
    } else {
        if std::io::stderr().is_terminal() {
            errln!();
        }
        outln!(
            "{} {} batch {} length {}: median {median:.1} ms per {} ({:.1} model GFLOP/s) on {}, {}",
            a.model,
            a.mode.name(),
            a.batch,
            a.seq_len,
            if train { "training step" } else { "inference" },
            gflops,
            run.device(),
            run.strategy()
        );
    }
    Ok(Exit::Success)
}
