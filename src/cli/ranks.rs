//! `train` under `mpirun` (docs/distributed.md): joining the launch's ranks, and what
//! differs on them — each rank trains on its rows of the global batch, only rank 0
//! prints and writes checkpoints, a stop (Ctrl-C, SIGTERM) on any rank is agreed on at
//! the next step's exchange, and every rank checks that all hold the same weights at the
//! end.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;
use tensorfit::core::HostTensor;
use tensorfit::data::RankBatch;
use tensorfit::distributed::{shard_rows, Ranks};
use tensorfit::nn::every_step::IGNORE_LABEL;
use tensorfit::nn::{HeadOn, ModelDescription, StepReport};
use tensorfit::{Batch, Runner};
use tensorfit_dist::AllReducePath;

use super::files_eval::Scores;
use super::interrupt::{Interrupts, Signal};

/// The flags of data-parallel training.
#[derive(Args, Clone, Debug, Default)]
pub struct RankArgs {
    /// Under mpirun: the longest a rank waits for the others at a collective before it
    /// ends the run (a rank died or hangs); default 300.
    #[arg(long, value_name = "SECONDS")]
    pub collective_timeout: Option<u64>,
}

/// The ranks of this launch, when there are several (`mpirun -np N`, N > 1); `batch`
/// is the global batch they share. A multi-rank launch of a build without MPI is refused.
pub fn join(args: &RankArgs, batch: usize) -> Result<Option<Ranks>> {
    let timeout = args.collective_timeout.map_or(
        tensorfit_dist::DEFAULT_COLLECTIVE_TIMEOUT,
        Duration::from_secs,
    );
    if args.collective_timeout == Some(0) {
        bail!("--collective-timeout must be at least 1 second");
    }
    let comm = tensorfit_dist::world(timeout)?;
    if comm.size() == 1 {
        return Ok(None);
    }
    Ok(Some(Ranks::new(comm, batch)?))
}

/// The rows this process plans and trains for: its shard of the global `batch`.
pub fn local_batch(ranks: &Option<Ranks>, batch: usize) -> usize {
    ranks.as_ref().map_or(batch, |r| r.rows().len())
}

/// Runs `print` on each rank in turn, rank 0 first, so that their outputs follow each
/// other. mpirun forwards each rank's output on its own, so long lines may still be cut
/// into each other; `mpirun --output-filename DIR` keeps each rank's in its own file.
pub fn in_turn(ranks: &mut Option<Ranks>, print: impl FnOnce() -> Result<()>) -> Result<()> {
    let Some(r) = ranks else {
        return print();
    };
    let (mut print, mut result) = (Some(print), Ok(()));
    for turn in 0..r.size() {
        if turn == r.rank() {
            if let Some(p) = print.take() {
                result = p();
            }
            std::io::stdout().flush()?;
        }
        r.comm().barrier()?;
    }
    result
}

/// Whether this process prints and writes files: one process, or rank 0.
pub fn is_root(ranks: &Option<Ranks>) -> bool {
    ranks.as_ref().is_none_or(|r| r.rank() == 0)
}

/// One training step on this rank's rows of the global batch `x`, `labels`, with the
/// gradients averaged over the ranks before the update.
pub fn train_step(
    run: &mut Runner,
    ranks: &mut Option<Ranks>,
    cfg: &ModelDescription,
    x: &HostTensor,
    labels: &[f32],
) -> Result<StepReport> {
    Ok(match ranks {
        Some(r) => {
            let (x, labels) = shard_rows(x, labels, cfg.loss.targets_per_row(), r.rows())?;
            run.train_batch_on_ranks(r, &Batch::new(x, labels))?
        }
        None => run.train_step(x, labels)?,
    })
}

/// The batches this process reads for the global batches `order`: all of them for one
/// process; on ranks, each rank's part of each (`tensorfit_data::Shard`), returned with
/// the parts.
pub fn reading_order(
    ranks: &Option<Ranks>,
    order: Vec<Vec<usize>>,
) -> (Vec<Vec<usize>>, Option<Vec<RankBatch>>) {
    match ranks {
        Some(r) => {
            let parts = r.shard().of_order(&order);
            let reading = parts.iter().map(|p| p.indices.clone()).collect();
            (reading, Some(parts))
        }
        None => (order, None),
    }
}

/// One training step of `train --data` on `batch`, read for `part` (this rank's part of
/// the global batch; `None` for one process).
pub fn data_step(
    run: &mut Runner,
    ranks: &mut Option<Ranks>,
    part: Option<&RankBatch>,
    batch: &Batch,
) -> Result<StepReport> {
    let (Some(r), Some(part)) = (ranks.as_mut(), part) else {
        return Ok(run.train_batch(batch)?);
    };
    let cfg = run.description();
    let labels = &batch.labels;
    // What this rank's loss is a mean over: its rows, or on every step the steps its
    // labels count (a stand-in row counts for nothing).
    let units = match (part.rows.is_empty(), cfg.head.on) {
        (true, _) => 0,
        (false, HeadOn::EveryStep) if cfg.loss.is_classification() => {
            labels.iter().filter(|&&l| l != IGNORE_LABEL).count()
        }
        (false, HeadOn::EveryStep) => labels.len(),
        (false, HeadOn::Sequence(_)) => part.rows.len(),
    };
    r.set_step(part.global, units);
    Ok(run.train_batch_on_ranks(r, batch)?)
}

/// Sums a validation's `scores` over the ranks, each of which scored its whole batches
/// (`Shard::whole_batches`): the scores of all the batches, as one process gets them.
pub fn sum_scores(ranks: &mut Option<Ranks>, scores: Scores) -> Result<Scores> {
    let Some(r) = ranks else {
        return Ok(scores);
    };
    let n = scores.sequences as f32;
    let mut totals = [scores.loss * n, scores.accuracy.unwrap_or(0.0) * n, n];
    r.sum(&mut totals)?;
    let all = totals[2].max(1.0);
    Ok(Scores {
        loss: totals[0] / all,
        accuracy: scores.accuracy.map(|_| totals[1] / all),
        sequences: totals[2] as usize,
    })
}

/// Before a step: the signal that stops the run now. One process stops at once; a rank
/// instead tells the others at this step's exchange ([`stop_after_step`]), so that all
/// ranks stop after the same step.
pub fn stop_before_step(ranks: &mut Option<Ranks>, interrupts: &Interrupts) -> Option<Signal> {
    let signal = interrupts.received();
    match ranks {
        Some(r) => {
            if let Some(s) = signal {
                r.ask_stop(s.number());
            }
            None
        }
        None => signal,
    }
}

/// After a step: the signal every rank agreed to stop for at its exchange, if any rank
/// received one.
pub fn stop_after_step(ranks: &Option<Ranks>) -> Option<Signal> {
    ranks
        .as_ref()
        .and_then(Ranks::agreed_stop)
        .map(Signal::from_number)
}

/// After the last step: tells the other ranks that this one ended (failing, as they do,
/// when a rank goes on stepping: `Ranks::end`), then fails unless every rank holds the
/// same weights; their hash.
pub fn check_weights(
    ranks: &mut Option<Ranks>,
    run: &mut Runner,
    step: u64,
) -> Result<Option<u64>> {
    let Some(r) = ranks else {
        return Ok(None);
    };
    Ok(Some(run.check_same_weights(r, step)?))
}

/// The ranks' part of `--json`'s summary: their number, whether their devices differed
/// (so that each step ended with every rank taking rank 0's state), the time in
/// collectives, and the weights' hash every rank checked.
pub fn describe(ranks: &Option<Ranks>, weights_hash: Option<u64>, out: &mut serde_json::Value) {
    if let Some(r) = ranks {
        out["ranks"] = json!(r.size());
        out["devices_differ"] = json!(r.devices_differ());
        out["communication_seconds"] = json!(r.communication().as_secs_f64());
    }
    if let Some(h) = weights_hash {
        out["weights_hash"] = json!(format!("{h:016x}"));
    }
}

/// The last thing a rank does: waits until every rank is done (rank 0 with its files and
/// output), so that a rank leaving early with a non-zero status (an agreed stop's 130)
/// does not make mpirun end rank 0 while it still writes.
pub fn finish(ranks: &mut Option<Ranks>) -> Result<()> {
    if let Some(r) = ranks {
        std::io::stdout().flush()?;
        r.comm().barrier()?;
    }
    Ok(())
}

/// Says each of `fallbacks` (a step moved to another plan or device) on stderr, unless
/// `json` (one process or rank 0 reports them in its summary); a rank other than 0 says
/// them with its rank, since its summary is not printed.
pub fn warn_fallbacks(ranks: &Option<Ranks>, json: bool, fallbacks: &[String]) {
    if json {
        return;
    }
    let who = match ranks {
        Some(r) if r.rank() > 0 => format!("rank {}: ", r.rank()),
        _ => String::new(),
    };
    for f in fallbacks {
        errln!("\n{who}warning: {f}");
    }
}

/// After the run has opened its device: every rank chooses with the others how the
/// gradients are summed (NCCL when all train on CUDA and can use it); rank 0 says why
/// all-CUDA ranks could not use NCCL, and which path an all-CUDA run takes.
pub fn choose_all_reduce(ranks: &mut Option<Ranks>, run: &Runner, quiet: bool) -> Result<()> {
    let Some(r) = ranks else {
        return Ok(());
    };
    let path = r.choose_all_reduce(run.device())?;
    if quiet || r.rank() > 0 {
        return Ok(());
    }
    match path {
        AllReducePath::Nccl => errln!("gradients summed over NCCL on the ranks' GPUs"),
        AllReducePath::Host(Some(why)) => errln!("note: {why}"),
        AllReducePath::Host(None) => {}
    }
    Ok(())
}
