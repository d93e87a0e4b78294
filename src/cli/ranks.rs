//! `train` under `mpirun` (docs/distributed.md): joining the launch's ranks, and what
//! differs on them — each rank trains on its rows of the global batch, only rank 0
//! prints and writes checkpoints, and every rank checks that all hold the same weights
//! at the end.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use tensorfit::core::HostTensor;
use tensorfit::distributed::{shard_rows, Ranks};
use tensorfit::nn::{ModelDescription, StepReport};
use tensorfit::session::Session;

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

/// Refuses `train --data` under a launch of several ranks (not connected yet).
pub fn refuse_files() -> Result<()> {
    if let Some(launch) = tensorfit_dist::launcher()?.filter(|l| l.size > 1) {
        bail!(
            "train --data on {} ranks ({}={}): data-parallel training reads the built-in task only so far (docs/distributed.md); run --data as one process",
            launch.size,
            launch.var,
            launch.size
        );
    }
    Ok(())
}

/// One training step on this rank's rows of the global batch `x`, `labels`, with the
/// gradients averaged over the ranks before the update.
pub fn train_step(
    session: &mut Session,
    ranks: &mut Option<Ranks>,
    cfg: &ModelDescription,
    x: &HostTensor,
    labels: &[f32],
) -> Result<StepReport> {
    Ok(match ranks {
        Some(r) => {
            let (x, labels) = shard_rows(x, labels, cfg.loss.targets_per_row(), r.rows())?;
            r.set_device(session.trainer.device_info().kind);
            let report = session.train_step_exchanging(&x, &labels, r)?;
            if r.devices_differ() {
                r.align(&mut session.trainer)?;
            }
            report
        }
        None => session.train_step(x, labels)?,
    })
}

/// After the last step: fails unless every rank holds the same weights; their hash.
pub fn check_weights(
    ranks: &mut Option<Ranks>,
    session: &mut Session,
    step: u64,
) -> Result<Option<u64>> {
    let Some(r) = ranks else {
        return Ok(None);
    };
    let params = session.trainer.parameters()?;
    Ok(Some(r.check_same_weights(&params, step)?))
}
