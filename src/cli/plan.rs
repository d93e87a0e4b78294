//! `tensorfit plan`: the memory plan of a job on every device, and the choice.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use tensorfit::nn::Job;
use tensorfit::plan::format_bytes;
use tensorfit::session::{decide, format_seconds, Choice};

use super::{request, DeviceArgs, Exit, JobMode, Model};

#[derive(Args, Clone, Debug)]
pub struct PlanArgs {
    #[arg(long, value_enum, default_value_t = Model::Seed)]
    model: Model,
    #[arg(long, value_enum, default_value_t = JobMode::Train)]
    mode: JobMode,
    #[arg(long, default_value_t = 100)]
    batch: usize,
    #[arg(long, default_value_t = 2000)]
    seq_len: usize,
    /// Truncated-BPTT length (training).
    #[arg(long, default_value_t = 50)]
    tbptt: usize,
    #[command(flatten)]
    dev: DeviceArgs,
    /// Also list every tensor of the chosen plan.
    #[arg(long)]
    full: bool,
    #[arg(long)]
    json: bool,
}

pub fn run(a: PlanArgs) -> Result<Exit> {
    let cfg = a.model.config();
    let job = match a.mode {
        JobMode::Train => Job::Train {
            batch: a.batch,
            seq_len: a.seq_len,
            eval: None,
        },
        JobMode::Infer => Job::Eval {
            batch: a.batch,
            seq_len: a.seq_len,
        },
    };
    let req = request(cfg, job, a.tbptt, 1e-3, &a.dev)?;
    let t = Instant::now();
    let decision = decide(&req)?;
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        outln!("{}", decision.to_json());
    } else {
        out!("{}", decision.table());
        if let Some(Choice { plan, .. }) = decision.chosen() {
            outln!("\nplan of the choice:");
            out!("{}", plan.table(if a.full { usize::MAX } else { 12 }));
        } else if decision.candidates.iter().any(|c| c.fits) {
            // Only a device that is used when asked for fits.
            outln!("\n{}", decision.nothing_fits());
        } else if let Some(smallest) = decision
            .candidates
            .iter()
            .min_by_key(|c| c.estimated_peak_bytes)
        {
            outln!(
                "\nnothing fits: the smallest plan needs {} ({} on {})",
                format_bytes(smallest.estimated_peak_bytes),
                smallest.strategy,
                smallest.device
            );
            if a.mode == JobMode::Train {
                outln!("training memory depends on --batch and --tbptt; gradient accumulation over micro-batches is not offered because the model has BatchNorm in training mode (it would change the batch statistics)");
            }
        }
        outln!("planned in {}", format_seconds(secs));
    }
    Ok(if decision.chosen.is_none() {
        Exit::NothingFits
    } else {
        Exit::Success
    })
}
