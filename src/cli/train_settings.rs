//! The settings of `tensorfit train`: a new run takes them from its flags (defaults where
//! none is typed); a resumed run takes its own from its checkpoint, and a typed flag that
//! differs from them is refused, naming the flag and both values, rather than silently
//! training a different run.

use std::path::Path;

use anyhow::{bail, Result};
use tensorfit::nn::{Checkpoint, ModelDescription, RunSettings};

use super::check_task_length;
use super::train::TrainArgs;

/// This run's settings (see the module documentation).
/// `model` is the model `--model` names.
pub fn resolve(
    a: &TrainArgs,
    model: &ModelDescription,
    resumed: Option<(&Path, &Checkpoint)>,
) -> Result<RunSettings> {
    let from_flags = RunSettings {
        run_id: RunSettings::new_run_id(),
        batch: a.batch,
        seq_len: a.seq_len,
        tbptt: a.tbptt.unwrap_or(a.seq_len),
        tbptt_mode: a.tbptt_mode,
        lr: a.lr,
        seed: a.seed,
        eval_every: a.eval_every,
        eval_batch: a.eval_batch,
    };
    let Some((path, ck)) = resumed else {
        check(a, model, &from_flags)?;
        return Ok(from_flags);
    };
    let typed = |id: &str| a.given.iter().any(|g| g == id);
    if typed("model") {
        a.model
            .check_is(model, path, &ck.config, "a resumed run keeps its model")?;
    }
    let settings = match RunSettings::load(&ck.extra)? {
        Some(stored) => stored,
        None => {
            // Written before run settings were stored: only the seed was kept.
            let seed = ck.extra.get("seed").and_then(|s| s.parse().ok());
            errln!(
                "note: {} was written by an older tensorfit and keeps no run settings: continuing with batch {}, length {}, tbptt {}, learning rate {}, evaluation every {} steps on {} sequences{}",
                path.display(),
                from_flags.batch,
                from_flags.seq_len,
                from_flags.tbptt,
                from_flags.lr,
                from_flags.eval_every,
                from_flags.eval_batch,
                if seed.is_some() { ", and its own seed" } else { "" }
            );
            RunSettings {
                seed: seed.unwrap_or(a.seed),
                ..from_flags.clone()
            }
        }
    };
    refuse_changes(a, (&from_flags, &settings), &[], path)?;
    check(a, &ck.config, &settings)?;
    Ok(settings)
}

/// Refuses a resumed run's flag typed with another value than the run's own (`run`,
/// stored in the checkpoint `path`), naming each flag and both values: the run would
/// silently train with its own (the data's order depends on them).
/// `more` are further settings as (flag id, typed value, the run's value).
pub fn refuse_changes(
    a: &TrainArgs,
    (from_flags, run): (&RunSettings, &RunSettings),
    more: &[(&str, String, String)],
    path: &Path,
) -> Result<()> {
    let typed_values = [
        ("batch", from_flags.batch.to_string(), run.batch.to_string()),
        (
            "seq_len",
            from_flags.seq_len.to_string(),
            run.seq_len.to_string(),
        ),
        ("tbptt", from_flags.tbptt.to_string(), run.tbptt.to_string()),
        (
            "tbptt_mode",
            from_flags.tbptt_mode.name().to_string(),
            run.tbptt_mode.name().to_string(),
        ),
        ("lr", from_flags.lr.to_string(), run.lr.to_string()),
        ("seed", from_flags.seed.to_string(), run.seed.to_string()),
        (
            "eval_every",
            from_flags.eval_every.to_string(),
            run.eval_every.to_string(),
        ),
        (
            "eval_batch",
            from_flags.eval_batch.to_string(),
            run.eval_batch.to_string(),
        ),
    ];
    let typed = |id: &str| a.given.iter().any(|g| g == id);
    let differing: Vec<String> = typed_values
        .iter()
        .chain(more)
        .filter(|(id, typed_value, run_value)| typed(id) && typed_value != run_value)
        .map(|(id, typed_value, run_value)| {
            format!(
                "--{} {typed_value} (the run's is {run_value})",
                id.replace('_', "-")
            )
        })
        .collect();
    if !differing.is_empty() {
        bail!(
            "a resumed run keeps the settings it was started with, stored in {}: {} {}; drop {}, or start a new run without --resume",
            path.display(),
            differing.join(", "),
            if differing.len() == 1 { "differs" } else { "differ" },
            if differing.len() == 1 { "that flag" } else { "those flags" }
        );
    }
    Ok(())
}

/// Refuses a model no built-in task fits, and a length its task cannot have, naming the
/// flag (or the model file's key); counts of zero and a rate that is not positive are
/// refused as the flags are parsed.
fn check(a: &TrainArgs, cfg: &ModelDescription, s: &RunSettings) -> Result<()> {
    check_task_length(cfg, s.seq_len, &a.origin("seq_len"))
}
