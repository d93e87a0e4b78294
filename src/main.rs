//! The `tensorfit` command line. With no subcommand it trains the seed network on the
//! built-in task with the defaults of `tensorfit train`.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::json;
use tensorfit::core::{DeviceKind, HostTensor};
use tensorfit::devices::{discover, open, parse_kind, MemoryCaps};
use tensorfit::nn::{
    AdamConfig, Checkpoint, Job, ModelConfig, ParamKind, ParamStore, TemporalOrder,
};
use tensorfit::plan::{format_bytes, DEFAULT_MARGIN};
use tensorfit::session::{decide, format_seconds, start, Decision, Request, Session};

/// `println!` that ignores a closed stdout (`tensorfit plan | head` must not panic).
macro_rules! outln {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}

#[derive(Parser)]
#[command(
    name = "tensorfit",
    version,
    about = "Train and run a stacked LSTM on the device it fits on, decided before it runs."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Train on the built-in temporal-order task (the default command).
    Train(TrainArgs),
    /// Evaluate a model on held-out sequences of the built-in task.
    Eval(EvalArgs),
    /// Run a trained model on your own inputs.
    Predict(PredictArgs),
    /// Show the memory plan of a job on every device, and the choice.
    Plan(PlanArgs),
    /// Time training steps or inference on the chosen device (median after a warm-up).
    Bench(BenchArgs),
    /// List the devices, their memory and why any is unavailable.
    Devices {
        #[command(flatten)]
        dev: DeviceArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print a model's parameters (PyTorch names, shapes, counts).
    Model {
        /// Model preset.
        #[arg(long, default_value = "seed")]
        model: String,
    },
}

#[derive(Args, Clone)]
struct DeviceArgs {
    /// Device: auto (fastest that fits), cpu, wgpu or cuda.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Cap a device's memory, as KIND=SIZE (repeatable), e.g. --device-memory wgpu=1.67GiB.
    #[arg(long = "device-memory", value_name = "KIND=SIZE")]
    device_memory: Vec<String>,
    /// Fraction of free memory to leave unused.
    #[arg(long, default_value_t = DEFAULT_MARGIN)]
    margin: f64,
}

impl DeviceArgs {
    fn kind(&self) -> Result<Option<DeviceKind>> {
        Ok(match self.device.as_str() {
            "auto" => None,
            other => Some(parse_kind(other)?),
        })
    }

    fn caps(&self) -> Result<MemoryCaps> {
        Ok(MemoryCaps::parse(&self.device_memory)?)
    }
}

#[derive(Args, Clone)]
struct TrainArgs {
    /// Model preset (only `seed` today: 152 → 3 × LSTM 250 → BN → Dense 100 → BN → 6).
    #[arg(long, default_value = "seed")]
    model: String,
    #[command(flatten)]
    dev: DeviceArgs,
    /// Sequences per minibatch.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Time steps per sequence.
    #[arg(long, default_value_t = 20)]
    seq_len: usize,
    /// Truncated-BPTT length (gradients reach back this many steps; defaults to the
    /// whole sequence, which this task needs to be learnable).
    #[arg(long)]
    tbptt: Option<usize>,
    /// Optimizer steps.
    #[arg(long, default_value_t = 200)]
    steps: u64,
    /// Adam learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f32,
    /// Seed for initialisation and data.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Evaluate on held-out sequences every this many steps (0: only at the end).
    #[arg(long, default_value_t = 50)]
    eval_every: u64,
    /// Held-out sequences per evaluation.
    #[arg(long, default_value_t = 256)]
    eval_batch: usize,
    /// Write a checkpoint (safetensors, PyTorch names, optimizer state) here at the end.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Keep DIR/checkpoint.safetensors up to date during training (written atomically).
    #[arg(long, value_name = "DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// With --checkpoint-dir: write a checkpoint every this many steps.
    #[arg(long, default_value_t = 50)]
    checkpoint_every: u64,
    /// Continue from a checkpoint file, or from DIR/checkpoint.safetensors: its model,
    /// optimizer state, step, data position and seed; then train --steps more steps.
    #[arg(long, value_name = "FILE|DIR")]
    resume: Option<PathBuf>,
    /// Print one JSON object at the end instead of human output.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
struct EvalArgs {
    /// Model preset, used when no checkpoint is given (then the weights are untrained).
    #[arg(long, default_value = "seed")]
    model: String,
    /// A checkpoint written by `tensorfit train --save`.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    #[command(flatten)]
    dev: DeviceArgs,
    /// Sequences to evaluate.
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Time steps per sequence.
    #[arg(long, default_value_t = 200)]
    seq_len: usize,
    /// Seed of the held-out data.
    #[arg(long, default_value_t = 2)]
    seed: u64,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
struct PredictArgs {
    /// A checkpoint written by `tensorfit train --save`.
    #[arg(long)]
    checkpoint: PathBuf,
    /// safetensors file with a tensor `input` of shape [batch, time, features] (F32).
    #[arg(long)]
    input: PathBuf,
    /// Where to write the tensor `probabilities` [batch, classes].
    #[arg(long)]
    output: PathBuf,
    #[command(flatten)]
    dev: DeviceArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
struct BenchArgs {
    #[arg(long, default_value = "seed")]
    model: String,
    /// train (forward + backward + Adam) or infer.
    #[arg(long, default_value = "train")]
    mode: String,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    #[arg(long, default_value_t = 50)]
    seq_len: usize,
    /// Truncated-BPTT length (training; defaults to the whole sequence).
    #[arg(long)]
    tbptt: Option<usize>,
    /// Timed repetitions after one warm-up.
    #[arg(long, default_value_t = 5)]
    iters: usize,
    #[command(flatten)]
    dev: DeviceArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Args, Clone)]
struct PlanArgs {
    #[arg(long, default_value = "seed")]
    model: String,
    /// train or infer.
    #[arg(long, default_value = "train")]
    mode: String,
    #[arg(long, default_value_t = 100)]
    batch: usize,
    #[arg(long, default_value_t = 2000)]
    seq_len: usize,
    /// Truncated-BPTT length (training).
    #[arg(long, default_value_t = 50)]
    tbptt: usize,
    #[command(flatten)]
    dev: DeviceArgs,
    /// Also list every tensor of the chosen plan.
    #[arg(long)]
    full: bool,
    #[arg(long)]
    json: bool,
}

/// Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid" on every device open when
/// the variable is unset (servers, containers, CI). A private directory keeps that noise
/// out of tensorfit's output. Runs before any thread exists.
fn quiet_mesa() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join(format!("tensorfit-runtime-{}", std::process::id()));
        if std::fs::create_dir_all(&dir).is_ok() {
            std::env::set_var("XDG_RUNTIME_DIR", &dir);
        }
    }
}

fn main() {
    quiet_mesa();
    let cli = Cli::parse();
    let result = match cli.command {
        None => Cli::parse_from(["tensorfit", "train"])
            .command
            .map_or(Ok(()), run),
        Some(c) => run(c),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Train(a) => train(a),
        Command::Eval(a) => eval(a),
        Command::Predict(a) => predict(a),
        Command::Plan(a) => plan(a),
        Command::Bench(a) => bench(a),
        Command::Devices { dev, json } => devices(&dev, json),
        Command::Model { model } => print_model(&model),
    }
}

fn preset(name: &str) -> Result<ModelConfig> {
    match name {
        "seed" => Ok(ModelConfig::seed()),
        other => bail!("unknown model `{other}`; available: seed"),
    }
}

fn print_model(name: &str) -> Result<()> {
    let cfg = preset(name)?;
    outln!("{:<24} {:>12} {:>10}  kind", "tensor", "shape", "count");
    for spec in cfg.param_specs() {
        let kind = match spec.kind {
            ParamKind::Trainable => "trainable",
            ParamKind::RunningStat => "running statistic",
        };
        outln!(
            "{:<24} {:>12} {:>10}  {kind}",
            spec.name,
            spec.shape.to_string(),
            spec.shape.numel()
        );
    }
    outln!("trainable parameters: {}", cfg.trainable_parameters());
    Ok(())
}

fn request(cfg: ModelConfig, job: Job, tbptt: usize, lr: f32, dev: &DeviceArgs) -> Result<Request> {
    if !(0.0..1.0).contains(&dev.margin) {
        bail!("--margin must be in [0, 1), got {}", dev.margin);
    }
    Ok(Request {
        cfg,
        job,
        tbptt,
        adam: AdamConfig {
            lr,
            ..AdamConfig::default()
        },
        margin: dev.margin,
        device: dev.kind()?,
        caps: dev.caps()?,
        exclude: Vec::new(),
    })
}

/// Plans `req`, prints the choice (unless quiet), and starts the session.
fn begin(req: &Request, params: &ParamStore, quiet: bool) -> Result<(Decision, Session)> {
    let decision = decide(req)?;
    if !quiet {
        eprint!("{}", decision.table());
    }
    if decision.chosen.is_none() {
        return Err(decision.nothing_fits().into());
    }
    let session = start(req, &decision, params)?;
    Ok((decision, session))
}

fn summary(s: &Session) -> serde_json::Value {
    json!({
        "device": s.device,
        "strategy": s.strategy,
        "estimated_peak_bytes": s.plan.peak_bytes(),
        "measured_peak_bytes": s.measured_peak_bytes(),
        "fallbacks": s.fallbacks.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
    })
}

fn print_memory(s: &Session) {
    let est = s.plan.peak_bytes();
    let got = s.measured_peak_bytes();
    eprintln!(
        "device {}, {}; memory: estimated peak {} ({est} bytes), measured peak {} ({got} bytes)",
        s.device,
        s.strategy,
        format_bytes(est),
        format_bytes(got)
    );
}

fn train(a: TrainArgs) -> Result<()> {
    if a.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let (cfg, params, resumed) = match &a.resume {
        Some(p) => {
            // The parameters go to the session; the rest of the checkpoint is used below.
            let mut ck = Checkpoint::load(&checkpoint_file(p))?;
            let params = std::mem::take(&mut ck.params);
            (ck.config.clone(), params, Some(ck))
        }
        None => {
            let cfg = preset(&a.model)?;
            let params = ParamStore::init(&cfg, a.seed)?;
            (cfg, params, None)
        }
    };
    check_task(&cfg)?;
    let tbptt = a.tbptt.unwrap_or(a.seq_len);
    let job = Job::Train {
        batch: a.batch,
        seq_len: a.seq_len,
        eval: Some((a.eval_batch, a.seq_len)),
    };
    let req = request(cfg.clone(), job, tbptt, a.lr, &a.dev)?;
    check_host_memory(&[(a.batch, a.seq_len), (a.eval_batch, a.seq_len)])?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    // A resumed run continues the data stream and keeps the held-out set of its seed.
    let extra = |k: &str| -> Option<u64> { resumed.as_ref()?.extra.get(k)?.parse().ok() };
    let seed = extra("seed").unwrap_or(a.seed);
    let mut data = TemporalOrder::new(
        extra("data_rng").unwrap_or(seed.wrapping_mul(0x9E37_79B9).wrapping_add(1)),
    );
    if let Some(ck) = &resumed {
        session.trainer.restore_optimizer(&ck.optimizer, ck.step)?;
    }
    let held_out = TemporalOrder::new(seed ^ 0xE7A1)
        .batch(a.eval_batch, a.seq_len)
        .context("making the held-out set")?;
    let save = |session: &mut Session, data: &TemporalOrder, path: &Path| -> Result<()> {
        let mut ck = session.trainer.checkpoint()?;
        ck.extra
            .insert("data_rng".into(), data.rng_state().to_string());
        ck.extra.insert("seed".into(), seed.to_string());
        ck.save(path)?;
        Ok(())
    };
    if let Some(dir) = &a.checkpoint_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut losses = Vec::new();
    let flops = 3.0 * cfg.lstm_forward_flops(a.batch, tbptt.min(a.seq_len));
    let first = session.trainer.step() + 1;
    let last = session.trainer.step() + a.steps;
    if !a.json {
        eprintln!(
            "training ({} parameters): batch {}, length {}, tbptt {}, steps {first}..={last}",
            cfg.trainable_parameters(),
            a.batch,
            a.seq_len,
            tbptt
        );
    }
    let tty = std::io::stderr().is_terminal();
    let start_time = Instant::now();
    let mut last_loss = f32::NAN;
    let mut last_eval = None;
    for step in first..=last {
        let batch = data.batch(a.batch, a.seq_len)?;
        let seen = session.fallbacks.len();
        let report = session
            .train_step(&batch.x, &batch.labels)
            .with_context(|| format!("training step {step}"))?;
        if !a.json {
            for f in &session.fallbacks[seen..] {
                eprintln!("\nwarning: {f}");
            }
        }
        last_loss = report.loss;
        losses.push(report.loss);
        if let Some(dir) = &a.checkpoint_dir {
            if a.checkpoint_every > 0 && (step % a.checkpoint_every == 0 || step == last) {
                save(&mut session, &data, &checkpoint_file(dir))?;
            }
        }
        let done = step - first + 1;
        let ms = start_time.elapsed().as_secs_f64() * 1e3 / done as f64;
        let eval_now = step == last || (a.eval_every > 0 && step % a.eval_every == 0);
        if eval_now {
            last_eval = Some(session.evaluate(&held_out.x, &held_out.labels)?);
        }
        if a.json {
            continue;
        }
        let line = format!(
            "step {step:>5}/{last}  loss {:.4}  {ms:.0} ms/step  {:.1} GFLOP/s",
            report.loss,
            flops / ms / 1e6
        );
        match (&last_eval, eval_now) {
            (Some(e), true) => eprintln!(
                "{}{line}  held-out loss {:.4} accuracy {:.1}%",
                if tty { "\r" } else { "" },
                e.loss,
                100.0 * e.accuracy
            ),
            _ if tty => {
                eprint!("\r{line}");
                std::io::stderr().flush().ok();
            }
            _ if done % 10 == 0 => eprintln!("{line}"),
            _ => {}
        }
    }
    let (eval_loss, accuracy) = last_eval
        .map(|e| (e.loss, e.accuracy))
        .unwrap_or((f32::NAN, f32::NAN));
    if let Some(path) = &a.save {
        save(&mut session, &data, path)?;
    }
    let secs = start_time.elapsed().as_secs_f64();
    if a.json {
        let mut out = summary(&session);
        out["loss"] = json!(last_loss);
        out["eval_loss"] = json!(eval_loss);
        out["accuracy"] = json!(accuracy);
        out["steps"] = json!(a.steps);
        out["losses"] = json!(losses);
        out["seconds"] = json!(secs);
        outln!("{out}");
    } else {
        eprintln!(
            "done: {} steps in {secs:.1} s; final loss {last_loss:.4}, held-out accuracy {:.1}%",
            a.steps,
            100.0 * accuracy
        );
        print_memory(&session);
        if let Some(p) = &a.save {
            eprintln!("checkpoint written to {}", p.display());
        }
    }
    Ok(())
}

/// Refuses a model the built-in task cannot feed.
fn check_task(cfg: &ModelConfig) -> Result<()> {
    if cfg.input != TemporalOrder::FEATURES || cfg.classes != TemporalOrder::CLASSES {
        bail!("the built-in task needs a model with 152 inputs and 6 classes");
    }
    Ok(())
}

/// A checkpoint path: the file itself, or `checkpoint.safetensors` in a directory.
fn checkpoint_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("checkpoint.safetensors")
    } else {
        path.to_path_buf()
    }
}

/// Refuses, before generating anything, data that the host could not hold.
fn check_host_memory(batches: &[(usize, usize)]) -> Result<()> {
    let bytes = batches.iter().fold(0u128, |acc, &(b, t)| {
        acc + b as u128 * t as u128 * TemporalOrder::FEATURES as u128 * 4
    });
    let available = tensorfit::cpu::host_memory::available().unwrap_or(u64::MAX) as u128;
    if bytes > available {
        bail!(
            "the input data alone needs {} of host memory, and {} is available: use a smaller --batch or --seq-len",
            format_bytes(u64::try_from(bytes).unwrap_or(u64::MAX)),
            format_bytes(u64::try_from(available).unwrap_or(u64::MAX))
        );
    }
    Ok(())
}

fn load_model(checkpoint: Option<&Path>, model: &str) -> Result<(ModelConfig, ParamStore)> {
    match checkpoint {
        Some(p) => {
            let ck = Checkpoint::load(&checkpoint_file(p))?;
            Ok((ck.config, ck.params))
        }
        None => {
            let cfg = preset(model)?;
            let params = ParamStore::init(&cfg, 1)?;
            Ok((cfg, params))
        }
    }
}

fn eval(a: EvalArgs) -> Result<()> {
    let (cfg, params) = load_model(a.checkpoint.as_deref(), &a.model)?;
    check_task(&cfg)?;
    let job = Job::Eval {
        batch: a.batch,
        seq_len: a.seq_len,
    };
    let req = request(cfg, job, a.seq_len, 1e-3, &a.dev)?;
    check_host_memory(&[(a.batch, a.seq_len)])?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    let data = TemporalOrder::new(a.seed).batch(a.batch, a.seq_len)?;
    let t = Instant::now();
    let report = session.evaluate(&data.x, &data.labels)?;
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let mut out = summary(&session);
        out["loss"] = json!(report.loss);
        out["accuracy"] = json!(report.accuracy);
        out["seconds"] = json!(secs);
        outln!("{out}");
    } else {
        eprintln!(
            "evaluated {} sequences of length {} in {}: loss {:.4}, accuracy {:.1}%",
            a.batch,
            a.seq_len,
            format_seconds(secs),
            report.loss,
            100.0 * report.accuracy
        );
        print_memory(&session);
    }
    Ok(())
}

fn predict(a: PredictArgs) -> Result<()> {
    let (cfg, params) = load_model(Some(&a.checkpoint), "")?;
    let (inputs, _) = ParamStore::load(&a.input, "")?;
    let x = inputs
        .get("input")
        .with_context(|| format!("{} has no tensor `input`", a.input.display()))?;
    let d = x.shape.dims();
    if d.len() != 3 || d[2] != cfg.input || d[0] == 0 || d[1] == 0 {
        bail!(
            "`input` has shape {}, expected [batch, time, {}] with batch and time ≥ 1",
            x.shape,
            cfg.input
        );
    }
    if x.data.iter().any(|v| !v.is_finite()) {
        bail!("`input` contains NaN or Inf");
    }
    let (batch, steps) = (d[0], d[1]);
    // [batch, time, F] → time-major [time, batch, F].
    let f = cfg.input;
    let mut tm = vec![0.0f32; x.data.len()];
    for b in 0..batch {
        for t in 0..steps {
            let src = (b * steps + t) * f;
            let dst = (t * batch + b) * f;
            tm[dst..dst + f].copy_from_slice(&x.data[src..src + f]);
        }
    }
    let x = HostTensor::new([steps, batch, f], tm)?;
    let job = Job::Eval {
        batch,
        seq_len: steps,
    };
    let req = request(cfg, job, steps, 1e-3, &a.dev)?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    let probs = session.trainer.predict(&x)?;
    let mut out = ParamStore::new();
    out.insert("probabilities", probs);
    let bytes = out.to_safetensors("", Default::default())?;
    std::fs::write(&a.output, bytes).with_context(|| format!("writing {}", a.output.display()))?;
    if a.json {
        outln!("{}", summary(&session));
    } else {
        eprintln!(
            "probabilities of {batch} sequences written to {}",
            a.output.display()
        );
        print_memory(&session);
    }
    Ok(())
}

fn plan(a: PlanArgs) -> Result<()> {
    let cfg = preset(&a.model)?;
    let job = match a.mode.as_str() {
        "train" => Job::Train {
            batch: a.batch,
            seq_len: a.seq_len,
            eval: None,
        },
        "infer" | "eval" => Job::Eval {
            batch: a.batch,
            seq_len: a.seq_len,
        },
        other => bail!("--mode must be train or infer, got `{other}`"),
    };
    let req = request(cfg, job, a.tbptt, 1e-3, &a.dev)?;
    let t = Instant::now();
    let decision = decide(&req)?;
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        outln!("{}", decision.to_json());
    } else {
        out!("{}", decision.table());
        if let Some((_, plan, _, _)) = decision.chosen() {
            outln!("\nplan of the choice:");
            out!("{}", plan.table(if a.full { usize::MAX } else { 12 }));
        } else if let Some(smallest) = decision
            .candidates
            .iter()
            .min_by_key(|c| c.estimated_peak_bytes)
        {
            outln!(
                "\nnothing fits: the smallest plan needs {} ({} on {})",
                format_bytes(smallest.estimated_peak_bytes),
                smallest.strategy,
                smallest.device
            );
            if matches!(job, Job::Train { .. }) {
                outln!("training memory depends on --batch and --tbptt; gradient accumulation over micro-batches is not offered because the model has BatchNorm in training mode (it would change the batch statistics)");
            }
        }
        outln!("planned in {}", format_seconds(secs));
    }
    if decision.chosen.is_none() {
        std::process::exit(2);
    }
    Ok(())
}

fn bench(a: BenchArgs) -> Result<()> {
    let cfg = preset(&a.model)?;
    if a.iters == 0 {
        bail!("--iters must be at least 1");
    }
    let tbptt = a.tbptt.unwrap_or(a.seq_len);
    let (job, flops) = match a.mode.as_str() {
        "train" => {
            let last = tbptt.min(a.seq_len);
            let flops = 3.0 * cfg.lstm_forward_flops(a.batch, last)
                + cfg.lstm_forward_flops(a.batch, a.seq_len.saturating_sub(last));
            (
                Job::Train {
                    batch: a.batch,
                    seq_len: a.seq_len,
                    eval: None,
                },
                flops,
            )
        }
        "infer" | "eval" => (
            Job::Eval {
                batch: a.batch,
                seq_len: a.seq_len,
            },
            cfg.lstm_forward_flops(a.batch, a.seq_len),
        ),
        other => bail!("--mode must be train or infer, got `{other}`"),
    };
    let req = request(cfg.clone(), job, tbptt, 1e-3, &a.dev)?;
    check_host_memory(&[(a.batch, a.seq_len)])?;
    let params = ParamStore::init(&cfg, 1)?;
    let (_, mut session) = begin(&req, &params, a.json)?;
    let data = TemporalOrder::new(5).batch(a.batch, a.seq_len)?;
    let train = matches!(job, Job::Train { .. });
    // Straight on the trainer: the timing is of the run, not of recovery snapshots.
    let mut once = || -> Result<()> {
        if train {
            session.trainer.train_step(&data.x, &data.labels)?;
        } else {
            session.trainer.evaluate(&data.x, &data.labels)?;
        }
        Ok(())
    };
    once()?;
    let mut ms = Vec::with_capacity(a.iters);
    for i in 0..a.iters {
        let t = Instant::now();
        once()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if !a.json && std::io::stderr().is_terminal() {
            eprint!("\rrun {}/{}: {:.1} ms", i + 1, a.iters, ms[i]);
        }
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    let gflops = flops / median / 1e6;
    if a.json {
        let mut out = summary(&session);
        out["mode"] = json!(a.mode);
        out["ms_per_step"] = json!(median);
        out["gflops"] = json!(gflops);
        out["runs_ms"] = json!(ms);
        outln!("{out}");
    } else {
        if std::io::stderr().is_terminal() {
            eprintln!();
        }
        outln!(
            "{} {} batch {} length {}: median {median:.1} ms per {} ({:.1} model GFLOP/s) on {}, {}",
            a.model,
            a.mode,
            a.batch,
            a.seq_len,
            if train { "training step" } else { "inference" },
            gflops,
            session.device,
            session.strategy
        );
    }
    Ok(())
}

fn devices(dev: &DeviceArgs, json_out: bool) -> Result<()> {
    let caps = dev.caps()?;
    let mut rows = Vec::new();
    for d in discover(&caps) {
        match d.info {
            Ok(info) => {
                let gflops = tensorfit::calibrate::throughput_gflops(&info, || {
                    open(d.kind, &MemoryCaps::default())
                })
                .ok();
                if json_out {
                    rows.push(json!({
                        "device": d.id, "kind": d.kind.name(), "available": true, "name": info.name,
                        "total_bytes": info.total_bytes, "free_bytes": info.free_bytes,
                        "capacity_source": info.capacity_source, "software": info.software,
                        "max_buffer_bytes": info.max_buffer_bytes, "throughput_gflops": gflops,
                    }));
                } else {
                    outln!(
                        "{:<7} {}{}\n        total {}, free {} ({}), largest buffer {}, GEMM {}",
                        d.id,
                        info.name,
                        if info.software { " [software]" } else { "" },
                        format_bytes(info.total_bytes),
                        info.free_bytes.map_or("unknown".into(), format_bytes),
                        info.capacity_source,
                        if info.max_buffer_bytes >= 1 << 60 {
                            "unlimited".into()
                        } else {
                            format_bytes(info.max_buffer_bytes)
                        },
                        gflops.map_or("not measured".into(), |g| format!("{g:.1} GFLOP/s")),
                    );
                }
            }
            Err(why) => {
                if json_out {
                    rows.push(json!({"device": d.id, "kind": d.kind.name(), "available": false, "reason": why}));
                } else {
                    outln!("{:<7} unavailable — {why}", d.kind.name());
                }
            }
        }
    }
    if json_out {
        outln!("{}", json!({ "devices": rows }));
    }
    Ok(())
}
