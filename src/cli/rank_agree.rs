//! What every rank of `mpirun … tensorfit train` must have the same of, checked by all
//! together before any other collective (`tensorfit_dist::agree`): the model description
//! (activations included), its tensor table and starting weights, every run setting,
//! the run's length, the data's identity (`tensorfit_data::DataIdentity`, without its
//! path: each rank may read its own copy) and the shapes of the programs. Ranks that
//! differ stop together, the message naming each setting that differs and the ranks of
//! each value, instead of exchanging buffers of different lengths (a crash inside MPI) or
//! averaging the gradients of different networks.
//!
//! One list for both kinds of run (the built-in task and `--data`), in one order, so that
//! ranks started with the one and the other are compared setting by setting too.

use std::collections::HashMap;
use std::io::Write as _;

use tensorfit::data::{DataIdentities, DataIdentity};
use tensorfit::distributed::{weights_hash, Ranks};
use tensorfit::nn::optim::OptimSettings;
use tensorfit::nn::{ModelDescription, ParamStore, RunSettings};

use super::data_args::{DataArgs, FitArgs};
use super::Said;

/// The run settings' keys compared by name (as flags) below; any other key the stored run
/// settings hold is compared as "the other run settings". `data` (the data run's flags:
/// `DataSettings`) is compared flag by flag, and its files by content: each rank may read
/// its own copy at its own path.
const NAMED: [&str; 10] = [
    "run_id",
    "batch",
    "seq_len",
    "tbptt",
    "tbptt_mode",
    "lr",
    "seed",
    "eval_every",
    "eval_batch",
    "data",
];

/// A batch's sequences and steps.
type Shape = (usize, usize);

/// Where a run's sequences come from.
pub enum Task<'a> {
    /// The built-in task, trained until `last`, its last step, `per_batch` steps a batch.
    Builtin { last: u64, per_batch: u64 },
    /// Files (`--data`), read and validated as these flags say.
    Files {
        data: &'a DataArgs,
        fit: &'a FitArgs,
        identities: &'a DataIdentities,
        /// Batches and steps an epoch.
        epoch: (usize, u64),
        /// The (global) shapes of the first batch and of the first validation batch.
        first: (Option<Shape>, Option<Shape>),
    },
}

/// A run as its ranks compare it.
pub struct Run<'a> {
    pub model: &'a ModelDescription,
    /// The starting weights (fresh from the seed, or from `--init` or `--resume`).
    pub params: &'a ParamStore,
    /// The step the run starts from (`--resume`).
    pub start: u64,
    pub settings: &'a RunSettings,
    pub optim: &'a OptimSettings,
    pub task: Task<'a>,
}

/// Checks with every other rank that all run the same `run`. When they do not, every
/// rank fails with [`Said`] once rank 0 has said what differs (a rank that exited first
/// would make mpirun end rank 0 before it says it). Nothing on one process.
pub fn agree(ranks: &mut Option<Ranks>, run: &Run) -> anyhow::Result<()> {
    let Some(r) = ranks else {
        return Ok(());
    };
    let Some(message) = r.agree(&settings(run))? else {
        return Ok(());
    };
    if r.rank() == 0 {
        errln!("error: {message}");
    }
    std::io::stderr().flush()?;
    r.comm().barrier()?;
    Err(Said.into())
}

/// `run`'s settings as (name, value) in the one order every rank uses.
fn settings(run: &Run) -> Vec<(&'static str, String)> {
    let none = || "-".to_string();
    let s = run.settings;
    let tensors: Vec<String> = run
        .params
        .iter()
        .map(|(name, t)| format!("{name} {}", t.shape))
        .collect();
    let mut optim = HashMap::new();
    run.optim.store(&mut optim);
    let (command, length, fit, data) = match &run.task {
        Task::Builtin { last, .. } => ("train on the built-in task", last.to_string(), None, None),
        Task::Files {
            data,
            fit,
            identities,
            ..
        } => {
            // `--steps` with --data: the step budget every rank must stop at.
            let budget = fit.max_steps.map_or_else(none, |n| n.to_string());
            ("train --data", budget, Some(fit), Some((data, identities)))
        }
    };
    // The global shapes of the run's programs, one per line.
    let program = match &run.task {
        Task::Builtin { per_batch, .. } => [
            format!("a batch: {} × {}", s.batch, s.seq_len),
            format!("the held-out batch: {} × {}", s.eval_batch, s.seq_len),
            format!("steps a batch: {per_batch}"),
        ],
        Task::Files {
            epoch: (batches, steps),
            first: (batch, val),
            ..
        } => [
            format!("batches an epoch: {batches}, steps: {steps}"),
            format!("the first batch: {}", shape(*batch)),
            format!("the first validation batch: {}", shape(*val)),
        ],
    }
    .join("\n");
    let content = |id: Option<&DataIdentity>| id.map_or_else(none, DataIdentity::content);
    vec![
        ("the command", command.to_string()),
        ("the model description", run.model.to_toml()),
        ("the model's tensors", tensors.join("\n")),
        (
            "the starting weights (--init, --resume, --seed)",
            format!("hash {:016x}", weights_hash(run.params)),
        ),
        ("the starting step (--resume)", run.start.to_string()),
        ("--batch", s.batch.to_string()),
        (
            "the sequence length (--seq-len, or the data's longest)",
            s.seq_len.to_string(),
        ),
        ("--tbptt", s.tbptt.to_string()),
        ("--tbptt-mode", s.tbptt_mode.name().to_string()),
        ("--lr", s.lr.to_string()),
        ("--seed", s.seed.to_string()),
        ("--eval-every", s.eval_every.to_string()),
        ("--eval-batch", s.eval_batch.to_string()),
        ("the other run settings", other_run_settings(s)),
        (
            "the optimizer (--optimizer, --momentum, --weight-decay, --clip-norm, --clip-value, --schedule, ...)",
            optim.values().map(|v| object_lines(v, |_| true)).collect(),
        ),
        ("--steps", length),
        ("--epochs", fit.map_or_else(none, |f| f.epochs.to_string())),
        (
            "--val-fraction",
            fit.filter(|f| f.val.is_none())
                .map_or_else(none, |f| f.val_fraction.to_string()),
        ),
        (
            "--stop-patience",
            fit.and_then(|f| f.stop_patience)
                .map_or_else(none, |p| p.to_string()),
        ),
        (
            "--max-seq-len",
            data.map_or_else(none, |(d, _)| {
                format!("{:?}, cut long: {}", d.max_seq_len, d.cut_long)
            }),
        ),
        (
            "--reset-state",
            data.map_or_else(none, |(d, _)| d.reset_state.to_string()),
        ),
        (
            "--batch-order",
            fit.map_or_else(none, |f| f.batch_order.name().to_string()),
        ),
        ("--data", content(data.map(|(_, ids)| &ids.data))),
        ("--val", content(data.and_then(|(_, ids)| ids.val.as_ref()))),
        ("the programs' shapes", program),
    ]
}

/// A batch's shape as the programs' shapes say it: `8 × 20` (sequences × steps), or
/// `none`.
fn shape(s: Option<Shape>) -> String {
    s.map_or_else(|| "none".to_string(), |(b, t)| format!("{b} × {t}"))
}

/// The run settings a checkpoint keeps besides those named in [`NAMED`], one per line.
fn other_run_settings(s: &RunSettings) -> String {
    let mut extra = HashMap::new();
    s.store(&mut extra);
    let keys = |k: &str| !NAMED.contains(&k);
    extra.values().map(|v| object_lines(v, keys)).collect()
}

/// The keys of the JSON object `text` that `keep` keeps, as `key = value` lines in key
/// order (all of `text` when it is not an object).
fn object_lines(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let Ok(serde_json::Value::Object(m)) = serde_json::from_str(text) else {
        return text.to_string();
    };
    let mut lines: Vec<String> = m
        .iter()
        .filter(|(k, _)| keep(k))
        .map(|(k, v)| format!("{k} = {v}"))
        .collect();
    lines.sort();
    lines.join("\n")
}
