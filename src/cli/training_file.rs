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

/// Setting `id` as messages name it: where the model file gave it (`from_file`, as
/// [`apply_to`] returns it), else its flag.
pub fn origin(from_file: &[(String, String)], id: &str) -> String {
    from_file.iter().find(|(key, _)| key == id).map_or_else(
        || format!("--{}", id.replace('_', "-")),
        |(_, at)| at.clone(),
    )
}

/// What was typed after a subcommand (filled in after parsing): the ids of the flags
/// given, and the words, parsed again under a model file's `[training]` settings.
#[derive(Clone, Debug, Default)]
pub struct Typed {
    pub given: Vec<String>,
    pub argv: Vec<OsString>,
}

/// `a` with the settings of `entries` (from the file `path`) under the flags typed on
/// the command line. `a.argv` holds what was typed after `train`.
pub fn apply(a: &TrainArgs, path: &Path, entries: &[TrainingEntry]) -> Result<TrainArgs> {
    let typed = Typed {
        given: a.given.clone(),
        argv: a.argv.clone(),
    };
    let (mut merged, from_file) = apply_to::<TrainArgs>("train", &typed, path, entries)?;
    merged.given = typed.given;
    merged.argv = typed.argv;
    merged.from_file = from_file;
    Ok(merged)
}

/// Subcommand `name`'s arguments `A` with the settings of `entries` (from the file
/// `path`) under the flags `typed` on its command line, and where each setting taken from
/// the file stands. Every key is checked as `train` takes it; the keys `A` has no flag for
/// (`tensorfit plan` has no `--steps`: they do not change a plan) are left out.
pub fn apply_to<A: Args + FromArgMatches>(
    name: &'static str,
    typed: &Typed,
    path: &Path,
    entries: &[TrainingEntry],
) -> Result<(A, Vec<(String, String)>)> {
    let train = TrainArgs::augment_args(Command::new("train")).args_override_self(true);
    let command = A::augment_args(Command::new(name)).args_override_self(true);
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
        // A flag typed on the command line wins over the file's value, even one its
        // parser would refuse.
        if typed.given.contains(&e.key) {
            continue;
        }
        let flag = format!("--{}", e.key.replace('_', "-"));
        let switch = train
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
        // A typed flag also wins over a value that cannot go with it (`plan --data` takes
        // its length from the file).
        let arg = command
            .get_arguments()
            .find(|arg| arg.get_id() == e.key.as_str());
        let taken = arg.is_some_and(|arg| {
            !command
                .get_arg_conflicts_with(arg)
                .iter()
                .any(|c| typed.given.iter().any(|g| g == c.get_id().as_str()))
        });
        // Each value alone first, as `train` and this command take it, so that its error
        // is about it and names its line.
        let checks = std::iter::once(&train).chain(arg.is_some().then_some(&command));
        for check in checks {
            let words = std::iter::once(check.get_name().to_string()).chain(given.iter().cloned());
            if let Err(err) = check.clone().try_get_matches_from(words) {
                let rendered = err.render().to_string();
                let why = rendered.lines().next().unwrap_or_default();
                bail!("{at} = {}: {}", e.value, why.trim_start_matches("error: "));
            }
        }
        if !taken {
            continue;
        }
        flags.extend(given.into_iter().map(OsString::from));
        from_file.push((e.key.clone(), at));
    }
    let argv = std::iter::once(OsString::from(name))
        .chain(flags)
        .chain(typed.argv.iter().cloned());
    let m = command
        .try_get_matches_from(argv)
        .map_err(|e| anyhow!("{}", e.render().to_string().trim_end()))?;
    Ok((A::from_arg_matches(&m)?, from_file))
}
