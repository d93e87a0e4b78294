//! Plans with bounds: one plan made for batch ≤ 12 × 20 steps runs random shapes within
//! it (a seeded draw; `TENSORFIT_BOUNDS_SEED` picks another), each giving bit for bit what
//! an exact plan of that shape gives from the same state: the step's loss, outputs and
//! gradient norm, every gradient and updated parameter, and an evaluation's loss and
//! outputs. The bound's arenas are allocated once and never grow, and their total is the
//! plan's peak. Cases: an LSTM with a head on the last step (BatchNorm), its training
//! segment recomputed, its evaluation in micro-batches; a GRU with dropout and a head on
//! every step over padded batches, windowed truncated BPTT recomputed; an LSTM over
//! padded batches. Every strategy is planned at the bound.
//!
//! Same numbers, not close ones: both runs execute the same graph (the shape's own) on the
//! same CPU kernels; only where its tensors live differs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::rows::IGNORE_LABEL;
use tensorfit_core::{Activation, Backend, HostTensor, Layout};
use tensorfit_cpu::CpuBackend;
use tensorfit_nn::{
    Cell, DropoutRate, HeadOn, Job, ModelDescription, OptimConfig, ParamStore, Program, ProgramKey,
    Rng, SeedShape, TbpttMode, TrainOptions, Trainer,
};
use tensorfit_plan::{Limits, MemoryPlan, ProgramSpec};

const BOUND: (usize, usize) = (12, 20);
/// Shapes drawn per case.
const SHAPES: usize = 24;

/// Plans `keys` of `model` for the CPU backend, as the engine's `plan_job` does.
fn plan(model: &ModelDescription, opts: &TrainOptions, keys: &[ProgramKey]) -> MemoryPlan {
    let programs: Vec<Program> = keys
        .iter()
        .map(|&k| Program::build(model, &opts.optim, k).unwrap())
        .collect();
    let specs: Vec<ProgramSpec<'_>> = programs.iter().map(Program::spec).collect();
    MemoryPlan::new(&specs, Limits::from(&CpuBackend::new().info())).unwrap()
}

fn shape() -> SeedShape {
    SeedShape {
        features: 5,
        hidden: 6,
        layers: 2,
        dense: 5,
        classes: 3,
        activation: Activation::Tanh,
    }
}

struct Case {
    name: &'static str,
    model: ModelDescription,
    opts: TrainOptions,
    /// The smallest batch drawn (BatchNorm in training needs two rows).
    least_batch: usize,
}

fn cases() -> Vec<Case> {
    let lstm = shape().description();
    let mut gru = shape().description();
    gru.recurrent_mut().unwrap().cell = Cell::Gru;
    gru.recurrent_mut().unwrap().dropout = DropoutRate::new(0.2).unwrap();
    gru.head.on = HeadOn::EveryStep;
    // A head on every step recomputes with no BatchNorm in it.
    gru.head.layers.retain(|l| l.name == "dense");
    let optim = OptimConfig::adam(0.01);
    vec![
        Case {
            name: "lstm, head on the last step, recomputed, micro-batches",
            model: lstm.clone(),
            opts: TrainOptions {
                tbptt: 8,
                chunk: 5,
                micro_batch: Some(5),
                recompute: Some(3),
                optim,
                ..TrainOptions::default()
            },
            least_batch: 2,
        },
        Case {
            name: "gru, head on every step, padded, windows recomputed",
            model: gru,
            opts: TrainOptions {
                tbptt: 6,
                tbptt_mode: TbpttMode::Windows,
                chunk: 4,
                micro_batch: Some(4),
                recompute: Some(2),
                padded: true,
                seed: 3,
                optim,
                ..TrainOptions::default()
            },
            least_batch: 1,
        },
        Case {
            name: "lstm, head on the last step, padded",
            model: lstm,
            opts: TrainOptions {
                tbptt: 7,
                chunk: 5,
                padded: true,
                optim,
                ..TrainOptions::default()
            },
            least_batch: 2,
        },
    ]
}

/// A batch of `[t, b]`: inputs, labels, and lengths when padded (each reaching the
/// steps its head reads: into the last segment with a head on the last step).
struct Data {
    x: HostTensor,
    labels: Vec<f32>,
    lengths: Option<Vec<f32>>,
}

fn data(case: &Case, (b, t): (usize, usize), rng: &mut Rng) -> Data {
    let features = match case.model.input {
        tensorfit_nn::InputSpec::Dense { features } => features,
        tensorfit_nn::InputSpec::Tokens { .. } => unreachable!("the cases read features"),
    };
    let classes = case.model.loss.outputs();
    let lengths: Option<Vec<usize>> = case.opts.padded.then(|| {
        let least = match case.model.head.on {
            HeadOn::Sequence(_) => t - case.opts.tbptt.min(t) + 1,
            HeadOn::EveryStep => 1,
        };
        (0..b).map(|_| rng.int_inclusive(least, t)).collect()
    });
    let len = |r: usize| lengths.as_ref().map_or(t, |l| l[r]);
    let mut x = vec![0.0; t * b * features];
    for s in 0..t {
        for r in (0..b).filter(|&r| s < len(r)) {
            let at = (s * b + r) * features;
            x[at..at + features]
                .iter_mut()
                .for_each(|v| *v = rng.normal());
        }
    }
    let class = |rng: &mut Rng| rng.int_inclusive(0, classes - 1) as f32;
    let labels = match case.model.head.on {
        HeadOn::Sequence(_) => (0..b).map(|_| class(rng)).collect(),
        HeadOn::EveryStep => (0..t * b)
            .map(|i| match i / b < len(i % b) {
                true => class(rng),
                false => IGNORE_LABEL,
            })
            .collect(),
    };
    Data {
        x: HostTensor::new([t, b, features], x).unwrap(),
        labels,
        lengths: lengths.map(|l| l.into_iter().map(|v| v as f32).collect()),
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn same(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(
        bits(a),
        bits(b),
        "{what}: the bound's run {a:?}, the exact plan's {b:?}"
    );
}

fn same_stores(what: &str, a: &ParamStore, b: &ParamStore) {
    let mut names: Vec<&String> = a.iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(
        names.len(),
        b.iter().count(),
        "{what}: the number of tensors"
    );
    for n in names {
        same(
            &format!("{what} `{n}`"),
            &a.get(n).unwrap().data,
            &b.get(n).unwrap().data,
        );
    }
}

fn seed() -> u64 {
    std::env::var("TENSORFIT_BOUNDS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_240_530)
}

fn bound_job() -> Job {
    Job::Train {
        batch: BOUND.0,
        seq_len: BOUND.1,
        eval: Some(BOUND),
    }
}

/// A trainer on the plan of the bound, and the plan.
fn bounded(case: &Case, params: &ParamStore) -> (Trainer, MemoryPlan) {
    let keys = case.opts.bound_programs(&case.model, bound_job());
    let plan = plan(&case.model, &case.opts, &keys);
    let t = Trainer::with_bound(
        Box::new(CpuBackend::new()),
        case.model.clone(),
        params,
        case.opts.clone(),
        plan.layout(),
        bound_job(),
    )
    .unwrap();
    (t, plan)
}

/// A trainer on the exact plan of training and evaluating `[t, b]`, in the state of
/// `from`.
fn exact(case: &Case, from: &mut Trainer, (b, t): (usize, usize)) -> Trainer {
    let job = Job::Train {
        batch: b,
        seq_len: t,
        eval: Some((b, t)),
    };
    let layout: Layout = plan(
        &case.model,
        &case.opts,
        &case.opts.job_programs(&case.model, job),
    )
    .layout();
    let ck = from.checkpoint().unwrap();
    let backend = Box::new(CpuBackend::new());
    let mut e = Trainer::with_layout(
        backend,
        case.model.clone(),
        &ck.params,
        case.opts.clone(),
        layout,
    )
    .unwrap();
    e.restore_state(&ck).unwrap();
    e.restore_schedule(from.schedule_state());
    e
}

#[test]
fn a_plan_for_a_bound_runs_every_shape_within_it_as_its_exact_plan_does() {
    let seed = seed();
    println!("seed {seed} (TENSORFIT_BOUNDS_SEED)");
    let mut rng = Rng::new(seed);
    for case in cases() {
        let params = ParamStore::init(&case.model, 4).unwrap();
        let (mut t, plan) = bounded(&case, &params);
        let allocated = t.memory().allocated;
        assert_eq!(
            allocated,
            plan.arena_bytes.iter().sum::<u64>(),
            "{}",
            case.name
        );
        for i in 0..SHAPES {
            // The bound itself among them.
            let (b, s) = match i {
                0 => BOUND,
                _ => (
                    rng.int_inclusive(case.least_batch, BOUND.0),
                    rng.int_inclusive(1, BOUND.1),
                ),
            };
            let what = format!("{}, shape {b} × {s}", case.name);
            let d = data(&case, (b, s), &mut rng);
            let mut e = exact(&case, &mut t, (b, s));
            let lengths = d.lengths.as_deref();
            let got = t.train_step_at(&d.x, &d.labels, lengths).unwrap();
            let want = e.train_step_at(&d.x, &d.labels, lengths).unwrap();
            assert_eq!(got.step, want.step, "{what}");
            same(&format!("{what}: loss"), &[got.loss], &[want.loss]);
            same(
                &format!("{what}: outputs"),
                &got.probs.data,
                &want.probs.data,
            );
            let norm = |r: &tensorfit_nn::StepReport| r.grad_norm.into_iter().collect::<Vec<_>>();
            same(&format!("{what}: gradient norm"), &norm(&got), &norm(&want));
            let (g, w) = (t.gradients().unwrap(), e.gradients().unwrap());
            same_stores(&format!("{what}: gradient"), &g, &w);
            let (g, w) = (t.parameters().unwrap(), e.parameters().unwrap());
            same_stores(&format!("{what}: parameter"), &g, &w);
            let got = t.evaluate_at(&d.x, &d.labels, lengths).unwrap();
            let want = e.evaluate_at(&d.x, &d.labels, lengths).unwrap();
            same(
                &format!("{what}: evaluation loss"),
                &[got.loss],
                &[want.loss],
            );
            same(
                &format!("{what}: evaluation"),
                &got.probs.data,
                &want.probs.data,
            );
            // Nothing allocated for the shape: the bound's arenas, as planned.
            let m = t.memory();
            assert_eq!(m.allocated, allocated, "{what}: allocated");
            assert!(
                m.peak <= plan.peak_bytes(),
                "{what}: peak {} > plan {}",
                m.peak,
                plan.peak_bytes()
            );
        }
    }
}

#[test]
fn a_shape_outside_the_bound_is_refused_and_the_bound_still_runs() {
    let case = cases().remove(0);
    let params = ParamStore::init(&case.model, 4).unwrap();
    let (mut t, _) = bounded(&case, &params);
    let mut rng = Rng::new(1);
    let outside = (BOUND.0 + 1, BOUND.1);
    let job = Job::Train {
        batch: outside.0,
        seq_len: outside.1,
        eval: None,
    };
    assert!(!t.serves(job));
    assert!(t.serves(Job::Eval {
        batch: 3,
        seq_len: 9
    }));
    let d = data(&case, outside, &mut rng);
    let e = t.train_step(&d.x, &d.labels).unwrap_err().to_string();
    assert!(e.contains("outside the plan's bound"), "{e}");
    let d = data(&case, (3, 9), &mut rng);
    assert!(t.train_step(&d.x, &d.labels).unwrap().loss.is_finite());
}

/// The cost of a shape inside a bound against its exact plan: training steps and
/// evaluations of `3 × 10` on a plan for `32 × 120` and on the plan for `3 × 10`,
/// interleaved, median of each. Figures go to docs/planning.md ("Plans with bounds");
/// run with `cargo test --release -p tensorfit-nn --test bounds -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn a_small_shape_inside_a_large_bound_costs_what_its_exact_plan_costs() {
    use std::time::Instant;
    let mut model = shape().description();
    model.input = tensorfit_nn::InputSpec::Dense { features: 16 };
    model.recurrent_mut().unwrap().hidden = 64;
    let opts = TrainOptions {
        tbptt: 40,
        chunk: 40,
        optim: OptimConfig::adam(0.001),
        ..TrainOptions::default()
    };
    let case = Case {
        name: "measure",
        model,
        opts,
        least_batch: 2,
    };
    let (bound, small) = ((32, 120), (3, 10));
    let job = Job::Train {
        batch: bound.0,
        seq_len: bound.1,
        eval: Some(bound),
    };
    let params = ParamStore::init(&case.model, 4).unwrap();
    let started = Instant::now();
    let keys = case.opts.bound_programs(&case.model, job);
    let bound_plan = plan(&case.model, &case.opts, &keys);
    let bound_ms = started.elapsed().as_secs_f64() * 1e3;
    let exact_at_bound = plan(
        &case.model,
        &case.opts,
        &case.opts.job_programs(&case.model, job),
    );
    let mut t = Trainer::with_bound(
        Box::new(CpuBackend::new()),
        case.model.clone(),
        &params,
        case.opts.clone(),
        bound_plan.layout(),
        job,
    )
    .unwrap();
    let mut e = exact(&case, &mut t, small);
    let d = data(&case, small, &mut Rng::new(5));
    let time = |t: &mut Trainer| {
        let started = Instant::now();
        t.train_step(&d.x, &d.labels).unwrap();
        let train = started.elapsed().as_secs_f64() * 1e6;
        let started = Instant::now();
        t.evaluate(&d.x, &d.labels).unwrap();
        (train, started.elapsed().as_secs_f64() * 1e6)
    };
    let first = (time(&mut t), time(&mut e));
    let mut runs = (Vec::new(), Vec::new());
    for _ in 0..200 {
        runs.0.push(time(&mut t));
        runs.1.push(time(&mut e));
    }
    let median = |v: &mut Vec<(f64, f64)>, f: fn(&(f64, f64)) -> f64| {
        let mut x: Vec<f64> = v.iter().map(f).collect();
        x.sort_by(f64::total_cmp);
        x[x.len() / 2]
    };
    println!(
        "bound {bound:?}: {} programs planned in {bound_ms:.1} ms, peak {} B (the exact plan of the bound: {} B)",
        keys.len(),
        bound_plan.peak_bytes(),
        exact_at_bound.peak_bytes()
    );
    println!(
        "first step and evaluation of {small:?} (µs): bound {:.0} + {:.0}, exact {:.0} + {:.0}",
        first.0 .0, first.0 .1, first.1 .0, first.1 .1
    );
    for (what, f) in [
        (
            "train step",
            (|r: &(f64, f64)| r.0) as fn(&(f64, f64)) -> f64,
        ),
        ("evaluation", |r: &(f64, f64)| r.1),
    ] {
        let (b, x) = (median(&mut runs.0, f), median(&mut runs.1, f));
        println!(
            "{what} of {small:?}, median of 200 (µs): bound {b:.1}, exact {x:.1}, ratio {:.3}",
            b / x
        );
    }
}
