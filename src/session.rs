//! The session: plan a job on every device, choose one, run it there.
//!
//! For each device that is present, the session measures (or reads from the cache) its
//! throughput, enumerates the strategies that give the same results (the whole sequence
//! at once, or streamed in time chunks carrying (h, c), or in micro-batches, for the
//! inference parts), orders them by estimated time, and plans them in that order until
//! one fits. The fastest fitting plan over all devices is chosen, and the trainer then
//! allocates exactly that plan's arenas on that device.

use std::fmt::Write as _;

use serde_json::{json, Value};
use tensorfit_core::{DeviceInfo, DeviceKind, Error, HostTensor, Result};
use tensorfit_nn::{
    AdamConfig, Checkpoint, EvalReport, Job, ModelConfig, ParamStore, Program, StepReport,
    TrainOptions, Trainer,
};
use tensorfit_plan::{
    choose, format_bytes, usable_bytes, Candidate, Limits, MemoryPlan, ProgramSpec,
};

use crate::calibrate::throughput_gflops;
use crate::devices::{discover, open, MemoryCaps};
use crate::estimate::{estimate_seconds, ProgramCosts};
use crate::host_budget::{device_info, HostNeed};
use crate::strategy::check_job;
pub use crate::strategy::{strategies, Strategy};

/// What to plan and run.
#[derive(Debug, Clone)]
pub struct Request {
    pub cfg: ModelConfig,
    pub job: Job,
    /// Truncated-BPTT length for training.
    pub tbptt: usize,
    pub adam: AdamConfig,
    /// Fraction of free memory kept unused (0.1 = 10%).
    pub margin: f64,
    /// `None`: choose automatically.
    pub device: Option<DeviceKind>,
    pub caps: MemoryCaps,
    /// Devices not to use (set after a device was lost).
    pub exclude: Vec<DeviceKind>,
}

/// Plans `job` with `opts` for a device with `limits`: every program the job runs.
pub fn plan_job(
    cfg: &ModelConfig,
    opts: &TrainOptions,
    job: Job,
    limits: Limits,
) -> Result<MemoryPlan> {
    let programs: Vec<Program> = opts
        .job_programs(job)
        .into_iter()
        .map(|k| Program::build(cfg, &opts.adam, k))
        .collect::<Result<_>>()?;
    let specs: Vec<ProgramSpec<'_>> = programs
        .iter()
        .map(|p| ProgramSpec {
            name: p.key.to_string(),
            graph: &p.graph,
            outputs: p.outputs(),
            persistent: p.persistent.clone(),
        })
        .collect();
    MemoryPlan::new(&specs, limits)
}

/// The outcome of planning on every device.
#[derive(Debug, Clone)]
pub struct Decision {
    pub candidates: Vec<Candidate>,
    /// Index of the chosen candidate.
    pub chosen: Option<usize>,
    /// Devices that could not be used, with the reason.
    pub unavailable: Vec<(String, String)>,
    /// Plan and options behind each candidate.
    plans: Vec<(MemoryPlan, TrainOptions, DeviceInfo)>,
    /// What an estimated time is for: `training step` or `evaluation`.
    unit: &'static str,
}

/// Plans `req` on every device present (or the one asked for) and chooses.
pub fn decide(req: &Request) -> Result<Decision> {
    req.cfg.validate()?;
    check_job(&req.cfg, req.job, req.tbptt)?;
    let host = HostNeed::of(&req.cfg, req.job);
    let found = discover(&req.caps);
    // After discovery: the memory a GPU driver takes when it loads is no longer free.
    host.check(req.margin)?;
    let mut candidates = Vec::new();
    let mut plans = Vec::new();
    let mut unavailable = Vec::new();
    for dev in found {
        if req.device.is_some_and(|k| k != dev.kind) {
            continue;
        }
        if req.exclude.contains(&dev.kind) {
            unavailable.push((dev.id, "excluded after it failed during this run".into()));
            continue;
        }
        let info = match dev.info {
            Ok(info) => info,
            Err(why) => {
                unavailable.push((dev.id, why));
                continue;
            }
        };
        // Throughput does not depend on a memory cap, and a tiny cap must not stop the
        // measurement.
        let open_uncapped = || open(dev.kind, &MemoryCaps::default());
        let gflops = throughput_gflops(&info, open_uncapped)?;
        let costs = ProgramCosts::for_job(dev.kind, &info.name, &req.cfg, req.job, open_uncapped)?;
        let speed = Speed { gflops, costs };
        for (c, p, o) in plan_device(req, &dev.id, &info, &speed, &host)? {
            candidates.push(c);
            plans.push((p, o, info.clone()));
        }
    }
    let allow_software = req.device == Some(DeviceKind::Wgpu);
    let chosen = choose(&mut candidates, allow_software);
    let unit = match req.job {
        Job::Train { .. } => "training step",
        Job::Eval { .. } => "evaluation",
    };
    Ok(Decision {
        candidates,
        chosen,
        unavailable,
        plans,
        unit,
    })
}

type Planned = (Candidate, MemoryPlan, TrainOptions);

/// What the time estimates of one device come from (see `estimate.rs`).
struct Speed {
    gflops: f64,
    costs: Option<ProgramCosts>,
}

/// The rows one device contributes: its fastest plan (to show why it was rejected, if it
/// was) and the fastest plan that fits, or else the smallest plan found. A device whose
/// memory is host memory has the job's host bytes (`host`) taken off its free memory.
fn plan_device(
    req: &Request,
    id: &str,
    info: &DeviceInfo,
    speed: &Speed,
    host: &HostNeed,
) -> Result<Vec<Planned>> {
    let seen = |s: &Strategy| device_info(info, host.with_strategy(&req.cfg, req.job, s));
    let mut options: Vec<(Strategy, TrainOptions, f64)> = strategies(req.job, req.tbptt)
        .into_iter()
        .map(|s| {
            let o = s.options(req);
            let t = estimate_seconds(
                &req.cfg,
                &o,
                req.job,
                info.kind,
                speed.gflops,
                speed.costs.as_ref(),
            );
            (s, o, t)
        })
        .collect();
    // The last strategy saves the most memory; if even it does not fit, plan only the
    // fastest (to show the gap) and it. Its plan is kept for the loop below.
    let most_saving = options.last().cloned();
    options.sort_by(|a, b| a.2.total_cmp(&b.2));
    let mut saving_plan = None;
    if let Some(last) = most_saving {
        let plan = plan_job(&req.cfg, &last.1, req.job, Limits::from(info));
        let fits = plan
            .as_ref()
            .is_ok_and(|p| p.peak_bytes() <= usable_bytes(&seen(&last.0), req.margin));
        saving_plan = Some((last.0, plan));
        if !fits {
            let fastest = options.first().cloned();
            options = fastest.into_iter().chain([last]).collect();
        }
    }
    // Plan in order of estimated time until one fits.
    let mut fastest: Option<Planned> = None;
    let mut smallest: Option<Planned> = None;
    let mut fitting: Option<Planned> = None;
    for (s, o, t) in options {
        let planned = match saving_plan.take_if(|(saving, _)| *saving == s) {
            Some((_, plan)) => plan,
            None => plan_job(&req.cfg, &o, req.job, Limits::from(info)),
        };
        let plan = match planned {
            Ok(p) => p,
            // A tensor larger than the device's largest buffer: try smaller chunks.
            Err(Error::Input(_)) => continue,
            Err(e) => return Err(e),
        };
        let c = Candidate::new(
            id.to_string(),
            &seen(&s),
            req.margin,
            s.describe(req.job),
            plan.peak_bytes(),
            t,
            plan.breakdown(),
        );
        let entry = (c, plan, o);
        if fastest.is_none() {
            fastest = Some(entry.clone());
        }
        if entry.0.fits {
            fitting = Some(entry);
            break;
        }
        if smallest
            .as_ref()
            .is_none_or(|s| entry.0.estimated_peak_bytes < s.0.estimated_peak_bytes)
        {
            smallest = Some(entry);
        }
    }
    let mut rows: Vec<Planned> = fastest.into_iter().collect();
    if let Some(s) = fitting.or(smallest) {
        if rows.first().is_none_or(|f| f.0.strategy != s.0.strategy) {
            rows.push(s);
        }
    }
    Ok(rows)
}

impl Decision {
    /// The chosen candidate with its plan and options.
    pub fn chosen(&self) -> Option<(&Candidate, &MemoryPlan, &TrainOptions, &DeviceInfo)> {
        let i = self.chosen?;
        let (p, o, d) = &self.plans[i];
        Some((&self.candidates[i], p, o, d))
    }

    /// The error for a job that fits nowhere: the smallest plan and the largest capacity.
    pub fn nothing_fits(&self) -> Error {
        if let Some(sw) = self.candidates.iter().find(|c| c.fits && c.software) {
            return Error::input(format!(
                "no device chosen automatically fits; {} ({}) fits with {}, but it is a software device, used only when asked for: add --device wgpu to run there",
                sw.device, sw.device_name, sw.strategy
            ));
        }
        let smallest = self
            .candidates
            .iter()
            .min_by_key(|c| c.estimated_peak_bytes);
        let largest = self.candidates.iter().max_by_key(|c| c.capacity_bytes);
        match (smallest, largest) {
            (Some(s), Some(l)) => Error::OutOfMemory {
                device: format!(
                    "every device (smallest plan: {} on {}, {}; largest usable capacity: {} on {}; training memory depends on --batch and --tbptt)",
                    format_bytes(s.estimated_peak_bytes),
                    s.device,
                    s.strategy,
                    format_bytes(l.capacity_bytes),
                    l.device
                ),
                requested: s.estimated_peak_bytes,
                available: l.capacity_bytes,
            },
            _ => Error::input(format!(
                "no device is available: {}",
                self.unavailable
                    .iter()
                    .map(|(d, w)| format!("{d}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )),
        }
    }

    /// `{"candidates": [...], "chosen": {...} | null, "unavailable": [...]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "candidates": self.candidates.iter().map(Candidate::to_json).collect::<Vec<_>>(),
            "chosen": self.chosen.map(|i| self.candidates[i].to_json()),
            "unavailable": self.unavailable.iter().map(|(d, w)| json!({"device": d, "reason": w})).collect::<Vec<_>>(),
        })
    }

    /// The candidates as a table a person reads, one line each, then the choice.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<8} {:>10} {:>10}  {:<4} {:<40} {:>10}  why",
            "device", "usable", "needs", "fits", "strategy", "est. time"
        );
        for c in &self.candidates {
            let _ = writeln!(
                s,
                "{:<8} {:>10} {:>10}  {:<4} {:<40} {:>10}  {}",
                c.device,
                format_bytes(c.capacity_bytes),
                format_bytes(c.estimated_peak_bytes),
                if c.fits { "yes" } else { "no" },
                c.strategy,
                format_seconds(c.estimated_seconds),
                c.reason
            );
        }
        for (d, why) in &self.unavailable {
            let _ = writeln!(s, "{d:<8} unavailable: {why}");
        }
        match self.chosen() {
            Some((c, _, _, info)) => {
                let _ = writeln!(
                    s,
                    "chosen: {} ({}), {}, estimated {} per {}",
                    c.device,
                    info.name,
                    c.strategy,
                    format_seconds(c.estimated_seconds),
                    self.unit
                );
            }
            None => {
                let _ = writeln!(s, "chosen: nothing fits");
            }
        }
        s
    }
}

pub fn format_seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}

/// A move to another plan or device after the device failed during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The optimizer step that was being taken (repeated on the new plan).
    pub step: u64,
    pub from: String,
    pub to: String,
    pub error: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {}: {}; moved from {} to {} without losing the training state, and repeated the step",
            self.step, self.error, self.from, self.to
        )
    }
}

/// A job running on its chosen device. Its training steps and evaluations survive the
/// device failing: before each, the training state is copied to the host; on
/// out-of-memory (or a lost device) the session frees what it held, replans with the
/// device's capacity as it is now (or without the device), restores the state on the new
/// plan and repeats the step. [`Session::fallbacks`] records each move.
#[derive(Debug)]
pub struct Session {
    pub trainer: Trainer,
    pub device: String,
    pub strategy: String,
    pub plan: MemoryPlan,
    /// Every recovery so far, oldest first.
    pub fallbacks: Vec<Fallback>,
    req: Request,
    /// The host copy of the state taken before the last step, kept so the next snapshot
    /// reuses its memory.
    snapshot: Option<Checkpoint>,
}

/// How many times one step may move before the session gives up.
const MAX_FALLBACKS_PER_STEP: usize = 3;

/// Opens the chosen device and allocates the chosen plan's arenas there.
pub fn start(req: &Request, decision: &Decision, params: &ParamStore) -> Result<Session> {
    let (_, _, _, info) = decision.chosen().ok_or_else(|| decision.nothing_fits())?;
    let backend = open(info.kind, &req.caps)?;
    start_on(req, decision, params, backend)
}

/// As [`start`], on a backend the caller opened (for example one wrapped to inject
/// faults).
pub fn start_on(
    req: &Request,
    decision: &Decision,
    params: &ParamStore,
    backend: Box<dyn tensorfit_core::Backend>,
) -> Result<Session> {
    let (c, plan, opts, _) = decision.chosen().ok_or_else(|| decision.nothing_fits())?;
    let trainer = Trainer::with_layout(
        backend,
        req.cfg.clone(),
        params,
        opts.clone(),
        plan.layout(),
    )?;
    Ok(Session {
        trainer,
        device: c.device.clone(),
        strategy: c.strategy.clone(),
        plan: plan.clone(),
        fallbacks: Vec::new(),
        req: req.clone(),
        snapshot: None,
    })
}

impl Session {
    /// The measured peak, comparable with the plan's estimate: the most bytes the backend
    /// had allocated for tensors, plus the memory it holds itself (its reported overhead:
    /// context, library workspaces, parameter rings), which the plan also counts.
    pub fn measured_peak_bytes(&self) -> u64 {
        self.trainer.memory().peak + self.trainer.device_info().overhead_bytes
    }

    /// One training step, recovering from device failures (see the type's docs).
    pub fn train_step(&mut self, x: &HostTensor, labels: &[f32]) -> Result<StepReport> {
        self.with_recovery(|t| t.train_step(x, labels))
    }

    /// An evaluation, recovering from device failures.
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        self.with_recovery(|t| t.evaluate(x, labels))
    }

    fn with_recovery<T>(&mut self, mut run: impl FnMut(&mut Trainer) -> Result<T>) -> Result<T> {
        let snapshot = match self.snapshot.take() {
            Some(mut s) => {
                self.trainer.checkpoint_into(&mut s)?;
                s
            }
            None => self.trainer.checkpoint()?,
        };
        for _ in 0..MAX_FALLBACKS_PER_STEP {
            match run(&mut self.trainer) {
                Err(e) if e.is_device_failure() => self.recover(&snapshot, e)?,
                other => {
                    self.snapshot = Some(snapshot);
                    return other;
                }
            }
        }
        run(&mut self.trainer)
    }

    /// Frees the failed device's memory, replans and restores `snapshot` on the new plan.
    fn recover(&mut self, snapshot: &Checkpoint, error: Error) -> Result<()> {
        let info = self.trainer.device_info();
        let held = self.trainer.memory().allocated;
        let mut req = self.req.clone();
        match &error {
            Error::DeviceLost { .. } => req.exclude.push(info.kind),
            _ => {
                // What this device can give once our own buffers are freed.
                let now = info
                    .free_bytes
                    .unwrap_or(info.total_bytes)
                    .saturating_add(held)
                    .min(info.total_bytes);
                let cap = req.caps.get(info.kind).map_or(now, |c| c.min(now));
                req.caps.0.insert(info.kind, cap);
            }
        }
        // The failed device may refuse even this; its memory is what we are giving up.
        let _ = self.trainer.release_memory();
        let decision = decide(&req)?;
        if decision.chosen.is_none() {
            return Err(Error::input(format!(
                "{error}; and no plan fits any more: {}",
                decision.nothing_fits()
            )));
        }
        let mut next = start(&req, &decision, &snapshot.params)?;
        next.trainer
            .restore_optimizer(&snapshot.optimizer, snapshot.step)?;
        let fallback = Fallback {
            step: snapshot.step + 1,
            from: format!("{} ({})", self.device, self.strategy),
            to: format!("{} ({})", next.device, next.strategy),
            error: error.to_string(),
        };
        next.fallbacks = std::mem::take(&mut self.fallbacks);
        next.fallbacks.push(fallback);
        *self = next;
        Ok(())
    }
}
