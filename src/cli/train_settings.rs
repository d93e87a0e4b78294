//! The settings of `tensorfit train`: a new run takes them from its flags (defaults where
//! none is typed); a resumed run takes its own from its checkpoint, and a typed flag that
//! differs from them is refused, naming the flag and both values, rather than silently
//! training a different run.
//!
//! Which flags a run keeps: every one that changes what it trains on, in which order, how
//! or for how long — the model, `--batch`, `--seq-len`, `--tbptt`, `--tbptt-mode`, `--lr`,
//! `--seed`, `--eval-every`, `--eval-batch` ([`RunSettings`]); the optimizer, clipping,
//! warm-up and schedule flags (`OptimSettings`, see `optim_args`); with `--data`, the
//! validation (`--val-fraction`, `--val`), `--epochs`, `--stop-patience`,
//! `--max-seq-len`, `--cut-long`, `--reset-state` and `--batch-order` ([`DataSettings`]). Flags that change
//! neither the weights nor the data may differ: the device and its memory (`--device`,
//! `--device-memory`, `--margin`), `--read-ahead` (memory only), the outputs and how often
//! they are written (`--save`, `--checkpoint-dir`, `--checkpoint-every`, `--overwrite`,
//! `--json`), `--collective-timeout`, and the built-in task's `--steps` (steps more).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use tensorfit::data::{BatchOrder, DataIdentities};
use tensorfit::nn::atomic_file::same_file;
use tensorfit::nn::{Checkpoint, DataSettings, ModelDescription, RunSettings};

use super::check_task_length;
use super::fit_resume::Resumed;
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
        data: None,
    };
    let Some((path, ck)) = resumed else {
        check(a, model, &from_flags)?;
        return Ok(from_flags);
    };
    refuse_other_model(a, Some(model), (path, ck))?;
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

/// Refuses `--model` typed for a resumed run when it is not the model of its checkpoint
/// `ck` (at `path`), naming both (as `--init` does); `model` is `--model`'s, if loaded.
fn refuse_other_model(
    a: &TrainArgs,
    model: Option<&ModelDescription>,
    (path, ck): (&Path, &Checkpoint),
) -> Result<()> {
    if !a.given.iter().any(|g| g == "model") {
        return Ok(());
    }
    let loaded;
    let model = match model {
        Some(m) => m,
        None => {
            loaded = a.model.load()?.model;
            &loaded
        }
    };
    let advice = "drop --model: a resumed run keeps its own";
    a.model.check_is(model, path, &ck.config, advice)
}

/// The settings of a new data run (`--data`) that every run does not have, from the
/// flags: `data` is the file opened.
pub fn data_settings(a: &TrainArgs, data: &Path) -> DataSettings {
    DataSettings {
        path: absolute(data),
        val: a.fit.val.as_deref().map(absolute),
        epochs: a.fit.epochs,
        stop_patience: a.fit.stop_patience,
        max_seq_len: a.data.max_seq_len,
        cut_long: a.data.cut_long,
        reset_state: a.data.reset_state,
        length_grouped: a.fit.batch_order == BatchOrder::LengthGrouped,
        max_steps: a.fit.max_steps,
    }
}

/// The batch order a run's data settings keep.
fn batch_order(d: &DataSettings) -> BatchOrder {
    match d.length_grouped {
        true => BatchOrder::LengthGrouped,
        false => BatchOrder::Shuffled,
    }
}

/// `p` made absolute, so that a run resumed from another directory reads the same file.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// A resumed data run's settings put in `a`: the run's own (from its checkpoint) for every
/// flag not typed; a flag typed with another value is refused, naming both
/// ([`refuse_changes`]), and so is `--model` naming another model. A checkpoint written
/// before the data settings were stored keeps the flags for those (as it resumed then).
pub fn keep_data_run(a: &mut TrainArgs, r: &Resumed) -> Result<()> {
    let (path, ck) = (&r.loaded.0, &r.loaded.1);
    refuse_other_model(a, None, (path, ck))?;
    let s = &r.settings;
    let typed = RunSettings {
        batch: a.batch,
        tbptt: a.tbptt.unwrap_or(s.tbptt),
        tbptt_mode: a.tbptt_mode,
        lr: a.lr,
        seed: a.seed,
        eval_every: a.eval_every,
        ..s.clone()
    };
    let mut more = vec![(
        "val_fraction",
        a.fit.val_fraction.to_string(),
        match s.data.as_ref().and_then(|d| d.val.as_ref()) {
            Some(val) => format!("none: it validates on --val {}", val.display()),
            None => r.position.val_fraction.to_string(),
        },
    )];
    match &s.data {
        Some(d) => {
            // A checkpoint that keeps its data's identity judges --val by its content
            // (`fit_resume::check_data`): a moved copy is the run's file.
            let by_content = DataIdentities::load(&ck.extra).ok().flatten().is_some();
            more.extend(data_changes(a, d, by_content));
        }
        None => {
            // Those runs batched by length: the order goes on as it was, unless typed.
            if !a.given.iter().any(|g| g == "batch_order") {
                a.fit.batch_order = BatchOrder::LengthGrouped;
            }
            errln!(
            "note: {} was written by an older tensorfit and keeps no data settings: continuing with {} epochs, {}, windows or longest sequence {}{}{}, batches {}",
            path.display(),
            a.fit.epochs,
            a.fit
                .stop_patience
                .map_or("no early stopping".to_string(), |p| format!("early stopping after {p} validations")),
            a.data
                .max_seq_len
                .map_or("by default".to_string(), |n| n.to_string()),
            if a.data.cut_long { " (cut)" } else { "" },
            match &a.fit.val {
                Some(v) => format!(", validating on {}", v.display()),
                None => String::new(),
            },
            a.fit.batch_order.name()
        )
        }
    }
    refuse_changes(a, (&typed, s), &more, path)?;
    (a.batch, a.seed, a.lr, a.eval_every) = (s.batch, s.seed, s.lr, s.eval_every);
    a.tbptt = Some(s.tbptt);
    a.tbptt_mode = s.tbptt_mode;
    a.fit.val_fraction = r.position.val_fraction;
    if let Some(d) = &s.data {
        if a.fit.val.is_none() {
            a.fit.val.clone_from(&d.val);
        }
        a.fit.epochs = d.epochs;
        a.fit.stop_patience = d.stop_patience;
        a.data.max_seq_len = d.max_seq_len;
        a.data.cut_long = d.cut_long;
        a.data.reset_state = d.reset_state;
        a.fit.batch_order = batch_order(d);
        a.fit.max_steps = d.max_steps;
    }
    Ok(())
}

/// The data flags of `a` against the run's `d`, as [`refuse_changes`] takes them: (flag
/// id, typed value, the run's value). A switch typed reads as "" and is "" or "off" in
/// the run; `--val` naming the run's file by another path is the run's (any `--val`, when
/// `by_content`: the checkpoint keeps its data's identity and `check_data` compares content).
fn data_changes(
    a: &TrainArgs,
    d: &DataSettings,
    by_content: bool,
) -> Vec<(&'static str, String, String)> {
    let count = |n: Option<u64>| n.map_or("none".to_string(), |n| n.to_string());
    let switch = |on: bool| if on { "" } else { "off" }.to_string();
    let path = |p: Option<&Path>| p.map_or("none".to_string(), |p| p.display().to_string());
    let typed_val = match (&a.fit.val, &d.val) {
        (Some(t), Some(run)) if by_content || same_file(t, run) || absolute(t) == *run => {
            Some(run.as_path())
        }
        (t, _) => t.as_deref(),
    };
    vec![
        ("epochs", a.fit.epochs.to_string(), d.epochs.to_string()),
        (
            "stop_patience",
            count(a.fit.stop_patience),
            count(d.stop_patience),
        ),
        (
            "max_seq_len",
            count(a.data.max_seq_len.map(|n| n as u64)),
            count(d.max_seq_len.map(|n| n as u64)),
        ),
        ("cut_long", switch(a.data.cut_long), switch(d.cut_long)),
        (
            "reset_state",
            switch(a.data.reset_state),
            switch(d.reset_state),
        ),
        ("val", path(typed_val), path(d.val.as_deref())),
        (
            "batch_order",
            a.fit.batch_order.name().to_string(),
            batch_order(d).name().to_string(),
        ),
        // Typed, --steps is the run's step budget (`FitArgs::max_steps`).
        ("steps", a.steps.to_string(), count(d.max_steps)),
    ]
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
    let values: Vec<_> = typed_values.iter().chain(more).cloned().collect();
    refuse_typed(&a.given, &values, "settings", path)
}

/// Refuses the flags typed (`given`) whose value differs from the resumed run's, stored
/// in `path`: `values` holds each flag's id, typed value ("" for a switch) and the run's
/// value; `what` names the kind of settings in the message.
pub fn refuse_typed(
    given: &[String],
    values: &[(&str, String, String)],
    what: &str,
    path: &Path,
) -> Result<()> {
    let typed = |id: &str| given.iter().any(|g| g == id);
    let differing: Vec<String> = values
        .iter()
        .filter(|(id, typed_value, run_value)| typed(id) && typed_value != run_value)
        .map(|(id, typed_value, run_value)| {
            // A switch is typed without a value.
            let value = match typed_value.as_str() {
                "" => String::new(),
                v => format!(" {v}"),
            };
            format!(
                "--{}{value} (the run's is {run_value})",
                id.replace('_', "-")
            )
        })
        .collect();
    if !differing.is_empty() {
        bail!(
            "a resumed run keeps the {what} it was started with, stored in {}: {} {}; drop {}, or start a new run without --resume",
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
