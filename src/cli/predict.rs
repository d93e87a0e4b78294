//! `tensorfit predict`: a trained model on the user's own inputs.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tensorfit::core::HostTensor;
use tensorfit::nn::atomic_file::{check_writable, same_file, write_atomic};
use tensorfit::nn::{Job, ParamStore};

use super::{begin, load_model, print_memory, request, summary, DeviceArgs, Exit, Model};

#[derive(Args, Clone, Debug)]
pub struct PredictArgs {
    /// A checkpoint written by `tensorfit train --save`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// safetensors file with a tensor `input` of shape [batch, time, features] (F32).
    #[arg(long)]
    input: PathBuf,
    /// Where to write the tensor `probabilities` [batch, classes].
    #[arg(long)]
    output: PathBuf,
    #[command(flatten)]
    dev: DeviceArgs,
    #[arg(long)]
    json: bool,
}

pub fn run(a: PredictArgs) -> Result<Exit> {
    check_writable(&a.output).context("--output")?;
    for (flag, path) in [("--input", &a.input), ("--checkpoint", &a.checkpoint)] {
        if same_file(&a.output, path) {
            bail!(
                "--output {} is the {flag} file: writing the probabilities there would destroy it",
                a.output.display()
            );
        }
    }
    let (cfg, params) = load_model(Some(&a.checkpoint), Model::Seed)?;
    let (inputs, _) = ParamStore::load(&a.input, "")?;
    let x = inputs
        .get("input")
        .with_context(|| format!("{} has no tensor `input`", a.input.display()))?;
    let d = x.shape.dims();
    if d.len() != 3 || d[2] != cfg.input || d[0] == 0 || d[1] == 0 {
        bail!(
            "`input` has shape {}, expected [batch, time, {}] with batch and time ≥ 1",
            x.shape,
            cfg.input
        );
    }
    if x.data.iter().any(|v| !v.is_finite()) {
        bail!("`input` contains NaN or Inf");
    }
    let (batch, steps) = (d[0], d[1]);
    // [batch, time, F] → time-major [time, batch, F].
    let f = cfg.input;
    let mut tm = vec![0.0f32; x.data.len()];
    for b in 0..batch {
        for t in 0..steps {
            let src = (b * steps + t) * f;
            let dst = (t * batch + b) * f;
            tm[dst..dst + f].copy_from_slice(&x.data[src..src + f]);
        }
    }
    let x = HostTensor::new([steps, batch, f], tm)?;
    let job = Job::Eval {
        batch,
        seq_len: steps,
    };
    let req = request(cfg, job, steps, 1e-3, &a.dev)?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    let probs = session.trainer.predict(&x)?;
    let mut out = ParamStore::new();
    out.insert("probabilities", probs);
    let bytes = out.to_safetensors("", Default::default())?;
    write_atomic(&a.output, &bytes)?;
    if a.json {
        outln!("{}", summary(&session));
    } else {
        errln!(
            "probabilities of {batch} sequences written to {}",
            a.output.display()
        );
        print_memory(&session);
    }
    Ok(Exit::Success)
}
