//! `tensorfit train`: trains on the built-in task, with checkpoints and resume.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;
use tensorfit::nn::atomic_file::check_writable;
use tensorfit::nn::{Checkpoint, Job, ParamStore, TemporalOrder};
use tensorfit::session::Session;

use super::{
    begin, check_host_memory, check_task, checkpoint_file, print_memory, request, summary,
    DeviceArgs, Exit, Model,
};

#[derive(Args, Clone, Debug)]
pub struct TrainArgs {
    /// Model preset.
    #[arg(long, value_enum, default_value_t = Model::Seed)]
    model: Model,
    #[command(flatten)]
    dev: DeviceArgs,
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
    /// Write a checkpoint (safetensors, PyTorch names, optimizer state) here at the end.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Keep DIR/checkpoint.safetensors up to date during training (written atomically).
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// With --checkpoint-dir: write a checkpoint every this many steps.
    #[arg(long, default_value_t = 50)]
    checkpoint_every: u64,
    /// Continue from a checkpoint file, or from DIR/checkpoint.safetensors: its model,
    /// optimizer state, step, data position and seed; then train --steps more steps.
    #[arg(long, value_name = "FILE|DIR")]
    resume: Option<PathBuf>,
    /// Print one JSON object at the end instead of human output.
    #[arg(long)]
    json: bool,
    /// The ids of the flags typed on the command line (filled in after parsing).
    #[arg(skip)]
    pub given: Vec<String>,
}

pub fn run(a: TrainArgs) -> Result<Exit> {
    if a.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let (cfg, params, resumed) = match &a.resume {
        Some(p) => {
            // The parameters go to the session; the rest of the checkpoint is used below.
            let mut ck = Checkpoint::load(&checkpoint_file(p))?;
            let params = std::mem::take(&mut ck.params);
            (ck.config.clone(), params, Some(ck))
        }
        None => {
            let cfg = a.model.config();
            let params = ParamStore::init(&cfg, a.seed)?;
            (cfg, params, None)
        }
    };
    check_task(&cfg)?;
    // Every output is checked before the first step: a run that cannot save is refused
    // now, not after hours of training.
    if let Some(path) = &a.save {
        check_writable(path).context("--save")?;
    }
    if let Some(dir) = &a.checkpoint_dir {
        prepare_checkpoint_dir(dir)?;
    }
    let tbptt = a.tbptt.unwrap_or(a.seq_len);
    let job = Job::Train {
        batch: a.batch,
        seq_len: a.seq_len,
        eval: Some((a.eval_batch, a.seq_len)),
    };
    let req = request(cfg.clone(), job, tbptt, a.lr, &a.dev)?;
    check_host_memory(&[(a.batch, a.seq_len), (a.eval_batch, a.seq_len)])?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    // A resumed run continues the data stream and keeps the held-out set of its seed.
    let extra = |k: &str| -> Option<u64> { resumed.as_ref()?.extra.get(k)?.parse().ok() };
    let seed = extra("seed").unwrap_or(a.seed);
    let mut data = TemporalOrder::new(
        extra("data_rng").unwrap_or(seed.wrapping_mul(0x9E37_79B9).wrapping_add(1)),
    );
    if let Some(ck) = &resumed {
        session.trainer.restore_optimizer(&ck.optimizer, ck.step)?;
    }
    let held_out = TemporalOrder::new(seed ^ 0xE7A1)
        .batch(a.eval_batch, a.seq_len)
        .context("making the held-out set")?;
    let save = |session: &mut Session, data: &TemporalOrder, path: &Path| -> Result<()> {
        let mut ck = session.trainer.checkpoint()?;
        ck.extra
            .insert("data_rng".into(), data.rng_state().to_string());
        ck.extra.insert("seed".into(), seed.to_string());
        ck.save(path)?;
        Ok(())
    };
    let mut losses = Vec::new();
    let flops = 3.0 * cfg.lstm_forward_flops(a.batch, tbptt.min(a.seq_len));
    let first = session.trainer.step() + 1;
    let last = session.trainer.step() + a.steps;
    if !a.json {
        errln!(
            "training ({} parameters): batch {}, length {}, tbptt {}, steps {first}..={last}",
            cfg.trainable_parameters(),
            a.batch,
            a.seq_len,
            tbptt
        );
    }
    let tty = std::io::stderr().is_terminal();
    let start_time = Instant::now();
    let mut last_loss = f32::NAN;
    let mut last_eval = None;
    for step in first..=last {
        let batch = data.batch(a.batch, a.seq_len)?;
        let seen = session.fallbacks.len();
        let report = session
            .train_step(&batch.x, &batch.labels)
            .with_context(|| format!("training step {step}"))?;
        if !a.json {
            for f in &session.fallbacks[seen..] {
                errln!("\nwarning: {f}");
            }
        }
        last_loss = report.loss;
        losses.push(report.loss);
        if let Some(dir) = &a.checkpoint_dir {
            if a.checkpoint_every > 0 && (step % a.checkpoint_every == 0 || step == last) {
                save(&mut session, &data, &checkpoint_file(dir))?;
            }
        }
        let done = step - first + 1;
        let ms = start_time.elapsed().as_secs_f64() * 1e3 / done as f64;
        let eval_now = step == last || (a.eval_every > 0 && step % a.eval_every == 0);
        if eval_now {
            last_eval = Some(session.evaluate(&held_out.x, &held_out.labels)?);
        }
        if a.json {
            continue;
        }
        let line = format!(
            "step {step:>5}/{last}  loss {:.4}  {ms:.0} ms/step  {:.1} GFLOP/s",
            report.loss,
            flops / ms / 1e6
        );
        match (&last_eval, eval_now) {
            (Some(e), true) => errln!(
                "{}{line}  held-out loss {:.4} accuracy {:.1}%",
                if tty { "\r" } else { "" },
                e.loss,
                100.0 * e.accuracy
            ),
            _ if tty => err!("\r{line}"),
            _ if done % 10 == 0 => errln!("{line}"),
            _ => {}
        }
    }
    let (eval_loss, accuracy) = last_eval
        .map(|e| (e.loss, e.accuracy))
        .unwrap_or((f32::NAN, f32::NAN));
    if let Some(path) = &a.save {
        save(&mut session, &data, path)?;
    }
    let secs = start_time.elapsed().as_secs_f64();
    if a.json {
        let mut out = summary(&session);
        out["loss"] = json!(last_loss);
        out["eval_loss"] = json!(eval_loss);
        out["accuracy"] = json!(accuracy);
        out["steps"] = json!(a.steps);
        out["losses"] = json!(losses);
        out["seconds"] = json!(secs);
        outln!("{out}");
    } else {
        errln!(
            "done: {} steps in {secs:.1} s; final loss {last_loss:.4}, held-out accuracy {:.1}%",
            a.steps,
            100.0 * accuracy
        );
        print_memory(&session);
        if let Some(p) = &a.save {
            errln!("checkpoint written to {}", p.display());
        }
    }
    Ok(Exit::Success)
}

/// Creates `dir` if needed and checks that a checkpoint can be written in it.
fn prepare_checkpoint_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--checkpoint-dir {}: is a file, not a directory",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--checkpoint-dir: creating {}", dir.display()))?;
    check_writable(&checkpoint_file(dir)).context("--checkpoint-dir")?;
    Ok(())
}
