//! The subcommands of the `tensorfit` binary, one module each (parse, call the API,
//! print), and what they share: device flags, the model preset, planning and starting a
//! session, and the exit status.

#[macro_use]
mod out;

pub mod bench;
mod curves;
mod data_args;
mod data_vocab;
pub mod eval;
mod files_eval;
mod fit_files;
mod fit_lengths;
mod fit_resume;
mod fit_watch;
pub mod generate;
pub mod import;
pub mod info;
mod interrupt;
mod model_arg;
mod optim_args;
pub mod plan;
pub mod predict;
mod predictions_file;
mod rank_agree;
mod ranks;
mod resume_kind;
pub mod train;
mod train_settings;
pub mod training_file;

pub use model_arg::ModelArg;

use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use serde_json::json;
use tensorfit::checkpoint_dir::checkpoint_path;
use tensorfit::core::DeviceKind;
use tensorfit::cpu::host_memory;
use tensorfit::nn::atomic_file::{check_writable, same_file};
use tensorfit::nn::{
    BuiltinTask, HeadOn, Job, ModelDescription, OptimConfig, ParamStore, RunSettings, TbpttMode,
    TrainOptions,
};
use tensorfit::output_lock::OutputLock;
use tensorfit::plan::{format_bytes, DEFAULT_MARGIN};
use tensorfit::registry::{self, Entry};
use tensorfit::{DevicePolicy, MemoryCaps, Request, Runner};

/// How a command ended, beyond success or an error (which exits 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success,
    /// `plan` found no device the job fits on: exit 2.
    NothingFits,
    /// Training stopped on a signal after saving: exit 128 + the signal's number (130
    /// for Ctrl-C, 143 for SIGTERM), as shells report a process the signal ended.
    Interrupted(interrupt::Signal),
}

impl Exit {
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::NothingFits => 2,
            Exit::Interrupted(s) => s.exit_code(),
        }
    }
}

/// An error already said on stderr (by rank 0, for ranks that stop together): the
/// process exits with status 1 without saying it again.
#[derive(Debug)]
pub struct Said;

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped (the reason is above)")
    }
}

impl std::error::Error for Said {}

/// Model presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// 152 → 3 × LSTM 250 → BatchNorm → Dense 100 → BatchNorm → 6.
    Seed,
}

impl Model {
    pub fn name(self) -> &'static str {
        match self {
            Model::Seed => "seed",
        }
    }

    pub fn config(self) -> ModelDescription {
        match self {
            Model::Seed => ModelDescription::seed(),
        }
    }
}

/// The device to run on: `auto` (`None`), or a kind of the backend registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceChoice(Option<DeviceKind>);

/// `--device`'s values: `auto`, then every kind the registry knows, with its aliases
/// (`vulkan` for wgpu); a kind this build leaves out is taken, and its devices are
/// listed as not in this build.
fn device_choice() -> impl TypedValueParser<Value = DeviceChoice> {
    let auto = PossibleValue::new("auto")
        .help("The fastest device the job fits on (software devices only when asked for)");
    let kinds = registry::entries().into_iter().map(|e| match e {
        Entry::Built(p) => PossibleValue::new(p.kind().name()).aliases(p.aliases().iter().copied()),
        Entry::NotBuilt(kind) => PossibleValue::new(kind.name()),
    });
    let values: Vec<PossibleValue> = std::iter::once(auto).chain(kinds).collect();
    // The parser accepts only those values, each of which names a kind or is `auto`.
    PossibleValuesParser::new(values).map(|v| DeviceChoice(registry::parse_kind(&v).ok()))
}

/// What `plan` and `bench` plan: a training step or an inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JobMode {
    /// Forward, backward and Adam.
    Train,
    /// Forward only.
    #[value(alias = "eval")]
    Infer,
}

impl JobMode {
    /// The job of this mode on `[seq_len, batch]` inputs (training without evaluations).
    pub fn job(self, batch: usize, seq_len: usize) -> Job {
        match self {
            JobMode::Train => Job::Train {
                batch,
                seq_len,
                eval: None,
            },
            JobMode::Infer => Job::Eval { batch, seq_len },
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            JobMode::Train => "train",
            JobMode::Infer => "infer",
        }
    }
}

/// User caps on device memory.
#[derive(Args, Clone, Debug)]
pub struct CapArgs {
    /// Cap a device's memory, as KIND=SIZE (repeatable, once per kind), e.g.
    /// --device-memory wgpu=1.67GiB.
    #[arg(long = "device-memory", value_name = "KIND=SIZE")]
    device_memory: Vec<String>,
}

impl CapArgs {
    pub fn caps(&self) -> Result<MemoryCaps> {
        Ok(MemoryCaps::parse(&self.device_memory)?)
    }

    /// `policy` with each kind's memory capped as the flags say.
    pub fn capping(&self, mut policy: DevicePolicy) -> Result<DevicePolicy> {
        for (&kind, &bytes) in &self.caps()?.0 {
            policy = policy.cap(kind, bytes);
        }
        Ok(policy)
    }
}

#[derive(Args, Clone, Debug)]
pub struct DeviceArgs {
    /// Device to run on.
    #[arg(long, default_value = "auto", value_parser = device_choice())]
    device: DeviceChoice,
    #[command(flatten)]
    caps: CapArgs,
    /// Fraction of free memory to leave unused.
    #[arg(long, default_value_t = DEFAULT_MARGIN)]
    margin: f64,
}

impl DeviceArgs {
    /// The flags as the library's device policy; a margin outside [0, 1) names the flag.
    pub fn policy(&self) -> Result<DevicePolicy> {
        let policy = match self.device.0 {
            None => DevicePolicy::auto(),
            Some(kind) => DevicePolicy::only(kind),
        };
        self.caps
            .capping(policy)?
            .margin(self.margin)
            .context("--margin")
    }
}

/// The session request for `job` with the device flags of `dev`.
/// The seed of a model's parameters when no checkpoint gives them (bench, and eval or
/// predict without `--checkpoint`).
pub const UNTRAINED_SEED: u64 = 1;
/// `train`'s (and `bench`'s) sequences per minibatch when `--batch` is not given; `plan
/// --data` plans the same run.
pub const TRAIN_BATCH: usize = 32;

/// The seed of the data `bench` times.
pub const BENCH_DATA_SEED: u64 = 5;

pub fn request(
    cfg: ModelDescription,
    job: Job,
    tbptt: usize,
    optim: OptimConfig,
    dev: &DeviceArgs,
) -> Result<Request> {
    Ok(dev.policy()?.request(cfg, job, (tbptt, optim)))
}

/// Plans `req` (its job read as a bound), prints the choice and the bound (unless quiet),
/// and opens the run holding `params`.
pub fn begin(req: &Request, params: &ParamStore, quiet: bool) -> Result<Runner> {
    let plan = tensorfit::Plan::from_request(req.clone())?;
    if !quiet {
        err!("{}", plan.table());
    }
    Ok(plan.start_with_weights(params)?)
}

/// Plans `job` of `model` on the devices the flags allow, prints the choice (unless
/// quiet), and opens the run through the library's front door.
pub fn open(model: &tensorfit::Model, job: Job, dev: &DeviceArgs, quiet: bool) -> Result<Runner> {
    started(model.plan(job, &dev.policy()?)?, model, quiet)
}

/// [`open`] with a request made in full (settings the library's `Training` does not
/// hold: data-parallel ranks).
pub fn open_request(model: &tensorfit::Model, req: Request, quiet: bool) -> Result<Runner> {
    started(tensorfit::Plan::from_request(req)?, model, quiet)
}

/// Prints `plan`'s choice (unless quiet) and opens `model`'s run on it.
fn started(plan: tensorfit::Plan, model: &tensorfit::Model, quiet: bool) -> Result<Runner> {
    if !quiet {
        err!("{}", plan.table());
    }
    Ok(plan.start(model)?)
}

/// The JSON fields every run reports.
pub fn summary(run: &Runner) -> serde_json::Value {
    let replans = run.replans();
    json!({
        "device": run.device(),
        "strategy": run.strategy(),
        "estimated_peak_bytes": run.planned_peak_bytes(),
        "measured_peak_bytes": run.measured_peak_bytes(),
        "planned_resident_bytes": run.planned_resident_bytes(),
        "peak_resident_bytes": host_memory::peak_resident(),
        "fallbacks": run.fallbacks(),
        // The bound the run was planned for last, and how many plans it took: 1 + the
        // replans for shapes outside the bound.
        "bound": tensorfit::nn::bound::describe(run.bound()),
        "plans": 1 + replans.len(),
        "replans": replans,
    })
}

/// The device, strategy and memory of a finished run, for people.
pub fn print_memory(run: &Runner) {
    let est = run.planned_peak_bytes();
    let got = run.measured_peak_bytes();
    errln!(
        "device {}, {}; memory: estimated peak {} ({est} bytes), measured peak {} ({got} bytes)",
        run.device(),
        run.strategy(),
        format_bytes(est),
        format_bytes(got)
    );
    for r in run.replans() {
        errln!("note: {r}");
    }
}

/// An evaluation's loss and accuracy for people; a regression has no accuracy, and its
/// loss is the mean squared error.
pub fn quality_text(cfg: &ModelDescription, loss: f32, accuracy: Option<f32>) -> String {
    match (accuracy, cfg.head.on) {
        // A language model's figures: perplexity, and bits per step to hold against the
        // entropy of the text (the built-in next-symbol task's is in docs/models.md).
        (Some(a), HeadOn::EveryStep) => format!(
            "loss {loss:.4}, accuracy {:.1}% per step, perplexity {:.3}, {:.3} bits per step",
            100.0 * a,
            loss.exp(),
            loss / std::f32::consts::LN_2
        ),
        (Some(a), HeadOn::Sequence(_)) => format!("loss {loss:.4}, accuracy {:.1}%", 100.0 * a),
        (None, _) => format!("loss (mse) {loss:.4}"),
    }
}

/// A count that must be at least 1 (a batch, a length, a number of steps).
pub fn at_least_one<T>(text: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8>,
    T::Err: std::fmt::Display,
{
    match text.parse::<T>() {
        Ok(n) if n < T::from(1) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A learning rate: a positive, finite number.
pub fn positive_rate(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        Ok(_) => Err(format!("must be a positive number, got {text}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The optimizer updates (steps, as checkpoints and schedules count them) a minibatch of
/// `steps` time steps takes under `settings`: one per window with windowed truncated BPTT
/// and a head on every step, else one.
pub fn updates_per_batch(cfg: &ModelDescription, settings: &RunSettings, steps: usize) -> u64 {
    TrainOptions {
        tbptt: settings.tbptt,
        tbptt_mode: settings.tbptt_mode,
        ..TrainOptions::default()
    }
    .updates_per_step(cfg, steps) as u64
}

pub use tensorfit::nn::run_settings::crossed;

/// What is wrong, as the user reads it: an invalid-input error's reason without the
/// library's "invalid input: " in front (the CLI names the flag or file instead).
pub fn reason(e: tensorfit::core::Error) -> String {
    match e {
        tensorfit::core::Error::Input(why) => why,
        other => other.to_string(),
    }
}

/// A command's error as `main` prints it: each cause in turn, joined by ": " as anyhow's
/// `{:#}` does, but an invalid-input cause (the library's `Input`, the front door's
/// `BadInput`) without its category word in front; the flag or file named before it
/// says what the input was.
pub fn error_text(e: &anyhow::Error) -> String {
    e.chain()
        .map(|cause| {
            if let Some(tensorfit::core::Error::Input(why)) = cause.downcast_ref() {
                return why.clone();
            }
            if let Some(tensorfit::Error::BadInput(why)) = cause.downcast_ref() {
                return why.message.clone();
            }
            cause.to_string()
        })
        .collect::<Vec<_>>()
        .join(": ")
}

/// `--tbptt-mode`'s value (clap names the flag; the reason is said without the
/// library's "invalid input").
pub fn parse_tbptt_mode(name: &str) -> Result<TbpttMode, String> {
    TbpttMode::parse(name).map_err(reason)
}

/// Refuses to write the output `path` of flag `flag` over one of the files the command
/// reads (`inputs`: each flag and its path, if given): writing `what` there would
/// destroy it, and a finished run would have lost its model or data.
pub fn refuse_overwriting(
    flag: &str,
    path: &Path,
    what: &str,
    inputs: &[(&str, Option<&Path>)],
) -> Result<()> {
    for (input, p) in inputs.iter().filter_map(|&(f, p)| Some((f, p?))) {
        if same_file(path, p) {
            bail!(
                "{flag} {} is the {input} file: writing {what} there would destroy it",
                path.display()
            );
        }
    }
    Ok(())
}

/// Checks that `flag`'s output `path` can be written, before any work, and holds it
/// until the returned lock is dropped (at the command's end): another process writing the
/// same file is refused now rather than one of the two results lost to the last rename.
pub fn claim_output(flag: &'static str, path: &Path) -> Result<OutputLock> {
    check_writable(path).context(flag)?;
    OutputLock::hold(path).context(flag)
}

/// Refuses a model no built-in task can feed (temporal order for a classifier, running
/// mean for a regression).
pub fn check_task(cfg: &ModelDescription) -> Result<()> {
    builtin_task(cfg).map(|_| ())
}

/// The built-in task that feeds `cfg`, or why none does (and that --data feeds one's own).
fn builtin_task(cfg: &ModelDescription) -> Result<BuiltinTask> {
    BuiltinTask::for_model(cfg, 0).map_err(|e| {
        anyhow::anyhow!("{} (without --data, a model trains and evaluates on a built-in task: give --data FILE for your own sequences)", reason(e))
    })
}

/// Refuses a model no built-in task fits, and a sequence length `steps` (given as `flag`)
/// shorter than its task makes: before anything is planned.
pub fn check_task_length(cfg: &ModelDescription, steps: usize, flag: &str) -> Result<()> {
    let min = builtin_task(cfg)?.min_steps();
    if steps < min {
        bail!("{flag} must be at least {min} (the built-in task's shortest sequence), got {steps}");
    }
    Ok(())
}

/// The model of a checkpoint (which `--model`, when given, must be), or `--model` (the
/// seed preset by default) with untrained weights.
pub fn load_model(checkpoint: Option<&Path>, model: Option<&ModelArg>) -> Result<tensorfit::Model> {
    match checkpoint {
        Some(p) => {
            let path = checkpoint_path(p);
            let loaded = tensorfit::Model::load(&path).context("--checkpoint")?;
            if let Some(m) = model {
                let described = m.load()?.model;
                m.check_is(
                    &described,
                    &path,
                    loaded.description(),
                    "drop --model to use the checkpoint's",
                )?;
            }
            Ok(loaded)
        }
        None => {
            let cfg = model.cloned().unwrap_or_default().load()?.model;
            Ok(tensorfit::Model::new(cfg, UNTRAINED_SEED)?)
        }
    }
}
