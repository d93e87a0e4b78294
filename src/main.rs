//! The `tensorfit` command line. With no subcommand it trains the seed network on the
//! built-in task with the defaults of `tensorfit train`.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use tensorfit::nn::{
    AdamConfig, ModelConfig, ParamKind, ParamStore, TemporalOrder, TrainOptions, Trainer,
};

#[derive(Parser)]
#[command(
    name = "tensorfit",
    version,
    about = "Train a stacked LSTM on the device it fits on."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model on the built-in temporal-order task (the default command).
    Train(TrainArgs),
    /// Print a model's parameters (PyTorch names, shapes, counts).
    Model {
        /// Model preset.
        #[arg(long, default_value = "seed")]
        model: String,
    },
}

#[derive(Args, Clone)]
struct TrainArgs {
    /// Model preset (only `seed` today: 152 → 3 × LSTM 250 → BN → Dense 100 → BN → 6).
    #[arg(long, default_value = "seed")]
    model: String,
    /// Device: auto or cpu.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Sequences per minibatch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Time steps per sequence.
    #[arg(long, default_value_t = 20)]
    seq_len: usize,
    /// Truncated-BPTT length (gradients reach back this many steps; defaults to the
    /// whole sequence, which this task needs to be learnable).
    #[arg(long)]
    tbptt: Option<usize>,
    /// Optimizer steps.
    #[arg(long, default_value_t = 200)]
    steps: u64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f32,
    /// Seed for initialisation and data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Evaluate on held-out sequences every this many steps (0: only at the end).
    #[arg(long, default_value_t = 50)]
    eval_every: u64,
    /// Held-out sequences per evaluation.
    #[arg(long, default_value_t = 256)]
    eval_batch: usize,
    /// Write the trained weights (safetensors, PyTorch names) here.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Print one JSON object at the end instead of human output.
    #[arg(long)]
    json: bool,
}

impl Default for TrainArgs {
    fn default() -> Self {
        // The same defaults clap applies, so `tensorfit` alone equals `tensorfit train`.
        match Cli::parse_from(["tensorfit", "train"]).command {
            Some(Command::Train(a)) => a,
            _ => unreachable!("`train` parses to Command::Train"),
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        None => train(TrainArgs::default()),
        Some(Command::Train(a)) => train(a),
        Some(Command::Model { model }) => print_model(&model),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn preset(name: &str) -> Result<ModelConfig> {
    match name {
        "seed" => Ok(ModelConfig::seed()),
        other => bail!("unknown model `{other}`; available: seed"),
    }
}

fn print_model(name: &str) -> Result<()> {
    let cfg = preset(name)?;
    println!("{:<24} {:>12} {:>10}  kind", "tensor", "shape", "count");
    for spec in cfg.param_specs() {
        let kind = match spec.kind {
            ParamKind::Trainable => "trainable",
            ParamKind::RunningStat => "running statistic",
        };
        println!(
            "{:<24} {:>12} {:>10}  {kind}",
            spec.name,
            spec.shape.to_string(),
            spec.shape.numel()
        );
    }
    println!("trainable parameters: {}", cfg.trainable_parameters());
    Ok(())
}

fn train(a: TrainArgs) -> Result<()> {
    let cfg = preset(&a.model)?;
    if a.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let tbptt = a.tbptt.unwrap_or(a.seq_len);
    let opts = TrainOptions {
        tbptt,
        chunk: tbptt,
        micro_batch: None,
        adam: AdamConfig {
            lr: a.lr,
            ..AdamConfig::default()
        },
    };
    let backend = tensorfit::open_backend(&a.device)?;
    let params = ParamStore::init(&cfg, a.seed)?;
    let mut trainer = Trainer::new(backend, cfg.clone(), &params, opts)?;
    let mut data = TemporalOrder::new(a.seed.wrapping_mul(0x9E37_79B9).wrapping_add(1));
    let held_out = TemporalOrder::new(a.seed ^ 0xE7A1)
        .batch(a.eval_batch, a.seq_len)
        .context("making the held-out set")?;
    let flops = 3.0 * cfg.lstm_forward_flops(a.batch, tbptt.min(a.seq_len));
    if !a.json {
        eprintln!(
            "training `{}` ({} parameters) on {}: batch {}, length {}, tbptt {}, {} steps",
            a.model,
            cfg.trainable_parameters(),
            trainer.backend_name(),
            a.batch,
            a.seq_len,
            tbptt,
            a.steps
        );
    }
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut last_loss = f32::NAN;
    let mut last_eval = None;
    for step in 1..=a.steps {
        let batch = data.batch(a.batch, a.seq_len)?;
        let report = trainer
            .train_step(&batch.x, &batch.labels)
            .with_context(|| format!("training step {step}"))?;
        last_loss = report.loss;
        let ms = start.elapsed().as_secs_f64() * 1e3 / step as f64;
        let eval_now = step == a.steps || (a.eval_every > 0 && step % a.eval_every == 0);
        if eval_now {
            last_eval = Some(trainer.evaluate(&held_out.x, &held_out.labels)?);
        }
        if a.json {
            continue;
        }
        let line = format!(
            "step {step:>5}/{}  loss {:.4}  {ms:.0} ms/step  {:.1} GFLOP/s",
            a.steps,
            report.loss,
            flops / ms / 1e6
        );
        match (&last_eval, eval_now) {
            (Some(e), true) => eprintln!(
                "{}{line}  held-out loss {:.4} accuracy {:.1}%",
                if tty { "\r" } else { "" },
                e.loss,
                100.0 * e.accuracy
            ),
            _ if tty => {
                eprint!("\r{line}");
                std::io::stderr().flush().ok();
            }
            _ if step % 10 == 0 => eprintln!("{line}"),
            _ => {}
        }
    }
    let mem = trainer.memory();
    let (eval_loss, accuracy) = last_eval
        .map(|e| (e.loss, e.accuracy))
        .unwrap_or((f32::NAN, f32::NAN));
    if let Some(path) = &a.save {
        let mut meta = HashMap::new();
        meta.insert("model".to_string(), a.model.clone());
        meta.insert("step".to_string(), trainer.step().to_string());
        let bytes = trainer.parameters()?.to_safetensors("", meta)?;
        std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    let secs = start.elapsed().as_secs_f64();
    if a.json {
        let out = serde_json::json!({
            "device": trainer.backend_name(),
            "strategy": "whole",
            "steps": a.steps,
            "loss": last_loss,
            "eval_loss": eval_loss,
            "accuracy": accuracy,
            "seconds": secs,
            "measured_peak_bytes": mem.peak,
        });
        println!("{out}");
    } else {
        eprintln!(
            "done: {} steps in {secs:.1} s on {}; final loss {last_loss:.4}, held-out accuracy {:.1}%; peak device memory {:.1} MiB",
            a.steps,
            trainer.backend_name(),
            100.0 * accuracy,
            mem.peak as f64 / (1 << 20) as f64
        );
        if let Some(p) = &a.save {
            eprintln!("weights written to {}", p.display());
        }
    }
    Ok(())
}
