//! Plans with bounds on every device present: a plan made for batch ≤ 8 × 12 steps
//! (`session::plan_bound`) runs random shapes within it (a seeded draw,
//! `TENSORFIT_BOUNDS_SEED` picks another), each giving bit for bit what the exact plan of
//! that shape (`session::plan_job`) gives on the same device from the same state: the
//! step's loss and outputs, every updated parameter, an evaluation's outputs; nothing is
//! allocated past the bound's arenas. The CPU's fuller check is
//! `crates/tensorfit-nn/tests/bounds.rs`; this one runs the GPU kernels.
//!
//! Same numbers, not close ones: both runs dispatch the same graph (the shape's own) to
//! the same kernels with the same sizes; only the offsets of their tensors differ.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit::core::rows::IGNORE_LABEL;
use tensorfit::core::{Activation, HostTensor};
use tensorfit::devices::{open, MemoryCaps};
use tensorfit::nn::{
    Cell, HeadOn, Job, ModelDescription, OptimConfig, ParamStore, Rng, SeedShape, TbpttMode,
    TrainOptions, Trainer,
};
use tensorfit::plan::Limits;
use tensorfit::registry;
use tensorfit::session::{plan_bound, plan_job};
use tensorfit_testing::{present, Device};

const BOUND: (usize, usize) = (8, 12);
const SHAPES: usize = 20;

/// Every kind the build has, from the registry.
fn devices() -> Vec<Device> {
    registry::kinds()
        .into_iter()
        .map(|kind| {
            Device::new(kind.name(), kind.name(), move || {
                open(kind, &MemoryCaps::default()).map_err(|e| e.to_string())
            })
        })
        .collect()
}

/// An LSTM with a head on the last step (BatchNorm), its segment recomputed and its
/// evaluation in micro-batches; a GRU with a head on every step over padded batches,
/// windowed truncated BPTT.
fn cases() -> Vec<(ModelDescription, TrainOptions)> {
    let shape = SeedShape {
        features: 4,
        hidden: 5,
        layers: 2,
        dense: 4,
        classes: 3,
        activation: Activation::Tanh,
    };
    let mut gru = shape.description();
    gru.recurrent_mut().unwrap().cell = Cell::Gru;
    gru.head.on = HeadOn::EveryStep;
    gru.head.layers.retain(|l| l.name == "dense");
    let optim = OptimConfig::adam(0.01);
    vec![
        (
            shape.description(),
            TrainOptions {
                tbptt: 5,
                chunk: 4,
                micro_batch: Some(3),
                recompute: Some(2),
                optim,
                ..TrainOptions::default()
            },
        ),
        (
            gru,
            TrainOptions {
                tbptt: 4,
                tbptt_mode: TbpttMode::Windows,
                chunk: 3,
                padded: true,
                optim,
                ..TrainOptions::default()
            },
        ),
    ]
}

/// Inputs, labels and (padded) lengths of a `[t, b]` batch.
fn data(
    (model, opts): &(ModelDescription, TrainOptions),
    (b, t): (usize, usize),
    rng: &mut Rng,
) -> (HostTensor, Vec<f32>, Option<Vec<f32>>) {
    let x: Vec<f32> = (0..t * b * 4).map(|_| rng.normal()).collect();
    let lengths: Option<Vec<f32>> = opts
        .padded
        .then(|| (0..b).map(|_| rng.int_inclusive(1, t) as f32).collect());
    let rows = match model.head.on {
        HeadOn::Sequence(_) => b,
        HeadOn::EveryStep => t * b,
    };
    // Steps past a sequence's end score nothing.
    let scored = |i: usize| match (&lengths, model.head.on) {
        (Some(l), HeadOn::EveryStep) => ((i / b) as f32) < l[i % b],
        _ => true,
    };
    let labels = (0..rows)
        .map(|i| match scored(i) {
            true => rng.int_inclusive(0, 2) as f32,
            false => IGNORE_LABEL,
        })
        .collect();
    (HostTensor::new([t, b, 4], x).unwrap(), labels, lengths)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn a_plan_for_a_bound_runs_shapes_within_it_as_their_exact_plans_on_every_device() {
    let seed = std::env::var("TENSORFIT_BOUNDS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    println!("seed {seed} (TENSORFIT_BOUNDS_SEED)");
    let bound = Job::Train {
        batch: BOUND.0,
        seq_len: BOUND.1,
        eval: Some(BOUND),
    };
    for d in present("a_plan_for_a_bound_runs_shapes_within_it", devices()) {
        println!("{}: {SHAPES} shapes per model", d.name);
        let mut rng = Rng::new(seed);
        for case in cases() {
            let (model, opts) = &case;
            let backend = (d.open)().unwrap();
            let limits = Limits::from(&backend.info());
            let plan = plan_bound(model, opts, bound, limits).unwrap();
            let params = ParamStore::init(model, 4).unwrap();
            let mut t = Trainer::with_bound(
                backend,
                model.clone(),
                &params,
                opts.clone(),
                plan.layout(),
                bound,
            )
            .unwrap();
            let allocated = t.memory().allocated;
            for _ in 0..SHAPES {
                let shape = (rng.int_inclusive(2, BOUND.0), rng.int_inclusive(1, BOUND.1));
                let what = format!(
                    "{}: {:?}, {shape:?}",
                    d.name,
                    model.recurrent().unwrap().cell
                );
                let (x, labels, lengths) = data(&case, shape, &mut rng);
                let job = Job::Train {
                    batch: shape.0,
                    seq_len: shape.1,
                    eval: Some(shape),
                };
                let ck = t.checkpoint().unwrap();
                let exact = plan_job(model, opts, job, limits).unwrap().layout();
                let (backend, m) = ((d.open)().unwrap(), model.clone());
                let mut e =
                    Trainer::with_layout(backend, m, &ck.params, opts.clone(), exact).unwrap();
                e.restore_state(&ck).unwrap();
                let l = lengths.as_deref();
                let got = t.train_step_at(&x, &labels, l).unwrap();
                let want = e.train_step_at(&x, &labels, l).unwrap();
                assert_eq!(bits(&[got.loss]), bits(&[want.loss]), "{what}: loss");
                assert_eq!(bits(&got.probs.data), bits(&want.probs.data), "{what}");
                let (g, w) = (t.parameters().unwrap(), e.parameters().unwrap());
                for (name, p) in g.iter() {
                    let other = &w.get(name).unwrap().data;
                    assert_eq!(bits(&p.data), bits(other), "{what}: `{name}`");
                }
                let got = t.evaluate_at(&x, &labels, l).unwrap();
                let want = e.evaluate_at(&x, &labels, l).unwrap();
                assert_eq!(
                    bits(&got.probs.data),
                    bits(&want.probs.data),
                    "{what}: eval"
                );
                assert_eq!(t.memory().allocated, allocated, "{what}: allocated");
                assert!(t.memory().peak <= plan.peak_bytes(), "{what}: peak");
            }
        }
    }
}
