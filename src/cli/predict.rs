//! `tensorfit predict`: a trained model on the user's own inputs (a tensor `input`, or
//! any data file with `--data`).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::{ArgGroup, Args};
use serde_json::json;
use tensorfit::core::HostTensor;
use tensorfit::nn::atomic_file::write_atomic;
use tensorfit::nn::safetensors_file::SafetensorsFile;
use tensorfit::nn::{InputSpec, Job, ModelDescription, ParamStore};
use tensorfit::plan::format_bytes;

use super::data_args::{ignored_labels, DataArgs};
use super::files_eval;
use super::predictions_file::output_name;
use super::{
    at_least_one, claim_output, load_model, open, print_memory, refuse_overwriting, summary,
    DeviceArgs, Exit, ModelArg,
};

#[derive(Args, Clone, Debug)]
#[command(group(ArgGroup::new("inputs").args(["input", "data"]).required(true)))]
pub struct PredictArgs {
    /// A checkpoint written by `tensorfit train --save` or `tensorfit import`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// The model the checkpoint must hold (a preset or a description file); not needed,
    /// the checkpoint carries its model.
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse)]
    model: Option<ModelArg>,
    /// safetensors file with a tensor `input` of shape [batch, time, features] (F32 or
    /// F64, read as f32).
    #[arg(long, conflicts_with = "data")]
    input: Option<PathBuf>,
    /// Where to write the tensor `probabilities` (a regression's `predictions`):
    /// [batch, classes], one row per sequence (with --data in file order, and the
    /// sequences' ids as a JSON list in the file's metadata under `ids`); with a head on
    /// every step one row per step, batch-first [batch, time, classes] as PyTorch's
    /// `pad_packed_sequence(batch_first=True)` gives them: with --data, time is the
    /// longest sequence, every step at or past a sequence's end holds 0, and the I64
    /// tensor `lengths` [batch] holds each sequence's length.
    #[arg(long)]
    output: PathBuf,
    /// With --data: sequences per batch.
    #[arg(long, default_value_t = 100, requires = "data", value_parser = at_least_one::<usize>)]
    batch: usize,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    dev: DeviceArgs,
    #[arg(long)]
    json: bool,
}

pub fn run(a: PredictArgs) -> Result<Exit> {
    let _output_lock = claim_output("--output", &a.output)?;
    let inputs = [
        ("--input", a.input.as_deref()),
        ("--data", a.data.path()),
        ("--checkpoint", Some(a.checkpoint.as_path())),
    ];
    refuse_overwriting("--output", &a.output, "the probabilities", &inputs)?;
    let model = load_model(Some(&a.checkpoint), a.model.as_ref())?;
    let Some(input_path) = &a.input else {
        return predict_files(&a, model.description().clone(), model.parameters());
    };
    if let InputSpec::Tokens { .. } = model.description().input {
        bail!(
            "--input {}: --input takes dense features [batch, time, features], and the model of --checkpoint {} reads token ids: give them with --data (a file of `tokens` [N, T], a .tsv or a text)",
            input_path.display(),
            a.checkpoint.display()
        );
    }
    // The header first: the shape is known (and checked) before any data is read.
    let mut input = SafetensorsFile::open(input_path)?;
    let entry = input
        .tensor("input")
        .with_context(|| format!("{} has no tensor `input`", input_path.display()))?;
    let d = entry.shape.clone();
    let features = model.description().input_features();
    if d.len() != 3 || d[2] != features || d[0] == 0 || d[1] == 0 {
        bail!(
            "--input {}: `input` has shape {d:?}, expected [batch, time, {features}] with batch and time ≥ 1 (the model reads {features} features per step)",
            input_path.display()
        );
    }
    let (batch, steps, f) = (d[0], d[1], d[2]);
    let job = Job::Eval {
        batch,
        seq_len: steps,
    };
    let mut run = open(&model, job, &a.dev, a.json)?;
    drop(model);
    // The one host copy of the input, time-major [time, batch, F], filled a sequence step
    // at a time straight from the file.
    let mut tm = Vec::new();
    tm.try_reserve_exact(batch * steps * f).map_err(|_| {
        anyhow!(
            "the input needs {} of host memory, more than this process can have",
            format_bytes((batch * steps * f * 4) as u64)
        )
    })?;
    tm.resize(batch * steps * f, 0.0f32);
    input.read_f32_rows("input", f, |i, row| {
        let (b, t) = (i / steps, i % steps);
        if let Some(k) = row.iter().position(|v| !v.is_finite()) {
            return Err(tensorfit::core::Error::input(format!(
                "`input` contains NaN or Inf at [{b}, {t}, {k}]"
            )));
        }
        let dst = (t * batch + b) * f;
        tm[dst..dst + f].copy_from_slice(row);
        Ok(())
    })?;
    let x = HostTensor::new([steps, batch, f], tm)?;
    let probs = batch_first(run.predict(&x)?)?;
    let name = output_name(&run.description().loss);
    let mut out = ParamStore::new();
    out.insert(name, probs);
    let bytes = out.to_safetensors("", Default::default())?;
    write_atomic(&a.output, &bytes)?;
    if a.json {
        outln!("{}", summary(&run));
    } else {
        errln!(
            "{name} of {batch} sequences written to {}",
            a.output.display()
        );
        print_memory(&run);
    }
    Ok(Exit::Success)
}

/// `predict --data`: every sequence of the file, in padded batches grouped by length.
fn predict_files(a: &PredictArgs, cfg: ModelDescription, params: &ParamStore) -> Result<Exit> {
    let labels = ignored_labels(&cfg);
    let (files, order, mut run) = files_eval::start(
        &a.data,
        (cfg, params, Some(a.checkpoint.as_path())),
        labels,
        a.batch,
        &a.dev,
        a.json,
    )?;
    let scores = files_eval::predict(&mut run, &files, order, &a.output)?;
    if a.json {
        let mut out = summary(&run);
        out["sequences"] = json!(scores.sequences);
        outln!("{out}");
    } else {
        errln!(
            "{} of {} sequences of {} written to {}",
            match scores.accuracy {
                Some(_) => "probabilities",
                None => "predictions",
            },
            scores.sequences,
            files.path.display(),
            a.output.display()
        );
        print_memory(&run);
    }
    Ok(Exit::Success)
}

/// A head on every step's outputs `[T, B, C]` (time-major, as the model computes them)
/// batch-first `[B, T, C]`, as `--input` is given and `--data` writes them; `[B, C]` as
/// it is.
fn batch_first(probs: HostTensor) -> Result<HostTensor> {
    let &[steps, batch, width] = probs.shape.dims() else {
        return Ok(probs);
    };
    let mut out = vec![0f32; probs.data.len()];
    for (i, row) in probs.data.chunks_exact(width).enumerate() {
        let (t, b) = (i / batch, i % batch);
        let at = (b * steps + t) * width;
        out[at..at + width].copy_from_slice(row);
    }
    Ok(HostTensor::new([batch, steps, width], out)?)
}
