//! `tensorfit import`: a checkpoint from a PyTorch state dict (`save_file(model.state_dict(),
//! ...)`) of the model `--model` describes, with fresh optimizer state, ready for `eval`,
//! `predict` or `train --resume`.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;
use tensorfit::nn::{import_state_dict, Checkpoint, ParamStore};

use super::{claim_output, refuse_overwriting, Exit, ModelArg};

#[derive(Args, Clone, Debug)]
pub struct ImportArgs {
    /// The model the weights belong to: a preset (seed) or a model description file.
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse)]
    model: ModelArg,
    /// The state dict: a safetensors file of PyTorch's names (F32, F16, BF16 or F64).
    #[arg(long, value_name = "FILE.safetensors")]
    weights: PathBuf,
    /// Where to write the checkpoint.
    #[arg(long, value_name = "FILE.safetensors")]
    output: PathBuf,
    /// Print one JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
}

pub fn run(a: ImportArgs) -> Result<Exit> {
    let weights = [("--weights", Some(a.weights.as_path()))];
    refuse_overwriting("--output", &a.output, "the checkpoint", &weights)?;
    let _output_lock = claim_output("--output", &a.output)?;
    let model = a.model.load()?.model;
    let params = import_state_dict(&model.param_specs()?, &a.weights)?;
    let tensors = params.len();
    let ck = Checkpoint {
        config: model,
        params,
        optimizer: ParamStore::new(),
        step: 0,
        extra: HashMap::new(),
    };
    ck.save(&a.output)?;
    let trainable = ck.config.trainable_parameters()?;
    if a.json {
        outln!(
            "{}",
            json!({"output": a.output, "tensors": tensors, "trainable_parameters": trainable})
        );
    } else {
        errln!(
            "{tensors} tensors ({trainable} trainable parameters) of --model {} from {} written to {} (step 0, optimizer state fresh)",
            a.model,
            a.weights.display(),
            a.output.display()
        );
    }
    Ok(Exit::Success)
}
