//! `tensorfit plan`: the memory plan of a job on every device (or on devices that are
//! not here, `--assume`), and the choice; the largest batch or length that fits
//! (`--max-batch`, `--max-seq-len`); a picture of the chosen plan (`--plot`).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;
use serde_json::json;
use tensorfit::assume;
use tensorfit::distributed::Ranks;
use tensorfit::max_job::{largest_jobs, Dim};
use tensorfit::nn::atomic_file::write_atomic;
use tensorfit::nn::{Job, TbpttMode};
use tensorfit::plan::{format_bytes, format_seconds};
use tensorfit::{Calibration, DeviceStatus, Devices, Error, Request};

use super::data_args::{read_settings, DataSource};
use super::optim_args::OptimArgs;
use super::ranks::{self, RankArgs};
use super::training_file::{self, Typed};
use super::{
    at_least_one, claim_output, parse_tbptt_mode, refuse_overwriting, request, DeviceArgs, Exit,
    JobMode, ModelArg,
};

/// `plan`'s run without --data: the seed user's (a batch of 100 sequences of 2000 steps,
/// truncated BPTT over the last 50).
const SEED_CASE_BATCH: usize = 100;
const SEED_CASE_TBPTT: usize = 50;

#[derive(Args, Clone, Debug)]
pub struct PlanArgs {
    /// The model: a preset (seed) or a model description file.
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse, default_value = "seed")]
    model: ModelArg,
    #[arg(long, value_enum, default_value_t = JobMode::Train)]
    mode: JobMode,
    /// Sequences per batch [default: 100, the seed case's; with --data, 32, as `train`].
    #[arg(long, value_parser = at_least_one::<usize>)]
    batch: Option<usize>,
    #[arg(long, default_value_t = 2000, conflicts_with = "data", value_parser = at_least_one::<usize>)]
    seq_len: usize,
    /// Truncated-BPTT length (training) [default: 50, the seed case's; with --data, the
    /// file's longest sequence, as `train --data` takes it].
    #[arg(long, value_parser = at_least_one::<usize>)]
    tbptt: Option<usize>,
    /// Held-out sequences per evaluation of a training run, as `train`'s --eval-batch
    /// [default: 256, as `train`'s; with --data, --batch: `train --data` validates in
    /// batches of --batch, at most the file's longest sequence long]. The training plan
    /// holds them and the evaluation's program, as `train` plans them.
    #[arg(long, value_parser = at_least_one::<usize>)]
    eval_batch: Option<usize>,
    /// How truncated BPTT trains a longer sequence (see `tensorfit train --help`).
    #[arg(long, value_name = "last|windows", value_parser = parse_tbptt_mode, default_value = "last")]
    tbptt_mode: TbpttMode,
    #[command(flatten)]
    dev: DeviceArgs,
    /// The optimizer, clipping and schedule the training plan holds state for (Adam keeps
    /// two moments per parameter, SGD one buffer): `train`'s flags, whose values do not
    /// change the plan beyond that (the learning rate is not asked).
    #[command(flatten)]
    optim: OptimArgs,
    #[command(flatten)]
    ranks: RankArgs,
    /// Plan for a device that is not here instead of those present (repeatable): a
    /// preset (gtx750, t4, a100-40gb, a100-80gb, h100, h200) or KIND=SIZE such as
    /// cuda=2GiB, wgpu=1.67GiB, cpu=64GB.
    #[arg(long, value_name = "PRESET|KIND=SIZE")]
    assume: Vec<String>,
    /// Find the largest batch that fits each device under each strategy (planning only).
    #[arg(long, conflicts_with = "max_seq_len")]
    max_batch: bool,
    /// Find the largest sequence length that fits each device under each strategy.
    #[arg(long)]
    max_seq_len: bool,
    /// Draw the chosen plan (every tensor over the schedule, per arena) as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also list every tensor of the chosen plan.
    #[arg(long)]
    full: bool,
    #[arg(long)]
    json: bool,
    /// With --data: the sequence length is the file's longest, and the batches its reader
    /// holds ahead join the host memory (in the plan's host section).
    #[command(flatten)]
    data: DataSource,
    /// What was typed after `plan`, read again under a model file's `[training]` table.
    #[arg(skip)]
    pub typed: Typed,
}

pub fn run(a: PlanArgs) -> Result<Exit> {
    if let Some(path) = &a.plot {
        let inputs = [
            ("--model", a.model.path()),
            ("--data", a.data.data.as_deref()),
        ];
        refuse_overwriting("--plot", path, "the picture", &inputs)?;
    }
    let described = a.model.load()?;
    // The model file's `[training]` table sets the run it plans (batch, lengths,
    // truncation, optimizer), under the flags typed here.
    let (a, from_file) = match &a.model {
        ModelArg::File(path) if !described.training.is_empty() => {
            let typed = a.typed.clone();
            let (mut merged, from_file) =
                training_file::apply_to::<PlanArgs>("plan", &typed, path, &described.training)?;
            merged.typed = typed;
            (merged, from_file)
        }
        _ => (a, Vec::new()),
    };
    let origin = |id: &str| training_file::origin(&from_file, id);
    let cfg = described.model;
    let files = a
        .data
        .open(&cfg, &read_settings(&cfg, None, false), None)
        .context("--data")?;
    // With --data, the run `train --data` makes with the same flags.
    let (batch, seq_len, tbptt) = match &files {
        Some(f) => {
            let longest = f.dataset().max_len;
            // No batch holds more sequences than the data has (train's first batch).
            let batch = a
                .batch
                .unwrap_or(super::TRAIN_BATCH)
                .min(f.dataset().sequences.max(1));
            (batch, longest, a.tbptt.unwrap_or(longest))
        }
        None => (
            a.batch.unwrap_or(SEED_CASE_BATCH),
            a.seq_len,
            a.tbptt.unwrap_or(SEED_CASE_TBPTT),
        ),
    };
    // Under mpirun, each rank plans its shard of the batch on its own device.
    let mut ranks = ranks::join(&a.ranks, batch)?;
    // The held-out evaluation `train` runs with the same flags (its sequences and its
    // program are in train's plan too).
    let eval_batch = a.eval_batch.unwrap_or(match &files {
        Some(_) => batch,
        None => super::train::EVAL_BATCH,
    });
    let job = match a.mode {
        JobMode::Train => Job::Train {
            batch: ranks::local_batch(&ranks, batch),
            seq_len,
            eval: Some((eval_batch, seq_len)),
        },
        JobMode::Infer => Job::Eval { batch, seq_len },
    };
    // Any learning rate and run length will do: neither changes the plan.
    let optim = a
        .optim
        .settings(1e-3)
        .build(Some(u64::MAX))
        .map_err(|e| anyhow!("{} {}", origin(e.key), e.message))?;
    a.optim.refuse_unused(&a.typed.given)?;
    let mut req = request(cfg, job, tbptt, optim, &a.dev)?;
    req.tbptt_mode = a.tbptt_mode;
    req.data_parallel = ranks.as_ref().map(Ranks::data_parallel);
    // A table of every device's plans shows their time estimates, one device or many.
    req.calibration = Calibration::Always;
    if let Some(f) = &files {
        // A text is read in a stream per row, each batch from the state the one before left.
        let f = f.whole_text(batch)?;
        let all: Vec<usize> = (0..f.dataset().sequences).collect();
        let batches = f.order(&all, batch, None)?.len();
        req.read_ahead_bytes = f.read_ahead_bytes(batch, batches);
        req.padded = f.padded;
        req.carry_across = f.carry && req.data_parallel.is_none();
    }
    let assumed = assume::parse(&a.assume)?;
    // Before any planning: a picture that cannot be written, or that another process
    // writes, is refused at once.
    let _plot_lock = a
        .plot
        .as_deref()
        .map(|p| claim_output("--plot", p))
        .transpose()?;
    let found = if assumed.is_empty() {
        Devices::discover(&a.dev.policy()?).list().to_vec()
    } else {
        assumed.clone()
    };
    let dim = match (a.max_batch, a.max_seq_len) {
        (true, _) => Some(Dim::Batch),
        (_, true) => Some(Dim::SeqLen),
        _ => None,
    };
    if let Some(dim) = dim {
        if a.plot.is_some() {
            bail!("--plot draws one plan; it does not go with --max-batch or --max-seq-len");
        }
        return largest(&req, &found, dim, a.json);
    }
    let t = Instant::now();
    let plan = tensorfit::Plan::on_devices(req, found)?;
    let secs = t.elapsed().as_secs_f64();
    if let Some(path) = &a.plot {
        plot(&plan, a.mode.name(), path)?;
    }
    let rank = ranks.as_ref().map(|r| (r.rank(), r.size(), r.rows()));
    ranks::in_turn(&mut ranks, || {
        print(&a, &plan, &assumed, secs, (rank, batch))
    })?;
    Ok(if plan.fits() {
        Exit::Success
    } else {
        Exit::NothingFits
    })
}

/// Prints the decision: for people, or JSON; under mpirun, for this rank (`rank`:
/// its index, the number of ranks, its rows of the batch of `batch`).
fn print(
    a: &PlanArgs,
    plan: &tensorfit::Plan,
    assumed: &[DeviceStatus],
    secs: f64,
    (rank, batch): (Option<(usize, usize, Range<usize>)>, usize),
) -> Result<()> {
    if a.json {
        let mut v = plan.to_json();
        v["assumed"] = assumed
            .iter()
            .filter_map(|d| d.assumed.as_ref().map(|x| (d, x)))
            .map(|(d, x)| json!({"device": d.id, "peak_gflops": x.peak_gflops, "description": x.describe(d)}))
            .collect();
        if let Some(chosen) = plan.memory_plan() {
            v["plan"] = chosen.to_json();
        }
        if let Some((r, n, rows)) = rank {
            v["rank"] = json!(r);
            v["ranks"] = json!(n);
            v["rows"] = json!([rows.start, rows.end]);
        }
        outln!("{v}");
    } else {
        if let Some((r, n, rows)) = rank {
            outln!(
                "== rank {r} of {n}: rows {}..{} of the batch of {}",
                rows.start,
                rows.end,
                batch
            );
        }
        out!("{}", plan.table());
        for d in assumed {
            if let Some(x) = &d.assumed {
                outln!("{}", x.describe(d));
            }
        }
        if let Some(chosen) = plan.memory_plan() {
            outln!("\nplan of the choice:");
            out!("{}", chosen.table(if a.full { usize::MAX } else { 12 }));
            out!("{}", plan.host_table());
        } else if let Error::NoDevice(why) = plan.nothing_fits() {
            // Only a device that is used when asked for fits.
            outln!("\n{why}");
        } else if let Some((bytes, strategy, device)) = plan.smallest() {
            outln!(
                "\nnothing fits: the smallest plan needs {} ({strategy} on {device})",
                format_bytes(bytes),
            );
            if a.mode == JobMode::Train {
                outln!("training memory depends on --batch and --tbptt; a training step is never split into micro-batches (a BatchNorm's batch statistics would change)");
            }
        }
        outln!("planned in {}", format_seconds(secs));
    }
    Ok(())
}

/// Writes the chosen plan's picture to `path` (atomically); says so on stderr.
fn plot(plan: &tensorfit::Plan, mode: &str, path: &Path) -> Result<()> {
    let (Some(chosen), Some(device), Some(strategy), Some(name)) = (
        plan.memory_plan(),
        plan.device(),
        plan.strategy(),
        plan.device_name(),
    ) else {
        bail!(
            "--plot {}: nothing fits, so there is no plan to draw",
            path.display()
        );
    };
    let title = format!("{mode}: {strategy} on {device} ({name})");
    write_atomic(path, chosen.svg(&title).as_bytes()).context("--plot")?;
    errln!(
        "wrote {} (the plan of {strategy} on {device})",
        path.display()
    );
    Ok(())
}

/// `--max-batch` / `--max-seq-len`: the table (or JSON) of the largest sizes.
fn largest(req: &Request, found: &[DeviceStatus], dim: Dim, json_out: bool) -> Result<Exit> {
    let t = Instant::now();
    let (rows, unavailable) = largest_jobs(req, found, dim)?;
    // As a plain plan: exit 2 when not even the smallest job fits anywhere.
    let exit = if rows.iter().any(|r| r.largest.is_some()) {
        Exit::Success
    } else {
        Exit::NothingFits
    };
    if json_out {
        outln!(
            "{}",
            json!({
                "dimension": dim.name(),
                "rows": rows.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
                "unavailable": unavailable.iter().map(|(d, w)| json!({"device": d, "reason": w})).collect::<Vec<_>>(),
            })
        );
        return Ok(exit);
    }
    let w = rows
        .iter()
        .map(|r| r.device.len())
        .max()
        .unwrap_or(0)
        .max(8);
    outln!(
        "{:<w$} {:>14} {:>10} {:>10}  strategy",
        "device",
        format!("largest {}", dim.name()),
        "needs",
        "usable"
    );
    for r in rows.iter().filter(|r| r.frontier) {
        let largest = match (r.largest, r.at_limit) {
            (None, _) => "none".to_string(),
            (Some(n), true) => format!("{n}+"),
            (Some(n), false) => n.to_string(),
        };
        outln!(
            "{:<w$} {:>14} {:>10} {:>10}  {}",
            r.device,
            largest,
            if r.largest.is_some() {
                format_bytes(r.peak_bytes)
            } else {
                "-".into()
            },
            format_bytes(r.capacity_bytes),
            r.strategy
        );
    }
    for (d, why) in &unavailable {
        outln!("{d:<w$} unavailable: {why}");
    }
    for d in found {
        if let Some(x) = &d.assumed {
            outln!("{}", x.describe(d));
        }
    }
    outln!(
        "each row: a strategy that fits a larger {} than every row above it on that device ({} strategies planned; --json lists all); N+ means the search stopped at its bound (N), not at memory; micro-batches are not searched (the device then holds one micro-batch); planned in {}",
        dim.name(),
        rows.len(),
        format_seconds(t.elapsed().as_secs_f64())
    );
    Ok(exit)
}
