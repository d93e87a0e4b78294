//! `tensorfit eval`: a model on held-out sequences of the built-in task, or on every
//! sequence of a data file (`--data`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use tensorfit::data::Labels;
use tensorfit::nn::{BuiltinTask, Job, ModelDescription, ParamStore};
use tensorfit::plan::format_seconds;

use super::data_args::DataArgs;
use super::files_eval;
use super::{
    at_least_one, check_task_length, load_model, open, print_memory, quality_text, summary,
    DeviceArgs, Exit, ModelArg,
};

#[derive(Args, Clone, Debug)]
pub struct EvalArgs {
    /// The model: a preset (seed, the default) or a model description file. Without
    /// --checkpoint its weights are untrained; with one it must be the checkpoint's.
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse)]
    model: Option<ModelArg>,
    /// A checkpoint written by `tensorfit train --save`.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    #[command(flatten)]
    dev: DeviceArgs,
    /// Sequences to evaluate (with --data: sequences per batch).
    #[arg(long, default_value_t = 100, value_parser = at_least_one::<usize>)]
    batch: usize,
    /// Time steps per sequence.
    #[arg(long, default_value_t = 200, conflicts_with = "data", value_parser = at_least_one::<usize>)]
    seq_len: usize,
    /// Seed of the held-out data.
    #[arg(long, default_value_t = 2, conflicts_with = "data")]
    seed: u64,
    #[command(flatten)]
    data: DataArgs,
    #[arg(long)]
    json: bool,
}

pub fn run(a: EvalArgs) -> Result<Exit> {
    let model = load_model(a.checkpoint.as_deref(), a.model.as_ref())?;
    if a.data.path().is_some() {
        return eval_files(&a, model.description().clone(), model.parameters());
    }
    check_task_length(model.description(), a.seq_len, "--seq-len")?;
    let job = Job::Eval {
        batch: a.batch,
        seq_len: a.seq_len,
    };
    let mut task = BuiltinTask::for_model(model.description(), a.seed)?;
    let mut run = open(&model, job, &a.dev, a.json)?;
    let data = task.batch(a.batch, a.seq_len)?;
    let t = Instant::now();
    let report = run.evaluate(&data.x, &data.labels)?;
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut out = summary(&run);
        out["loss"] = json!(report.loss);
        out["accuracy"] = json!(report.accuracy);
        out["perplexity"] = json!(report.perplexity);
        out["seconds"] = json!(secs);
        outln!("{out}");
    } else {
        errln!(
            "evaluated {} sequences of length {} in {}: {}",
            a.batch,
            a.seq_len,
            format_seconds(secs),
            quality_text(run.description(), report.loss, report.accuracy)
        );
        print_memory(&run);
    }
    Ok(Exit::Success)
}

/// `eval --data`: every sequence of the file, in padded batches grouped by length.
fn eval_files(a: &EvalArgs, cfg: ModelDescription, params: &ParamStore) -> Result<Exit> {
    let (files, order, mut run) = files_eval::start(
        &a.data,
        (cfg, params, a.checkpoint.as_deref()),
        Labels::Required,
        a.batch,
        &a.dev,
        a.json,
    )?;
    let t = Instant::now();
    let scores = files_eval::eval(&mut run, &files, order)?;
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut out = summary(&run);
        out["loss"] = json!(scores.loss);
        out["accuracy"] = json!(scores.accuracy);
        out["sequences"] = json!(scores.sequences);
        out["seconds"] = json!(secs);
        outln!("{out}");
    } else {
        errln!(
            "evaluated {} sequences of {} in {}: {}",
            scores.sequences,
            files.path.display(),
            format_seconds(secs),
            quality_text(run.description(), scores.loss, scores.accuracy)
        );
        print_memory(&run);
    }
    Ok(Exit::Success)
}
