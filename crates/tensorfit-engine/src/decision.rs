//! The decision: plan a job on every device and choose one.
//!
//! For each device that is present, the decision measures (or reads from the cache) its
//! throughput, enumerates the strategies that give the same results (the whole sequence
//! at once, or streamed in time chunks carrying (h, c), or in micro-batches, for the
//! inference parts), orders them by estimated time, and plans them in that order until
//! one fits. The fastest fitting plan over all devices is chosen ([`Choice`]);
//! [`crate::session`] then runs it.

use tensorfit_core::{DeviceInfo, DeviceKind, Error, Result};
use tensorfit_cpu::host_memory;
use tensorfit_nn::{
    Job, ModelDescription, OptimConfig, Program, ProgramKey, TbpttMode, TrainOptions,
};
use tensorfit_plan::{choose, usable_bytes, Candidate, Limits, MemoryPlan, ProgramSpec};

use crate::calibrate::{throughput_gflops, Calibration, NOMINAL_GFLOPS};
use crate::devices::{discover_kind, open_device, DeviceStatus, MemoryCaps};
use crate::distributed::DataParallel;
use crate::estimate::{estimate_seconds, ProgramCosts};
use crate::host_budget::{seen_by_job, HostNeed};
use crate::registry;
use crate::strategy::{check_job, strategies, Strategy};

mod nothing_fits;
mod report;
pub use nothing_fits::NothingFits;

/// What to plan and run.
#[derive(Debug, Clone)]
pub struct Request {
    /// The model to plan.
    pub cfg: ModelDescription,
    /// What the run will do (training or evaluation), read as a bound: the largest batch
    /// and length. The plan serves every shape within it (`Trainer::with_bound`); a
    /// shape outside it is planned again ([`crate::session::Session::switch_job`]).
    pub job: Job,
    /// Truncated-BPTT length for training.
    pub tbptt: usize,
    /// How a sequence longer than `tbptt` is trained on.
    pub tbptt_mode: TbpttMode,
    /// Optimizer, clipping and schedule for training.
    pub optim: OptimConfig,
    /// The run's seed, which dropout masks are drawn from ([`TrainOptions::seed`]).
    pub seed: u64,
    /// Fraction of free memory kept unused (0.1 = 10%).
    pub margin: f64,
    /// `None`: choose automatically.
    pub device: Option<DeviceKind>,
    /// Memory caps per device kind (`--device-memory`).
    pub caps: MemoryCaps,
    /// Devices not to use (set after a device was lost).
    pub exclude: Vec<DeviceKind>,
    /// Host bytes of the batches a file reader holds besides the one in use
    /// (`HostNeed::read_ahead`); 0 when the inputs are made in memory.
    pub read_ahead_bytes: u64,
    /// Batches are padded: every program takes the sequences' lengths
    /// ([`TrainOptions::padded`]).
    pub padded: bool,
    /// Data-parallel training (`None`: this process alone): each step is split at its
    /// gradients, which the host averages over the ranks, and at the head of a model
    /// with BatchNorm, whose statistics are the global batch's.
    pub data_parallel: Option<DataParallel>,
    /// Batches may continue the previous batch's sequences, starting from the state it
    /// left ([`TrainOptions::carry_across`]).
    pub carry_across: bool,
    /// When the devices' speed is measured for the time estimates.
    pub calibration: Calibration,
}

impl Request {
    /// The request for `job` of `cfg` (training with BPTT length `tbptt` and `optim`) on
    /// every device present, uncapped, with the default margin
    /// ([`tensorfit_plan::DEFAULT_MARGIN`]); nothing excluded, no read-ahead. See
    /// [`Request::on`].
    pub fn new(cfg: ModelDescription, job: Job, (tbptt, optim): (usize, OptimConfig)) -> Request {
        Request {
            cfg,
            job,
            tbptt,
            optim,
            margin: tensorfit_plan::DEFAULT_MARGIN,
            device: None,
            caps: MemoryCaps::default(),
            exclude: Vec::new(),
            read_ahead_bytes: 0,
            tbptt_mode: TbpttMode::Last,
            seed: 0,
            padded: false,
            data_parallel: None,
            carry_across: false,
            calibration: Calibration::default(),
        }
    }

    /// The request on devices of `device` only (`None`: every kind), each kind's memory
    /// capped by `caps`, keeping `margin` of each device's free memory unused.
    pub fn on(self, device: Option<DeviceKind>, caps: MemoryCaps, margin: f64) -> Request {
        Request {
            device,
            caps,
            margin,
            ..self
        }
    }
}

/// The programs `job` runs with `opts`.
fn job_programs(cfg: &ModelDescription, opts: &TrainOptions, job: Job) -> Result<Vec<Program>> {
    opts.job_programs(cfg, job)
        .into_iter()
        .map(|k| Program::build(cfg, &opts.optim, k))
        .collect()
}

/// The host bytes of `job` outside the device plan ([`HostNeed`]): with the gradients'
/// copies of data-parallel training, and where a device whose kernels pack operands (the
/// CPU: `Hardware::packed_operands`) is a candidate (`cpu`: whether it is an assumed
/// one), its kernels' packed operands for the job's plainest strategy (the most rows), on
/// the kernel threads (an assumed CPU: one per core here).
pub fn host_need(req: &Request, job: Job, cpu: Option<bool>) -> Result<HostNeed> {
    let host = HostNeed::of(&req.cfg, job, req.read_ahead_bytes)?.with_ranks(
        &req.cfg,
        job,
        req.data_parallel,
    )?;
    let plain = strategies(&req.cfg, job, req.tbptt).into_iter().next();
    let (Some(assumed), Some(plain)) = (cpu, plain) else {
        return Ok(host);
    };
    // The kernel pool is running where a CPU was opened; an assumed one starts nothing.
    let threads = match assumed {
        false => tensorfit_cpu::threads::kernel_threads(),
        true => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let programs = job_programs(&req.cfg, &plain.options(req), job)?;
    Ok(host.with_cpu_kernels(&programs, threads))
}

/// Plans `job` with `opts` for a device with `limits`: every program the job runs.
pub fn plan_job(
    cfg: &ModelDescription,
    opts: &TrainOptions,
    job: Job,
    limits: Limits,
) -> Result<MemoryPlan> {
    plan_programs(cfg, opts, opts.job_programs(cfg, job), limits)
}

/// Plans the bound `bound` (a job read as maxima) with `opts` for a device with
/// `limits`: the programs of [`TrainOptions::bound_programs`], whose placements serve
/// every shape within the bound (`Trainer::with_bound`).
pub fn plan_bound(
    cfg: &ModelDescription,
    opts: &TrainOptions,
    bound: Job,
    limits: Limits,
) -> Result<MemoryPlan> {
    plan_programs(cfg, opts, opts.bound_programs(cfg, bound), limits)
}

/// Plans the programs `keys` of `cfg` with `opts` for a device with `limits`.
fn plan_programs(
    cfg: &ModelDescription,
    opts: &TrainOptions,
    keys: Vec<ProgramKey>,
    limits: Limits,
) -> Result<MemoryPlan> {
    let programs: Vec<Program> = keys
        .into_iter()
        .map(|k| Program::build(cfg, &opts.optim, k))
        .collect::<Result<_>>()?;
    let specs: Vec<ProgramSpec<'_>> = programs.iter().map(Program::spec).collect();
    MemoryPlan::new(&specs, limits)
}

/// The outcome of planning on every device.
#[derive(Debug, Clone)]
pub struct Decision {
    /// Every device's candidates, in the order planned.
    pub candidates: Vec<Candidate>,
    /// Index of the chosen candidate.
    pub chosen: Option<usize>,
    /// Devices that could not be used, with the reason.
    pub unavailable: Vec<(String, String)>,
    /// Plan, options and device behind each candidate.
    plans: Vec<Planned>,
    /// What an estimated time is for: `training step` or `evaluation`.
    unit: &'static str,
    /// The job planned, read as a bound: every shape within it runs on the plan.
    pub bound: Job,
    /// The job's host bytes outside the device plan.
    pub host: HostNeed,
    /// This process's resident memory when it planned (code, libraries, drivers).
    pub process_bytes: u64,
    /// The most this process had held resident when it planned (`VmHWM`): what opening
    /// the devices and measuring their speed took for a moment. The process's peak,
    /// which a run reports, is at least this.
    pub process_peak_bytes: u64,
}

/// Plans `req` on every device present (or the one asked for) and chooses.
pub fn decide(req: &Request) -> Result<Decision> {
    decide_on(req, discover_kind(&req.caps, req.device))
}

/// Plans `req` on the devices `found` (those present, or assumed ones: see `assume.rs`)
/// and chooses.
pub fn decide_on(req: &Request, found: Vec<DeviceStatus>) -> Result<Decision> {
    req.cfg.validate()?;
    check_job(&req.cfg, req.job, req.tbptt)?;
    let cpu = found.iter().find(|d| {
        registry::hardware(d.kind).packed_operands && req.device.is_none_or(|k| k == d.kind)
    });
    let host = host_need(req, req.job, cpu.map(|d| d.assumed.is_some()))?;
    // After discovery: the memory a GPU driver takes when it loads is no longer free.
    // Devices that are not here do not run on this host.
    if found.iter().any(|d| d.assumed.is_none()) {
        host.check(req.margin)?;
    }
    // A software device runs only when its kind is asked for.
    let allow_software = req.device.is_some();
    let measure = match req.calibration {
        Calibration::Always => true,
        Calibration::Never => false,
        // More than one device the job may run on: their times decide. A software GPU is
        // measured too: its measurement compiles a pipeline through the driver's LLVM
        // before the plan reads the process's peak, which its host plan counts on
        // (`tensorfit_wgpu::SOFTWARE_DRIVER_BYTES` is the driver's share beyond that
        // peak; without it a first run, Mesa's shader cache empty, peaks 25-36 MiB above
        // its plan).
        Calibration::WhenChoosing => {
            let eligible: Vec<&DeviceInfo> = found
                .iter()
                .filter(|d| req.device.is_none_or(|k| k == d.kind))
                .filter(|d| !req.exclude.contains(&d.kind))
                .filter_map(|d| d.info.as_ref().ok())
                .filter(|i| allow_software || !i.software)
                .collect();
            eligible.len() > 1 || eligible.iter().any(|i| i.software)
        }
    };
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
        let speed = match &dev.assumed {
            // Nothing to measure: the published peak, or no estimate (NaN).
            Some(a) => Speed {
                gflops: a.peak_gflops.unwrap_or(f64::NAN),
                costs: None,
                shown: true,
            },
            None if !measure => Speed {
                gflops: NOMINAL_GFLOPS,
                costs: None,
                shown: false,
            },
            None => {
                // Throughput does not depend on a memory cap, and a tiny cap must not
                // stop the measurement.
                let open_uncapped = || open_device(dev.kind, dev.index, &MemoryCaps::default());
                let gflops = throughput_gflops(&info, open_uncapped)?;
                // Measuring needs memory of its own: where it fails (a nearly full
                // machine, a recovery after running out), the FLOP model estimates.
                let costs = ProgramCosts::for_job(
                    dev.kind,
                    &info.name,
                    &req.cfg,
                    req.job,
                    gflops,
                    open_uncapped,
                )
                .unwrap_or(None);
                Speed {
                    gflops,
                    costs,
                    shown: true,
                }
            }
        };
        // What the device has once the job's host bytes are out (the same for every
        // strategy: micro-batches read their sequences in place), and where that figure
        // comes from (a cgroup, `ulimit -v`), which the plans and their messages use.
        let info = seen_by_job(&info, &host, dev.assumed.is_some());
        let rows = match plan_device(req, &dev.id, &info, &speed)? {
            Ok(rows) => rows,
            Err(why) => {
                unavailable.push((dev.id, why));
                continue;
            }
        };
        for (candidate, plan, options) in rows {
            candidates.push(candidate);
            plans.push(Planned {
                plan,
                options,
                device: info.clone(),
            });
        }
    }
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
        bound: req.job,
        host,
        process_bytes: host_memory::resident().unwrap_or(0),
        process_peak_bytes: host_memory::peak_resident().unwrap_or(0),
    })
}

/// What stands behind one candidate.
#[derive(Debug, Clone)]
struct Planned {
    plan: MemoryPlan,
    options: TrainOptions,
    device: DeviceInfo,
}

/// The chosen candidate, with the plan, options and device it was planned with.
#[derive(Debug, Clone, Copy)]
pub struct Choice<'a> {
    /// The chosen candidate (device, strategy, estimates).
    pub candidate: &'a Candidate,
    /// Its memory plan.
    pub plan: &'a MemoryPlan,
    /// The options its programs are built with.
    pub options: &'a TrainOptions,
    /// The device it was planned for.
    pub device: &'a DeviceInfo,
}

/// A device's row before it is kept: the candidate, its plan and options.
type Row = (Candidate, MemoryPlan, TrainOptions);

/// What the time estimates of one device come from (see `estimate.rs`); a `gflops` of
/// NaN means none (an assumed device without a published peak).
struct Speed {
    gflops: f64,
    costs: Option<ProgramCosts>,
    /// Whether its estimates are shown: not for a device that was not measured, whose
    /// nominal speed only orders its strategies ([`Calibration`]).
    shown: bool,
}

/// The rows one device contributes (each plan made for `req.job` read as a bound: every
/// shape within it runs on the plan, `Trainer::with_bound`): its fastest plan (to show why it was rejected, if it
/// was) and the fastest plan that fits, or else the smallest plan found; or, when no
/// strategy can be planned on it at all (a tensor of each larger than its largest
/// buffer), why, so that the device is listed as unusable rather than left out. `info` is
/// the device as the job sees it ([`seen_by_job`]: where device memory is host memory,
/// the job's host bytes are off its free memory).
fn plan_device(
    req: &Request,
    id: &str,
    info: &DeviceInfo,
    speed: &Speed,
) -> Result<std::result::Result<Vec<Row>, String>> {
    let mut options: Vec<(Strategy, TrainOptions, f64)> = strategies(&req.cfg, req.job, req.tbptt)
        .into_iter()
        .map(|s| {
            let o = s.options(req);
            let t = if speed.gflops.is_nan() {
                f64::NAN
            } else {
                estimate_seconds(
                    &req.cfg,
                    &o,
                    req.job,
                    info.kind,
                    speed.gflops,
                    speed.costs.as_ref(),
                )
            };
            (s, o, t)
        })
        .collect();
    // The last strategy saves the most memory; if even it does not fit, plan only the
    // fastest (to show the gap) and it. Its plan is kept for the loop below.
    let most_saving = options.last().cloned();
    sort_by_estimate(&mut options);
    let mut saving_plan = None;
    if let Some(last) = most_saving {
        let plan = plan_bound(&req.cfg, &last.1, req.job, Limits::from(info));
        let fits = plan
            .as_ref()
            .is_ok_and(|p| p.peak_bytes() <= usable_bytes(info, req.margin));
        saving_plan = Some((last.0, plan));
        if !fits {
            let fastest = options.first().cloned();
            options = fastest.into_iter().chain([last]).collect();
        }
    }
    // Plan in order of estimated time until one fits.
    let mut fastest: Option<Row> = None;
    let mut smallest: Option<Row> = None;
    let mut fitting: Option<Row> = None;
    let mut unplannable = None;
    for (s, o, t) in options {
        let planned = match saving_plan.take_if(|(saving, _)| *saving == s) {
            Some((_, plan)) => plan,
            None => plan_bound(&req.cfg, &o, req.job, Limits::from(info)),
        };
        let plan = match planned {
            Ok(p) => p,
            // A tensor larger than the device's largest buffer: try smaller chunks.
            Err(Error::Input(why)) => {
                unplannable = Some(why);
                continue;
            }
            Err(e) => return Err(e),
        };
        let c = Candidate::new(
            id.to_string(),
            info,
            req.margin,
            s.describe(req.job),
            plan.peak_bytes(),
            if speed.shown { t } else { f64::NAN },
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
    let mut rows: Vec<Row> = fastest.into_iter().collect();
    if let Some(s) = fitting.or(smallest) {
        if rows.first().is_none_or(|f| f.0.strategy != s.0.strategy) {
            rows.push(s);
        }
    }
    Ok(match (rows.is_empty(), unplannable) {
        (true, Some(why)) => Err(format!("no strategy can be planned on it: {why}")),
        _ => Ok(rows),
    })
}

impl Decision {
    /// The chosen candidate with its plan, options and device.
    pub fn chosen(&self) -> Option<Choice<'_>> {
        let i = self.chosen?;
        let p = &self.plans[i];
        Some(Choice {
            candidate: &self.candidates[i],
            plan: &p.plan,
            options: &p.options,
            device: &p.device,
        })
    }

    /// The process's peak resident memory the chosen plan predicts: this process before
    /// the job, the job's host bytes, and the device plan where device memory is host
    /// memory; or the peak the process had already reached when it planned, if higher.
    pub fn planned_resident(&self) -> Option<u64> {
        self.planned_resident_from(self.process_bytes)
    }

    /// As [`Decision::planned_resident`], for a process that held `process` bytes before
    /// the job (a replan during a run: see `Session::restart`).
    pub fn planned_resident_from(&self, process: u64) -> Option<u64> {
        let c = self.chosen()?;
        let run = self.host.resident(process, c.plan.peak_bytes(), c.device);
        Some(run.max(self.process_peak_bytes))
    }
}

/// Estimates within this fraction of each other tie. They are measured on a machine whose
/// speed drifts 10–40% from minute to minute; a saving strategy does the same work as the
/// plain one plus overheads, and a choice between near-equal estimates would follow the
/// load at calibration time rather than the strategies.
pub const ESTIMATE_TIE: f64 = 0.10;

/// Orders strategies by estimated time; among those within [`ESTIMATE_TIE`] of the fastest
/// left, the plainer one (earlier in `strategies`' order) comes first. Options without an
/// estimate (NaN) keep their order after the others.
fn sort_by_estimate<T>(options: &mut [(Strategy, T, f64)]) {
    for i in 0..options.len() {
        let fastest = options[i..]
            .iter()
            .map(|o| o.2)
            .filter(|t| t.is_finite())
            .fold(f64::INFINITY, f64::min);
        if !fastest.is_finite() {
            return;
        }
        let bound = fastest + fastest.abs() * ESTIMATE_TIE;
        if let Some(j) = options[i..].iter().position(|o| o.2 <= bound) {
            // Moves the chosen option to `i`, keeping the others' order.
            options[i..=i + j].rotate_right(1);
        }
    }
}

#[cfg(test)]
mod tests;
