//! Resuming a data run (`train --data … --resume DIR|FILE`). With `--checkpoint-dir`, a
//! data run keeps `DIR/last.safetensors` ([`LAST_FILE`]): its latest state, written every
//! `--checkpoint-every` steps, when stopped by a signal and at the end, holding besides
//! the model, optimizer, schedule and settings the run's place in its data
//! ([`Position`], under [`POSITION_KEY`]). (`DIR/checkpoint.safetensors` holds the best
//! model validated.) A resumed run takes the stored settings, recomputes the epoch's
//! order from the seed, skips the batches already trained and continues, so that it ends
//! with the weights of a run that was never stopped. Its checkpoints keep the identity of
//! its data (`tensorfit_data::DataIdentities`): resuming on other data, or on a file that
//! changed, is refused ([`check_data`]).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use tensorfit::data::{DataIdentities, DataIdentity};
use tensorfit::nn::{Checkpoint, RunSettings};

use super::fit_watch::Watch;
use super::resume_kind;

/// The latest state's file name in a checkpoint directory.
pub const LAST_FILE: &str = "last.safetensors";

/// Where a data run is ([`tensorfit::TrainPosition`], kept under [`POSITION_KEY`]).
pub use tensorfit::{TrainPosition as Position, POSITION_KEY};

/// The position of a run watched by `watch`, about to train batch `batches_done` of
/// epoch `epoch`.
pub fn position_of(
    watch: &Watch,
    val_fraction: f64,
    (epoch, batches_done): (u64, u64),
) -> Position {
    Position {
        val_fraction,
        epoch,
        batches_done,
        best: watch.best,
        since_best: watch.since_best,
        loss_sum: watch.loss_sum,
        loss_count: watch.loss_count,
    }
}

/// A data run to resume: its checkpoint file and checkpoint, settings and position.
pub struct Resumed {
    pub loaded: (PathBuf, Checkpoint),
    pub settings: RunSettings,
    pub position: Position,
}

/// Reads `--resume PATH`: a checkpoint directory (its [`LAST_FILE`]) or a file.
pub fn load(path: &Path) -> Result<Resumed> {
    let file = match path.is_dir() {
        true => path.join(LAST_FILE),
        false => path.to_path_buf(),
    };
    if path.is_dir() && !file.exists() {
        resume_kind::refuse_builtin_dir(path)?;
    }
    let shown = file.display();
    let ck = Checkpoint::load(&file).context("--resume")?;
    let not_data_run = |what: &str| {
        anyhow!(
            "--resume {shown}: holds no {what}: it is not the latest state of a `train --data` run (start a new run from its weights with --init)"
        )
    };
    let position = Position::load(&ck.extra)
        .with_context(|| format!("--resume {shown}"))?
        .ok_or_else(|| resume_kind::not_latest_state(&file, &ck))?;
    let settings = RunSettings::load(&ck.extra)
        .with_context(|| format!("--resume {shown}"))?
        .ok_or_else(|| not_data_run("run settings"))?;
    Ok(Resumed {
        loaded: (file, ck),
        settings,
        position,
    })
}

/// Refuses to resume `r` on data other than the data it trained on (`now`: this run's
/// `--data` and `--val`), naming what differs; the same content at another path is taken,
/// with a note. A checkpoint written before the identities were kept is resumed with a
/// warning that its data cannot be checked.
pub fn check_data(r: &Resumed, now: &DataIdentities) -> Result<()> {
    let shown = r.loaded.0.display();
    let Some(run) =
        DataIdentities::load(&r.loaded.1.extra).with_context(|| format!("--resume {shown}"))?
    else {
        errln!(
            "warning: {shown} was written by an older tensorfit and keeps no identity of its data: whether --data {} is the data the run trained on cannot be checked",
            now.data.path.display()
        );
        return Ok(());
    };
    let new_run = format!(
        "or start a new run from these weights with --init {}",
        r.loaded.0.display()
    );
    let pairs: [(&str, Option<&DataIdentity>, Option<&DataIdentity>); 2] = [
        ("--data", Some(&run.data), Some(&now.data)),
        ("--val", run.val.as_ref(), now.val.as_ref()),
    ];
    for (flag, run, now) in pairs {
        match (run, now) {
            (None, None) => {}
            (Some(run), None) => bail!(
                "the run resumed from {shown} validated on --val {}: give it again ({new_run})",
                run.path.display()
            ),
            (None, Some(now)) => bail!(
                "the run resumed from {shown} validated on a part of its --data (--val-fraction), not on --val {}: drop --val ({new_run})",
                now.path.display()
            ),
            (Some(run), Some(now)) => {
                let differences = now.differences(run);
                if !differences.is_empty() {
                    bail!(
                        "{flag} {} is not the data the run resumed from {shown} trained on ({}): it has {}; give the run's {flag} {}, {new_run}",
                        now.path.display(),
                        run.path.display(),
                        differences.join(", "),
                        run.path.display()
                    );
                }
                if now.path != run.path {
                    errln!(
                        "note: {flag} {} holds the same content as the run's {} (moved or copied): continuing",
                        now.path.display(),
                        run.path.display()
                    );
                }
            }
        }
    }
    Ok(())
}
