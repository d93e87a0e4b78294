//! Which run a checkpoint continues: one on the built-in task (`train --resume`) or one
//! on the user's files (`train --data … --resume`). Resuming one as the other is refused
//! with what the run was and what to pass, instead of failing on a file the other kind
//! keeps (`last.safetensors`), on a model no built-in task fits, or, worse, training a
//! data run's model on the built-in task.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Error, Result};
use tensorfit::checkpoint_dir::CHECKPOINT_FILE;
use tensorfit::nn::{Checkpoint, RunSettings};

use super::fit_resume::{Position, LAST_FILE, POSITION_KEY};
use super::train::DATA_POSITION;

/// The kind of run a checkpoint is a state of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The built-in task's: it keeps the task's data position.
    Builtin,
    /// A data run's latest state (with its data position) or best model (run settings
    /// without the built-in task's data position).
    Data,
}

/// What `ck` is a state of; `None` for a checkpoint of no run (imported, or written
/// before runs kept their settings).
fn kind(ck: &Checkpoint) -> Option<Kind> {
    if ck.extra.contains_key(DATA_POSITION) {
        return Some(Kind::Builtin);
    }
    if ck.extra.contains_key(POSITION_KEY) {
        return Some(Kind::Data);
    }
    match RunSettings::load(&ck.extra) {
        Ok(Some(_)) => Some(Kind::Data),
        _ => None,
    }
}

/// " on FILE" for a data run that stored its file, else "".
fn on_data(ck: &Checkpoint) -> (String, String) {
    let data = RunSettings::load(&ck.extra)
        .ok()
        .flatten()
        .and_then(|s| s.data);
    match data {
        Some(d) => (
            format!(" on {}", d.path.display()),
            format!("--data {}", d.path.display()),
        ),
        None => (String::new(), "--data and the run's file".to_string()),
    }
}

/// Refuses `train --resume PATH` without `--data` when PATH is a data run's: its
/// checkpoint directory (which keeps `last.safetensors`). A file is checked once loaded
/// ([`refuse_data_checkpoint`]).
pub fn refuse_data_run_without_data(resume: &Path) -> Result<()> {
    let last = resume.join(LAST_FILE);
    if !resume.is_dir() || !last.exists() {
        return Ok(());
    }
    // A directory a run on the built-in task took over (--overwrite) still holds the
    // data run's latest state: its checkpoint says whose directory it is.
    let checkpoint = Checkpoint::load(&resume.join(CHECKPOINT_FILE));
    if checkpoint.is_ok_and(|ck| kind(&ck) == Some(Kind::Builtin)) {
        return Ok(());
    }
    let ck = Checkpoint::load(&last).context("--resume")?;
    let (on, data) = on_data(&ck);
    let epochs = RunSettings::load(&ck.extra)
        .ok()
        .flatten()
        .and_then(|s| Some(s.data?.epochs));
    let epoch = match (Position::load(&ck.extra).ok().flatten(), epochs) {
        (Some(p), Some(n)) if p.epoch >= n => format!(", {n} of {n} epochs done"),
        (Some(p), Some(n)) => format!(", in epoch {} of {n}", p.epoch + 1),
        (Some(p), None) => format!(", in epoch {}", p.epoch + 1),
        (None, _) => String::new(),
    };
    bail!(
        "--resume {}: the latest state of a `train --data` run{on} (step {}{epoch}), not a run on the built-in task: continue it with --resume {} {data}",
        resume.display(),
        ck.step,
        resume.display()
    )
}

/// Refuses `train --resume FILE` without `--data` when FILE (loaded as `ck`) is a data
/// run's state: the run continues with its data.
pub fn refuse_data_checkpoint(file: &Path, ck: &Checkpoint) -> Result<()> {
    if kind(ck) != Some(Kind::Data) {
        return Ok(());
    }
    let (on, data) = on_data(ck);
    let shown = file.display();
    if ck.extra.contains_key(POSITION_KEY) {
        bail!(
            "--resume {shown}: the latest state of a `train --data` run{on} (step {}), not a run on the built-in task: continue it with --resume {shown} {data}",
            ck.step
        );
    }
    Err(best_model(file, ck))
}

/// The error for a data run's best model (`checkpoint.safetensors` of its directory)
/// given to `--resume`: the run continues from its latest state.
fn best_model(file: &Path, ck: &Checkpoint) -> Error {
    let (on, data) = on_data(ck);
    let dir = file.parent().filter(|d| d.join(LAST_FILE).exists());
    let how = match dir {
        Some(d) => format!(
            "continue the run from its latest state with --resume {} {data}",
            d.display()
        ),
        None => format!(
            "start a new run from these weights with --init {} {data}",
            file.display()
        ),
    };
    anyhow!(
        "--resume {}: the best model of a `train --data` run{on} (step {}), not the latest state it resumes from: {how}",
        file.display(),
        ck.step
    )
}

/// Refuses `train --data … --resume DIR` when DIR keeps no latest state of a data run but
/// the checkpoint of a run on the built-in task; anything else is left to the caller
/// (which names the missing file).
pub fn refuse_builtin_dir(dir: &Path) -> Result<()> {
    let file = dir.join(CHECKPOINT_FILE);
    let Ok(ck) = Checkpoint::load(&file) else {
        return Ok(());
    };
    match kind(&ck) {
        Some(Kind::Builtin) => Err(builtin_run(dir, &ck)),
        _ => Ok(()),
    }
}

/// Why `train --data … --resume` cannot continue the checkpoint `file` (`ck`), which
/// holds no data position: the run it is a state of, and what to pass instead.
pub fn not_latest_state(file: &Path, ck: &Checkpoint) -> Error {
    match kind(ck) {
        Some(Kind::Builtin) => builtin_run(file, ck),
        Some(Kind::Data) => best_model(file, ck),
        None => anyhow!(
            "--resume {}: holds no data position (`{POSITION_KEY}`): it is not the latest state of a `train --data` run (start a new run from its weights with --init)",
            file.display()
        ),
    }
}

/// The error for a built-in task's run given to `train --data … --resume`.
fn builtin_run(resume: &Path, ck: &Checkpoint) -> Error {
    let shown = resume.display();
    anyhow!(
        "--resume {shown}: a run on the built-in task (step {}), not a `train --data` run: continue it with --resume {shown} without --data, or train on your data from its weights with --init {shown}",
        ck.step
    )
}
