//! `tensorfit train`: trains on the built-in task, with checkpoints and resume; with
//! `--data`, on the user's files (`fit_files`).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde_json::json;
use tensorfit::checkpoint_dir::{checkpoint_path, CheckpointDir};
use tensorfit::distributed::Ranks;
use tensorfit::nn::atomic_file::same_file;
use tensorfit::nn::{BuiltinTask, Checkpoint, Job, RunSettings, TbpttMode};
use tensorfit::{Model, Runner, Training};

use super::data_args::{DataArgs, FitArgs};
use super::fit_files;
use super::interrupt::{Interrupts, Signal};
use super::optim_args::{self, OptimArgs};
use super::rank_agree;
use super::ranks::{self, RankArgs};
use super::resume_kind;
use super::{
    at_least_one, check_task, claim_output, crossed, open_request, parse_tbptt_mode, positive_rate,
    print_memory, quality_text, refuse_overwriting, request, summary, train_settings,
    training_file, updates_per_batch, DeviceArgs, Exit, ModelArg,
};

/// The checkpoint metadata key of the data generator's position.
pub(super) const DATA_POSITION: &str = "data_rng";
/// Held-out sequences per evaluation of the built-in task (`--eval-batch`; `plan` plans
/// the same).
pub(super) const EVAL_BATCH: usize = 256;
#[derive(Args, Clone, Debug)]
pub struct TrainArgs {
    /// The model: a preset (seed) or a model description file, whose `[training]`
    /// table gives defaults for the flags below (a typed flag wins).
    #[arg(long, value_name = "seed|FILE.toml", value_parser = ModelArg::parse, default_value = "seed")]
    pub(super) model: ModelArg,
    #[command(flatten)]
    pub(super) dev: DeviceArgs,
    /// Sequences per minibatch.
    #[arg(long, default_value_t = super::TRAIN_BATCH, value_parser = at_least_one::<usize>)]
    pub(super) batch: usize,
    /// Time steps per sequence (at least 4 for the temporal-order and running-mean tasks).
    #[arg(long, default_value_t = 20)]
    pub(super) seq_len: usize,
    /// Truncated-BPTT length (gradients reach back this many steps; defaults to the
    /// whole sequence, which this task needs to be learnable).
    #[arg(long, value_parser = at_least_one::<usize>)]
    pub(super) tbptt: Option<usize>,
    /// How truncated BPTT of length L trains a sequence of T > L steps. "last": the
    /// first T - L steps only carry the state, then one forward, backward and update
    /// over the last L steps. "windows" (DL4J's): windows of L steps from the start,
    /// each a forward, backward and update with the state (h, c) carried on: T / L
    /// updates per minibatch, each counted as a step. With a head on the last step only
    /// the final window has a loss, so both modes take one update. Over --data of several
    /// lengths (padded batches), "windows" trains every step of every sequence with a head
    /// on every step; "last" needs every sequence to reach the last L steps of its batch
    /// (checked before the first step).
    #[arg(long, value_name = "last|windows", value_parser = parse_tbptt_mode, default_value = "last")]
    pub(super) tbptt_mode: TbpttMode,
    /// Optimizer steps (updates: windowed truncated BPTT with a head on every step takes
    /// one per window, and ends at the first whole minibatch at or past this count). With
    /// --data, typed: a budget (Lightning's max_steps), ending the run at whichever of it
    /// and --epochs comes first; without --epochs, the epochs it needs.
    #[arg(long, default_value_t = 200, value_parser = at_least_one::<u64>)]
    pub(super) steps: u64,
    /// Learning rate (the schedule's base rate).
    #[arg(long, default_value_t = 1e-3, value_parser = positive_rate)]
    pub(super) lr: f32,
    /// Optimizer, clipping and schedule (boxed: they would make `Command`'s variants
    /// very unequal in size).
    #[command(flatten)]
    pub(super) optim: Box<OptimArgs>,
    /// Seed for initialisation and data.
    #[arg(long, default_value_t = 1)]
    pub(super) seed: u64,
    /// Evaluate on held-out sequences every this many steps (0: only at the end).
    #[arg(long, default_value_t = 50)]
    pub(super) eval_every: u64,
    /// Held-out sequences per evaluation.
    #[arg(long, default_value_t = EVAL_BATCH, value_parser = at_least_one::<usize>)]
    pub(super) eval_batch: usize,
    /// Write a checkpoint (safetensors, PyTorch names, optimizer state) here at the end.
    #[arg(long)]
    pub(super) save: Option<PathBuf>,
    /// Keep DIR/checkpoint.safetensors up to date during training (written atomically).
    #[arg(long, value_name = "DIR")]
    pub(super) checkpoint_dir: Option<PathBuf>,
    /// With --checkpoint-dir: write a checkpoint every this many steps (and always after
    /// the last step, and when stopped by Ctrl-C or SIGTERM).
    #[arg(long, default_value_t = 50)]
    pub(super) checkpoint_every: u64,
    /// With --checkpoint-dir: replace a checkpoint of another run found there.
    #[arg(long)]
    pub(super) overwrite: bool,
    /// Continue a run from a checkpoint file, or from DIR/checkpoint.safetensors: its
    /// model, optimizer state, step, data position and settings (batch, lengths, learning
    /// rate, seed, evaluation, optimizer; with --data from DIR/last.safetensors, also the
    /// validation, epochs, early stopping, --max-seq-len, --cut-long, --reset-state);
    /// then train --steps more steps (with --data: to the run's last epoch or its step
    /// budget). A typed
    /// setting that differs from the run's is refused. Resuming from a directory keeps
    /// writing checkpoints there.
    #[arg(long, value_name = "FILE|DIR")]
    pub(super) resume: Option<PathBuf>,
    /// Print one JSON object at the end instead of human output.
    #[arg(long)]
    pub(super) json: bool,
    /// Your own data (boxed, as `optim`).
    #[command(flatten)]
    pub(super) data: Box<DataArgs>,
    #[command(flatten)]
    pub(super) fit: Box<FitArgs>,
    #[command(flatten)]
    pub(super) ranks: RankArgs,
    /// The ids of the flags typed on the command line (filled in after parsing).
    #[arg(skip)]
    pub given: Vec<String>,
    /// What was typed after `train` (filled in after parsing), parsed again under the
    /// model file's `[training]` settings.
    #[arg(skip)]
    pub argv: Vec<OsString>,
    /// The settings the model file gave, each with where (`FILE:LINE:COLUMN:
    /// \`training.KEY\``).
    #[arg(skip)]
    pub from_file: Vec<(String, String)>,
}

impl TrainArgs {
    /// Setting `id` as messages name it: the file's key where the model file gave it,
    /// else its flag.
    pub fn origin(&self, id: &str) -> String {
        training_file::origin(&self.from_file, id)
    }
}

/// The training data's stream starts at `seed · DATA_SEED_MULTIPLIER + 1`, and the
/// held-out set's at `seed ^ HELD_OUT_SEED_XOR`: two streams of one seed that do not
/// overlap the parameters' (`seed` itself).
const DATA_SEED_MULTIPLIER: u64 = 0x9E37_79B9;
const HELD_OUT_SEED_XOR: u64 = 0xE7A1;

pub fn run(a: TrainArgs) -> Result<Exit> {
    if let Some(path) = &a.save {
        let inputs = [
            ("--model", a.model.path()),
            ("--data", a.data.path()),
            ("--val", a.fit.val.as_deref()),
        ];
        refuse_overwriting("--save", path, "the checkpoint", &inputs)?;
    }
    // A data run fills in the figures the file leaves to the data (`fit_files`).
    let described = match a.data.path() {
        Some(_) => a.model.load_leaving_to_data()?,
        None => a.model.load()?,
    };
    let a = match &a.model {
        ModelArg::File(path) if a.resume.is_none() => {
            training_file::apply(&a, path, &described.training)?
        }
        ModelArg::File(path) if !described.training.is_empty() => {
            errln!(
                "note: a resumed run keeps the settings stored in its checkpoint; the `[training]` table of {} is not used",
                path.display()
            );
            a
        }
        _ => a,
    };
    // The model file's `[training]` table applies to training from files too.
    if a.data.path().is_some() {
        return fit_files::run(a);
    }
    let mut resumed = match &a.resume {
        Some(p) => {
            // A data run's state continues with its data.
            resume_kind::refuse_data_run_without_data(p)?;
            let file = checkpoint_path(p);
            let ck = Checkpoint::load(&file).context("--resume")?;
            resume_kind::refuse_data_checkpoint(&file, &ck)?;
            Some((file, ck))
        }
        None => None,
    };
    let settings = train_settings::resolve(
        &a,
        &described.model,
        resumed.as_ref().map(|(p, ck)| (p.as_path(), ck)),
    )?;
    let mut ranks = ranks::join(&a.ranks, settings.batch)?;
    // Ranks other than 0 print nothing and write no file: they run as --json does (its
    // output skipped), without --save or a checkpoint directory.
    let root = ranks::is_root(&ranks);
    let a = TrainArgs {
        json: a.json || !root,
        save: a.save.filter(|_| root),
        checkpoint_dir: a.checkpoint_dir.filter(|_| root),
        ..a
    };
    let cfg = match &resumed {
        Some((_, ck)) => ck.config.clone(),
        None => described.model,
    };
    // A step is an optimizer update, as checkpoints and schedules count them: windowed
    // truncated BPTT with a head on every step takes one per window of a minibatch. A
    // minibatch is never cut, so the run ends at the first minibatch at or past --steps.
    let per_batch = updates_per_batch(&cfg, &settings, settings.seq_len);
    let start = resumed.as_ref().map_or(0, |(_, ck)| ck.step);
    let last = a
        .steps
        .div_ceil(per_batch)
        .checked_mul(per_batch)
        .and_then(|n| start.checked_add(n))
        .ok_or_else(|| {
            anyhow!(
                "--steps {}: the run is at step {start}, and {start} + {} passes the largest step count, {}",
                a.steps,
                a.steps,
                u64::MAX
            )
        })?;
    check_task(&cfg)?;
    let job = Job::Train {
        // Each rank plans for its own rows of the global batch.
        batch: ranks::local_batch(&ranks, settings.batch),
        seq_len: settings.seq_len,
        eval: Some((settings.eval_batch, settings.seq_len)),
    };
    let resumed_ck = resumed.as_ref().map(|(p, ck)| (p.as_path(), ck));
    let (optim_settings, optim) =
        optim_args::resolve(&a.optim, &a.given, settings.lr, last, resumed_ck, |id| {
            a.origin(id)
        })?;
    let mut req = request(cfg.clone(), job, settings.tbptt, optim, &a.dev)?;
    req.tbptt_mode = settings.tbptt_mode;
    req.seed = settings.seed;
    req.data_parallel = ranks.as_ref().map(Ranks::data_parallel);
    let params = match &mut resumed {
        // The parameters go to the run; the rest of the checkpoint is used below.
        Some((_, ck)) => std::mem::take(&mut ck.params),
        None => tensorfit::Model::new(cfg.clone(), settings.seed)?.into_parameters(),
    };
    // Before any other collective, and before rank 0 writes anything.
    let run = rank_agree::Run {
        model: &cfg,
        params: &params,
        start,
        settings: &settings,
        optim: &optim_settings,
        task: rank_agree::Task::Builtin { last, per_batch },
    };
    rank_agree::agree(&mut ranks, &run)?;
    // Every output is checked before the first step (after the ranks agree, so that a
    // refusal on rank 0 is not a rank leaving alone): a run that cannot save is refused
    // now, not after hours of training. Held to the end, as the checkpoint directory is:
    // a second run saving to the same file is refused now, not silently replaced by
    // whichever finishes last.
    let _save_lock = a
        .save
        .as_deref()
        .map(|p| claim_output("--save", p))
        .transpose()?;
    let ck_dir = match root {
        true => open_checkpoint_dir(&a, resumed.as_ref(), &settings, start)?,
        false => None,
    };
    let interrupts = Interrupts::install()?;
    let training = Training {
        tbptt: Some(settings.tbptt),
        tbptt_mode: settings.tbptt_mode,
        optim,
        seed: settings.seed,
    };
    let model = Model::with_weights(cfg.clone(), params)?.with_training(training);
    let mut run = open_request(&model, req, a.json)?;
    drop(model);
    ranks::choose_all_reduce(&mut ranks, &run, a.json)?;
    // A resumed run continues the data stream and keeps the held-out set of its seed.
    let position = resumed
        .as_ref()
        .and_then(|(_, ck)| ck.extra.get(DATA_POSITION)?.parse().ok());
    let mut data = BuiltinTask::for_model(
        &cfg,
        position.unwrap_or(
            settings
                .seed
                .wrapping_mul(DATA_SEED_MULTIPLIER)
                .wrapping_add(1),
        ),
    )?;
    if let Some((_, ck)) = &resumed {
        run.restore_training(ck)?;
    }
    // The optimizer state is on the device now; only the file's name is still needed.
    let resumed = resumed.map(|(file, _)| file);
    let held_out = BuiltinTask::for_model(&cfg, settings.seed ^ HELD_OUT_SEED_XOR)?
        .batch(settings.eval_batch, settings.seq_len)
        .context("making the held-out set")?;
    let save = |run: &mut Runner, data: &BuiltinTask, path: &Path| -> Result<()> {
        // The run's host copy of the state (with the schedule's): no copy more while it
        // is written.
        let ck = run.state()?;
        ck.extra
            .insert(DATA_POSITION.into(), data.rng_state().to_string());
        settings.store(&mut ck.extra);
        optim_settings.store(&mut ck.extra);
        ck.save(path)?;
        Ok(())
    };
    let mut losses = Vec::new();
    // Per step, for --json: the learning rate used and the gradient norm (when clipping).
    let (mut lrs, mut grad_norms) = (Vec::new(), Vec::new());
    let flops = job.model_flops_in(&cfg, settings.tbptt, settings.tbptt_mode) / per_batch as f64;
    if !a.json {
        errln!(
            "training ({} parameters): batch {}, length {}, tbptt {}{}, learning rate {}, steps {}..={last}{}{}",
            cfg.trainable_parameters()?,
            settings.batch,
            settings.seq_len,
            settings.tbptt,
            match settings.tbptt_mode {
                TbpttMode::Windows if per_batch > 1 => " in windows (a step per window)",
            TbpttMode::Windows => " in windows",
                TbpttMode::Last => "",
            },
            settings.lr,
            start + 1,
            match &resumed {
                Some(file) => format!(", resumed from {}", file.display()),
                None => String::new(),
            },
            match &ck_dir {
                Some(d) => format!(
                    "; a checkpoint every {} steps in {}",
                    a.checkpoint_every,
                    d.dir().display()
                ),
                None => String::new(),
            }
        );
    }
    let tty = std::io::stderr().is_terminal();
    let start_time = Instant::now();
    let mut last_loss = f32::NAN;
    let mut last_eval = None;
    let mut step = start;
    let mut interrupted: Option<Signal> = None;
    while step < last {
        // Ranks learn of a stop at a step's exchange and end after that step.
        let stop = interrupted.or_else(|| ranks::stop_before_step(&mut ranks, &interrupts));
        if let Some(signal) = stop {
            interrupted = Some(signal);
            break;
        }
        let before = step;
        step += per_batch;
        let batch = data.batch(settings.batch, settings.seq_len)?;
        let seen = run.fallbacks().len();
        let report = ranks::train_step(&mut run, &mut ranks, &cfg, &batch.x, &batch.labels)
            .with_context(|| format!("training step {step}"))?;
        ranks::warn_fallbacks(&ranks, a.json && root, &run.fallbacks()[seen..]);
        last_loss = report.loss;
        interrupted = ranks::stop_after_step(&ranks);
        if a.json {
            losses.push(report.loss);
            lrs.push(report.lr);
            grad_norms.extend(report.grad_norm);
        }
        // Checkpoints between steps; the last one is written after the loop.
        if let Some(dir) = ck_dir
            .as_ref()
            .filter(|_| crossed(before, step, a.checkpoint_every) && step < last)
        {
            if let Err(e) = save(&mut run, &data, &dir.checkpoint_path()) {
                // A full disk must not end the run: the previous checkpoint is intact.
                errln!(
                    "\nwarning: step {step}: {e:#}; the previous checkpoint is kept, and training continues (the next checkpoint tries again)"
                );
            }
        }
        let done = step - start;
        let ms = start_time.elapsed().as_secs_f64() * 1e3 / done as f64;
        let eval_now = step == last || crossed(before, step, settings.eval_every);
        if eval_now {
            let e = run.evaluate(&held_out.x, &held_out.labels)?;
            // The held-out loss is the metric reduce-on-plateau watches.
            run.observe_validation(e.loss as f64);
            last_eval = Some(e);
        }
        if a.json {
            continue;
        }
        let norm = report
            .grad_norm
            .map_or(String::new(), |n| format!("  grad norm {n:.3}"));
        let line = format!(
            "step {step:>5}/{last}  loss {:.4}  lr {:.3e}{norm}  {ms:.0} ms/step  {:.1} GFLOP/s",
            report.loss,
            report.lr,
            flops / ms / 1e6
        );
        match (&last_eval, eval_now) {
            (Some(e), true) => errln!(
                "{}{line}  held-out {}",
                if tty { "\r" } else { "" },
                quality_text(&cfg, e.loss, e.accuracy)
            ),
            _ if tty => err!("\r{line}"),
            _ if crossed(before, step, 10) => errln!("{line}"),
            _ => {}
        }
    }
    let done = step - start;
    let weights_hash = ranks::check_weights(&mut ranks, &mut run, step)?;
    // The final state goes to every output asked for; a step taken is never thrown away.
    let mut written = Vec::new();
    if done > 0 {
        let outputs = ck_dir
            .as_ref()
            .map(|d| ("--checkpoint-dir", d.checkpoint_path()));
        let outputs = outputs
            .into_iter()
            .chain(a.save.clone().map(|p| ("--save", p)));
        let mut failed = Vec::new();
        for (flag, path) in outputs {
            match save(&mut run, &data, &path) {
                Ok(()) => written.push(path),
                Err(e) => failed.push(format!("{flag}: {e:#}")),
            }
        }
        if !failed.is_empty() {
            let kept = match written.first() {
                Some(p) => format!(" (step {step} was written to {})", p.display()),
                None => String::new(),
            };
            bail!(
                "step {step} could not be saved: {}{kept}",
                failed.join("; ")
            );
        }
    }
    let (eval_loss, accuracy, perplexity) = last_eval
        .map(|e| (e.loss, e.accuracy, e.perplexity))
        .unwrap_or((f32::NAN, Some(f32::NAN), None));
    let secs = start_time.elapsed().as_secs_f64();
    if !root {
        // Rank 0 reports for all.
    } else if a.json {
        let mut out = summary(&run);
        ranks::describe(&ranks, weights_hash, &mut out);
        out["loss"] = json!(last_loss);
        out["eval_loss"] = json!(eval_loss);
        out["accuracy"] = json!(accuracy);
        out["perplexity"] = json!(perplexity);
        out["steps"] = json!(done);
        out["step"] = json!(step);
        out["losses"] = json!(losses);
        out["lrs"] = json!(lrs);
        out["grad_norms"] = json!(grad_norms);
        out["seconds"] = json!(secs);
        out["interrupted"] = json!(interrupted.map(Signal::name));
        outln!("{out}");
    } else {
        match interrupted {
            Some(signal) => errln!(
                "\nstopped by {} after step {step} ({done} steps in {secs:.1} s)",
                signal.name()
            ),
            None => errln!(
                "done: {done} steps in {secs:.1} s; final loss {last_loss:.4}, held-out {}",
                quality_text(&cfg, eval_loss, accuracy)
            ),
        }
        print_memory(&run);
        for p in &written {
            errln!("checkpoint of step {step} written to {}", p.display());
        }
        if interrupted.is_some() && written.is_empty() && done > 0 {
            errln!("nothing was saved: no --checkpoint-dir or --save was given");
        }
    }
    ranks::finish(&mut ranks)?;
    Ok(interrupted.map_or(Exit::Success, Exit::Interrupted))
}

/// The run's checkpoint directory, locked: `--checkpoint-dir`, or the directory resumed
/// from. A checkpoint already there is replaced only if it is the one this run resumes
/// from, an earlier checkpoint of this same run, or `--overwrite` says so.
pub(super) fn open_checkpoint_dir(
    a: &TrainArgs,
    resumed: Option<&(PathBuf, Checkpoint)>,
    settings: &RunSettings,
    start: u64,
) -> Result<Option<CheckpointDir>> {
    let dir = match (&a.checkpoint_dir, &a.resume) {
        (Some(d), _) => d.clone(),
        (None, Some(r)) if r.is_dir() => r.clone(),
        _ => {
            if a.given.iter().any(|g| g == "checkpoint_every") {
                bail!("--checkpoint-every needs --checkpoint-dir");
            }
            if a.overwrite {
                bail!("--overwrite needs --checkpoint-dir");
            }
            return Ok(None);
        }
    };
    if a.checkpoint_every == 0 {
        bail!("--checkpoint-every must be at least 1 (the last step, and a run stopped by Ctrl-C or SIGTERM, always write a checkpoint)");
    }
    let ck_dir = CheckpointDir::lock(&dir).context("--checkpoint-dir")?;
    let Some(existing) = ck_dir.existing() else {
        return Ok(Some(ck_dir));
    };
    let path = ck_dir.checkpoint_path();
    let shown = dir.display();
    match existing {
        _ if a.overwrite => {
            if !a.json {
                errln!("replacing the checkpoint in {shown} (--overwrite)");
            }
        }
        Err(e) => bail!(
            "--checkpoint-dir {shown}: the checkpoint there cannot be read ({e}); move it away, or replace it with --overwrite"
        ),
        Ok(old) => {
            let resumed_from_it = resumed.is_some_and(|(file, _)| same_file(file, &path));
            let same_run = RunSettings::load(&old.extra)
                .ok()
                .flatten()
                .is_some_and(|s| s.run_id == settings.run_id);
            if same_run && old.step > start {
                bail!(
                    "--checkpoint-dir {shown} holds step {} of this run, ahead of step {start} resumed here; continue from it with --resume {shown}, or replace it with --overwrite",
                    old.step
                );
            }
            if !resumed_from_it && !same_run {
                bail!(
                    "--checkpoint-dir {shown} holds the checkpoint of another run (step {}); continue that run with --resume {shown}, or replace its checkpoint with --overwrite",
                    old.step
                );
            }
        }
    }
    Ok(Some(ck_dir))
}
