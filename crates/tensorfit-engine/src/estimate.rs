//! Estimated time of a training step or an evaluation, from the device's measured speed
//! on the model's own programs.
//!
//! A job is a sequence of program runs (`TrainOptions::train_programs`,
//! `eval_programs`): carry chunks, an evaluation chunk, a training segment. Each run
//! costs a fixed part (the head, the optimizer, launches, host round trips) plus a part
//! per time step (the LSTM stack), and both depend on the batch, the layer sizes and the
//! device in ways a FLOP count does not capture: a batch of one leaves GEMM units idle,
//! a hidden size of 1024 streams 16 MiB of recurrent weights per step, a small network
//! is dominated by fixed costs. So on the CPU the costs are *measured*: the model's own
//! evaluation and training programs run at a batch of the job's size (at most
//! [`MEASURE_BATCH`] rows: more rows cost in proportion) for [`SHORT`] steps and for a
//! longer run (up to [`LONG_MAX`] steps), and the two times give the fixed and per-step
//! parts ([`Linear`]). Measurements are cached with the throughput figures (`calibrate.rs`),
//! so a shape is measured once per build and machine.
//!
//! GPUs keep the FLOP model (FLOPs over the device's measured GEMM throughput plus a
//! fixed cost per run) until they can be measured the same way on real hardware; it is
//! optimistic by the GEMM efficiency the LSTM does not reach.

use std::time::Instant;

use tensorfit_core::{Backend, DeviceKind, HostTensor, Result};
use tensorfit_nn::{
    InputSpec, Job, ModelDescription, ParamStore, ProgramKey, ProgramKind, TrainOptions, Trainer,
};

use crate::calibrate::cached_figures;
use crate::registry;

/// Steps of the short measured run.
pub const SHORT: usize = 4;
/// The long run is doubled from `2 · SHORT` steps until it takes [`LONG_SECONDS`],
/// covers the job's own length or reaches [`LONG_MAX`] steps: per-step costs grow with
/// the length once activations spill out of the caches, so the long run should be as
/// long as the job where that is cheap, and short enough that a plan does not become a
/// benchmark where it is not.
pub const LONG_MAX: usize = 64;
/// The long measured run stops growing once it takes this many seconds.
pub const LONG_SECONDS: f64 = 0.1;
/// The most rows a measured run has. A larger batch costs in proportion to its rows
/// (the GEMMs are past the rows where more of them are cheaper per row), so a plan
/// measures, allocates and takes the same time whatever the job's batch.
pub const MEASURE_BATCH: usize = 64;

/// Seconds of one program run over `steps` time steps: `fixed + per_step · steps`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    /// Seconds of a run's fixed part (head, optimizer, launches).
    pub fixed: f64,
    /// Seconds per time step.
    pub per_step: f64,
}

impl Linear {
    /// From the times of a run over [`SHORT`] steps and one over `long_steps` (noise can
    /// make the longer run look cheaper per step; neither part is ever negative).
    fn from_runs(short: f64, long: f64, long_steps: usize) -> Linear {
        let per_step = ((long - short) / long_steps.saturating_sub(SHORT).max(1) as f64).max(0.0);
        Linear {
            fixed: (short - per_step * SHORT as f64).max(0.0),
            per_step,
        }
    }

    /// Seconds of a run over `steps` steps; a run costs at least [`MIN_SECONDS_PER_RUN`]
    /// on top of its steps, whatever the measured fixed part says.
    fn at(&self, steps: usize) -> f64 {
        self.fixed.max(MIN_SECONDS_PER_RUN) + self.per_step * steps as f64
    }

    /// Both parts times `factor`.
    fn scaled(&self, factor: f64) -> Linear {
        Linear {
            fixed: self.fixed * factor,
            per_step: self.per_step * factor,
        }
    }
}

/// Measured program costs of one model at one batch size on one device.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgramCosts {
    /// The batch size the costs were measured at: the job's, at most
    /// [`MEASURE_BATCH`].
    pub batch: usize,
    /// An inference run (carry or evaluation chunk) at `batch`.
    pub infer: Linear,
    /// An inference run at a batch of one, for micro-batches: fewer rows are not
    /// proportionally cheaper (a GEMM of one row streams the same weights as one of
    /// fifty), so micro-batch costs are interpolated between the two measurements.
    pub infer_one: Linear,
    /// A training segment (forward, backward, optimizer); `None` for evaluation jobs.
    pub train: Option<Linear>,
}

/// The least fixed cost of a program run (a few kernel calls and host round trips). The
/// measured fixed part is a difference of two noisy times and can come out as nothing;
/// this keeps plans of many short runs from looking as cheap as one long run.
const MIN_SECONDS_PER_RUN: f64 = 50e-6;

/// The longest a plan may spend measuring one shape (by the FLOP model, which is
/// optimistic, so the real time can be a few times longer, once per build and shape).
const MAX_MEASURE_SECONDS: f64 = 2.0;

/// Figures a measurement can give: seconds from a nanosecond to a day, and step counts.
const SANE_FIGURES: std::ops::RangeInclusive<f64> = 1e-9..=1e5;

impl ProgramCosts {
    /// The measured costs of `cfg` at the batch of `job` on the device `open` gives,
    /// from the cache or measured now. Only devices whose provider says so are measured
    /// (`Hardware::measures_programs`: the CPU; see the module doc).
    pub fn for_job(
        kind: DeviceKind,
        device_name: &str,
        cfg: &ModelDescription,
        job: Job,
        gflops: f64,
        open: impl Fn() -> Result<Box<dyn Backend>>,
    ) -> Result<Option<ProgramCosts>> {
        if !registry::hardware(kind).measures_programs {
            return Ok(None);
        }
        let (batch, steps, train) = match job {
            Job::Train { batch, seq_len, .. } => (batch, seq_len, true),
            Job::Eval { batch, seq_len } => (batch, seq_len, false),
        };
        let batch = batch.min(MEASURE_BATCH);
        // A plan must not become a benchmark: where even the shortest measurement (its
        // warm-up and one timed run of each length) would take longer than
        // MAX_MEASURE_SECONDS by the FLOP model, the FLOP model estimates instead.
        let probe = ProgramKey {
            kind: if train {
                ProgramKind::Train
            } else {
                ProgramKind::Eval
            },
            batch,
            steps: 2 * (SHORT + 2 * SHORT),
            recompute: None,
            padded: false,
        };
        if probe.flops(cfg) / (gflops.max(1e-3) * 1e9) > MAX_MEASURE_SECONDS {
            return Ok(None);
        }
        // The longest run worth measuring for this job, as a power of two (few keys).
        let longest = steps.next_power_of_two().clamp(2 * SHORT, LONG_MAX);
        let model = format!(
            "{}:{}:{}",
            kind.name(),
            device_name,
            tensorfit_nn::description_json::to_json(cfg)
        );
        let measured = |batch: usize, train: bool| -> Result<Linear> {
            let what = if train { "train" } else { "infer" };
            let key = format!("{what} {model} b={batch} t<={longest}");
            // Of two measurements, the one whose run of `longest` steps is shorter.
            let at_longest = |f: &[f64]| Linear::from_runs(f[0], f[1], f[2] as usize).at(longest);
            let faster = |new: &[f64], old: &[f64]| at_longest(new) < at_longest(old);
            let f = cached_figures(&key, 3, &SANE_FIGURES, faster, || {
                measure(open()?, cfg, batch, longest, train)
            })?;
            Ok(Linear::from_runs(f[0], f[1], f[2] as usize))
        };
        let infer = measured(batch, false)?;
        Ok(Some(ProgramCosts {
            batch,
            infer,
            infer_one: if batch > 1 {
                measured(1, false)?
            } else {
                infer
            },
            train: if train {
                Some(measured(batch, true)?)
            } else {
                None
            },
        }))
    }

    /// Seconds of one program run.
    fn run(&self, key: &ProgramKey) -> f64 {
        let infer = self.infer_at(key.batch);
        match key.kind {
            ProgramKind::Carry
            | ProgramKind::Eval
            | ProgramKind::EvalCarry
            | ProgramKind::HeadInput => infer.at(key.steps),
            ProgramKind::Train
            | ProgramKind::TrainCarry
            | ProgramKind::Grads
            | ProgramKind::StackGrads => {
                let train = self
                    .train
                    .map_or(infer, |t| t.scaled(self.rows_share(key.batch)))
                    .at(key.steps);
                // Recomputation runs the segment's forward a second time.
                match key.recompute {
                    Some(_) => train + infer.per_step * key.steps as f64,
                    None => train,
                }
            }
            // A few element-wise passes over the parameters, or the head over the
            // global batch's last step: small against any segment.
            ProgramKind::Update | ProgramKind::Head => 0.0,
        }
    }

    /// How many times the measured batch's cost `rows` rows cost: in proportion past the
    /// measured batch, else the measured batch's (training runs at the measured batch).
    fn rows_share(&self, rows: usize) -> f64 {
        (rows as f64 / self.batch.max(1) as f64).max(1.0)
    }

    /// Inference costs at `rows` sequences: measured at the job's batch (at most
    /// [`MEASURE_BATCH`], more rows in proportion) and at one, linear in between, and never cheaper per row than the whole batch (fewer rows
    /// are never more efficient; a noisy measurement at one row must not make
    /// micro-batches look faster than the batch they split).
    fn infer_at(&self, rows: usize) -> Linear {
        if rows >= self.batch || self.batch <= 1 {
            return self.infer.scaled(self.rows_share(rows));
        }
        let share = rows as f64 / self.batch as f64;
        let w = (rows.max(1) - 1) as f64 / (self.batch - 1) as f64;
        let mix = |one: f64, full: f64| (one + w * (full - one)).max(full * share);
        Linear {
            fixed: mix(self.infer_one.fixed, self.infer.fixed),
            per_step: mix(self.infer_one.per_step, self.infer.per_step),
        }
    }
}

/// Estimated seconds for one training step or one evaluation of `job` under `opts`:
/// the sum over the program runs, from `costs` where measured, else FLOPs over `gflops`
/// (the device's GEMM throughput) plus a fixed cost per run (the kind's
/// `Hardware::run_overhead_seconds`: launches and host round trips).
pub fn estimate_seconds(
    cfg: &ModelDescription,
    opts: &TrainOptions,
    job: Job,
    kind: DeviceKind,
    gflops: f64,
    costs: Option<&ProgramCosts>,
) -> f64 {
    let runs = opts.step_runs(cfg, job);
    if let Some(costs) = costs {
        return runs.iter().map(|(k, n)| costs.run(k) * *n as f64).sum();
    }
    let per_run = registry::hardware(kind).run_overhead_seconds;
    let flops = opts.step_flops(cfg, job);
    let count: u64 = runs.iter().map(|&(_, n)| n).sum();
    flops / (gflops.max(1e-3) * 1e9) + count as f64 * per_run
}

/// Times the evaluation (or training) program of `cfg` at `batch` on `backend` over
/// [`SHORT`] steps and over a longer run of at most `longest` steps (see
/// [`LONG_SECONDS`]): `[short seconds, long seconds, long steps]`. Each length runs once
/// to warm up (allocation, first touch), then a few times, alternating; the median of
/// each counts.
fn measure(
    backend: Box<dyn Backend>,
    cfg: &ModelDescription,
    batch: usize,
    longest: usize,
    train: bool,
) -> Result<Vec<f64>> {
    let opts = TrainOptions {
        tbptt: LONG_MAX,
        chunk: LONG_MAX,
        ..TrainOptions::default()
    };
    let params = ParamStore::init(cfg, 1)?;
    let mut trainer = Trainer::new(backend, cfg.clone(), &params, opts)?;
    // Class ids cycling through the classes, or regression targets of that value.
    let classes = cfg.loss.outputs();
    let targets = batch * cfg.loss.targets_per_row();
    let labels: Vec<f32> = (0..targets).map(|b| (b % classes) as f32).collect();
    let net = cfg.network()?;
    // Features in [-1, 1], or token ids cycling through the vocabulary.
    let value = |i: usize| match cfg.input {
        InputSpec::Dense { .. } => ((i % 17) as f32 - 8.0) / 8.0,
        InputSpec::Tokens { vocab, .. } => (i % vocab) as f32,
    };
    let input = |steps: usize| -> Result<HostTensor> {
        let shape = net.input_shape(batch, steps);
        let data = (0..shape.numel()).map(value).collect();
        HostTensor::new(shape, data)
    };
    let mut once = |x: &HostTensor| -> Result<f64> {
        let t = Instant::now();
        if train {
            trainer.train_step(x, &labels)?;
        } else {
            trainer.evaluate(x, &labels)?;
        }
        Ok(t.elapsed().as_secs_f64())
    };
    let short = input(SHORT)?;
    let mut warm = once(&short)?;
    let mut long_steps = 2 * SHORT;
    let mut long = input(long_steps)?;
    loop {
        let took = once(&long)?;
        warm += took;
        if took >= LONG_SECONDS || long_steps >= longest {
            break;
        }
        long_steps = (2 * long_steps).min(longest);
        long = input(long_steps)?;
    }
    // About half a second of timed runs, at least one and at most seven of each.
    let reps = ((0.5 / warm.max(1e-9)) as usize).clamp(1, 7);
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..reps {
        times.0.push(once(&short)?);
        times.1.push(once(&long)?);
    }
    Ok(vec![median(times.0), median(times.1), long_steps as f64])
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_batches_are_never_estimated_faster_than_the_batch_they_split() {
        let costs = |one: Linear| ProgramCosts {
            batch: 100,
            infer: Linear {
                fixed: 0.002,
                per_step: 0.005,
            },
            infer_one: one,
            train: None,
        };
        let job = Job::Eval {
            batch: 100,
            seq_len: 2000,
        };
        let cfg = ModelDescription::seed();
        // A measurement at one row that came out as nothing (noise), and a plausible one.
        for one in [
            Linear {
                fixed: 0.0,
                per_step: 0.0,
            },
            Linear {
                fixed: 0.001,
                per_step: 0.0004,
            },
        ] {
            let c = costs(one);
            let at = |micro: Option<usize>, chunk: usize| {
                let opts = TrainOptions {
                    micro_batch: micro,
                    chunk,
                    ..TrainOptions::default()
                };
                estimate_seconds(&cfg, &opts, job, DeviceKind::Cpu, 100.0, Some(&c))
            };
            let whole = at(None, 2000);
            for micro in [Some(50), Some(13), Some(1)] {
                for chunk in [2000, 250, 1] {
                    assert!(
                        at(micro, chunk) >= whole,
                        "{micro:?} {chunk}: {} < {whole}",
                        at(micro, chunk)
                    );
                }
            }
            assert!(at(None, 250) > whole);
            // Chunks of one step: 2000 runs, each paying at least the fixed cost.
            assert!(at(None, 1) >= whole + 1999.0 * MIN_SECONDS_PER_RUN * 0.999);
        }
    }

    #[test]
    fn a_token_model_is_measured_on_token_ids() {
        let mut cfg = ModelDescription::seed();
        cfg.recurrent_mut().unwrap().hidden = 8;
        cfg.input = InputSpec::Tokens {
            vocab: 5,
            embedding: Some(3),
        };
        let backend = Box::new(tensorfit_cpu::CpuBackend::new());
        let figures = measure(backend, &cfg, 2, 2 * SHORT, false).unwrap();
        assert!(
            figures.iter().all(|f| SANE_FIGURES.contains(f)),
            "{figures:?}"
        );
    }

    #[test]
    fn a_shape_too_large_to_measure_quickly_is_left_to_the_flop_model() {
        // An LSTM of 16,384 units: seconds per measured step even at MEASURE_BATCH rows
        // (a large batch alone is measured at that many rows). The backend is never
        // opened (opening would fail the call).
        let job = Job::Eval {
            batch: 100_000,
            seq_len: 2000,
        };
        let open = || -> Result<Box<dyn Backend>> {
            Err(tensorfit_core::Error::input("measured although too large"))
        };
        let costs = ProgramCosts::for_job(
            DeviceKind::Cpu,
            "test cpu",
            &ModelDescription::lstm_classifier(152, 16_384, 1, 6),
            job,
            100.0,
            open,
        );
        assert_eq!(costs.ok(), Some(None));
    }

    #[test]
    fn linear_costs_come_from_two_runs_and_are_never_negative() {
        let l = Linear::from_runs(0.010, 0.030, 8);
        assert!((l.per_step - 0.005).abs() < 1e-12 && (l.fixed - 0.0).abs() < 1e-12);
        assert!((l.at(100) - 0.5 - MIN_SECONDS_PER_RUN).abs() < 1e-9);
        let noisy = Linear::from_runs(0.030, 0.020, 8);
        assert_eq!(noisy.per_step, 0.0);
        assert_eq!(noisy.fixed, 0.030);
    }
}
