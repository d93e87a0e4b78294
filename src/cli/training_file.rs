//! A description file's `[training]` table as `tensorfit train` flags. Its keys are the
//! flags that set up a run, in snake_case (`lr`, `clip_norm`, `warmup_steps`, ...); each
//! value is checked by its flag's own parser, and a flag typed on the command line
//! overrides the file's value. Errors name the file, line and key.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Command, FromArgMatches};
use tensorfit::nn::{TrainingEntry, TrainingValue};

use super::optim_args::OptimArgs;
use super::train::TrainArgs;

/// The `train` flags of a run's shape and length that `[training]` takes, besides every
/// optimizer flag (devices, files and output stay on the command line).
const RUN_KEYS: [&str; 9] = [
    "batch",
    "seq_len",
    "tbptt",
    "tbptt_mode",
    "steps",
    "lr",
    "seed",
    "eval_every",
    "eval_batch",
];

/// Every key `[training]` takes.
pub fn keys() -> Vec<String> {
    let optim = OptimArgs::augment_args(Command::new("train"));
    RUN_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(optim.get_arguments().map(|a| a.get_id().to_string()))
        .collect()
}

/// `a` with the settings of `entries` (from the file `path`) under the flags typed on
/// the command line. `a.argv` holds what was typed after `train`.
pub fn apply(a: &TrainArgs, path: &Path, entries: &[TrainingEntry]) -> Result<TrainArgs> {
    let command = TrainArgs::augment_args(Command::new("train")).args_override_self(true);
    let keys = keys();
    let mut flags: Vec<OsString> = Vec::new();
    let mut from_file = Vec::new();
    for e in entries {
        let at = format!(
            "{}:{}:{}: `training.{}`",
            path.display(),
            e.line,
            e.column,
            e.key
        );
        if !keys.contains(&e.key) {
            bail!(
                "{}:{}:{}: unknown key `training.{}`; `[training]` takes {}",
                path.display(),
                e.line,
                e.column,
                e.key,
                keys.join(", ")
            );
        }
        let flag = format!("--{}", e.key.replace('_', "-"));
        let switch = command
            .get_arguments()
            .find(|arg| arg.get_id() == e.key.as_str())
            .is_some_and(|arg| !arg.get_action().takes_values());
        let given: Vec<String> = match (&e.value, switch) {
            (TrainingValue::Bool(true), true) => vec![flag],
            (TrainingValue::Bool(false), true) => Vec::new(),
            (TrainingValue::Text(_), true) => bail!("{at} must be true or false"),
            (TrainingValue::Bool(_), false) => {
                bail!("{at} must be a number or a string, not true/false")
            }
            // One word, so that a negative number is not read as a flag.
            (TrainingValue::Text(t), false) => vec![format!("{flag}={t}")],
        };
        // Each value alone first, so that its error is about it and names its line.
        if let Err(err) = command
            .clone()
            .try_get_matches_from(std::iter::once("train".to_string()).chain(given.iter().cloned()))
        {
            let rendered = err.render().to_string();
            let why = rendered.lines().next().unwrap_or_default();
            bail!("{at} = {}: {}", e.value, why.trim_start_matches("error: "));
        }
        if a.given.contains(&e.key) {
            continue;
        }
        flags.extend(given.into_iter().map(OsString::from));
        from_file.push((e.key.clone(), at));
    }
    let argv = std::iter::once(OsString::from("train"))
        .chain(flags)
        .chain(a.argv.iter().cloned());
    let m = command
        .try_get_matches_from(argv)
        .map_err(|e| anyhow!("{}", e.render().to_string().trim_end()))?;
    let mut merged = TrainArgs::from_arg_matches(&m)?;
    merged.given = a.given.clone();
    merged.argv = a.argv.clone();
    merged.from_file = from_file;
    Ok(merged)
}
