//! Dropout (between recurrent layers and in the head): agreement with PyTorch given the
//! same masks, the same step repeated exactly (twice, with recomputation, after a resume,
//! on another device), evaluation without dropout, and a distinct mask per layer.
//!
//! The PyTorch reference (`tests/data/dropout_small_reference.safetensors`) is made by
//! `tools/dropout_reference.py`, which computes tensorfit's masks with a transcription of
//! `tensorfit_core::dropout` and applies them by multiplying (PyTorch's own dropout draws
//! from its generator); the first test checks that the file's masks are the ones the
//! CPU kernel draws. Tolerance as in `mse_pytorch_agreement.rs`: |a − b| ≤ 1e-5 ·
//! max|reference tensor| + 1e-5 · |b|.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::{
    check_reference as check, losses, matches_reference_eval, matches_reference_steps, ok_json,
    reference, scratch, train_options, wgpu_present,
};
use tensorfit::core::{Activation, Backend, DropoutParams, HostTensor, Op};
use tensorfit::cpu::kernels::dropout::dropout;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::dropout::{head_site, recurrent_site, step_key_input};
use tensorfit::nn::{
    BodyLayer, Cell, DropoutRate, HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec,
    ModelDescription, OptimConfig, ParamStore, Program, ProgramKey, ProgramKind, RecurrentSpec,
    Rng, TrainOptions, Trainer,
};

const FILE: &str = "tests/data/dropout_small_reference.safetensors";

fn load(prefix: &str) -> (ParamStore, HashMap<String, String>) {
    reference(FILE, prefix)
}

fn meta<T: std::str::FromStr>(meta: &HashMap<String, String>, k: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    meta[k].parse().unwrap()
}

fn rate(p: f32) -> DropoutRate {
    DropoutRate::new(p).unwrap()
}

/// The reference's model: 2 × LSTM with dropout between, head dropout, dense tanh, CE.
fn description(m: &HashMap<String, String>) -> ModelDescription {
    ModelDescription {
        input: InputSpec::Dense {
            features: meta(m, "input"),
        },
        body: vec![BodyLayer::Recurrent(RecurrentSpec {
            cell: Cell::Lstm,
            hidden: meta(m, "hidden"),
            layers: 2,
            dropout: rate(meta(m, "p_between")),
            bidirectional: false,
        })],
        head: HeadSpec {
            on: HeadOn::LAST_STEP,
            layers: vec![
                HeadLayer {
                    name: "head.0".into(),
                    kind: HeadLayerKind::Dropout {
                        p: rate(meta(m, "p_head")),
                    },
                    residual: false,
                },
                HeadLayer {
                    name: "head.1".into(),
                    kind: HeadLayerKind::Dense {
                        units: meta(m, "dense"),
                        activation: Activation::Tanh,
                    },
                    residual: false,
                },
            ],
        },
        loss: LossSpec::SoftmaxCrossEntropy {
            classes: meta(m, "classes"),
        },
    }
}

fn options(m: &HashMap<String, String>) -> TrainOptions {
    TrainOptions {
        seed: meta(m, "seed"),
        ..train_options(meta(m, "steps"), meta(m, "lr"))
    }
}

/// The mask the CPU kernel draws: dropout of ones.
fn drawn_mask(key: [f32; 2], p: f32, site: u32, n: usize) -> Vec<f32> {
    let mut out = vec![0.0; n];
    let params = DropoutParams { p, site, offset: 0 };
    dropout(params, &vec![1.0; n], &key, &mut out).unwrap();
    out
}

#[test]
fn the_reference_file_holds_the_masks_tensorfit_draws() {
    let (_, m) = load("init.");
    let seed: u64 = meta(&m, "seed");
    for s in 1..=2u64 {
        let (r, _) = load(&format!("step{s}."));
        let key = step_key_input(seed, s);
        let between = &r.require("mask.lstm_l0").unwrap().data;
        let want = drawn_mask(key, meta(&m, "p_between"), recurrent_site(0), between.len());
        assert_eq!(between, &want, "step {s} mask between the layers");
        let head = &r.require("mask.head0").unwrap().data;
        let want = drawn_mask(key, meta(&m, "p_head"), head_site(0), head.len());
        assert_eq!(head, &want, "step {s} head mask");
        let dropped = between.iter().filter(|&&v| v == 0.0).count();
        assert!(dropped > 0 && dropped < between.len(), "{dropped} dropped");
    }
}

#[test]
fn dropout_training_matches_pytorch_given_the_same_masks() {
    let (init, m) = load("init.");
    let mut trainer = Trainer::new(
        Box::new(CpuBackend::new()),
        description(&m),
        &init,
        options(&m),
    )
    .unwrap();
    let compared = matches_reference_steps(&mut trainer, FILE, 2, ("labels", "probs"));
    // 8 LSTM tensors, head.1's and out's weight and bias: 12 gradients, 12 parameters.
    assert_eq!(
        compared,
        2 * 24,
        "every gradient and parameter was compared"
    );
    matches_reference_eval(&mut trainer, FILE, "step1.", ("labels", "probs"));
}

/// A 3-layer model with dropout between its layers and two head dropouts, random data.
fn dropped_model(cell: Cell) -> (ModelDescription, ParamStore, HostTensor, Vec<f32>) {
    let (_, m) = load("init.");
    let mut d = description(&m);
    d.recurrent_mut().unwrap().cell = cell;
    d.recurrent_mut().unwrap().layers = 3;
    d.head.layers.push(HeadLayer {
        name: "head.2".into(),
        kind: HeadLayerKind::Dropout { p: rate(0.5) },
        residual: false,
    });
    let params = ParamStore::init(&d, 11).unwrap();
    let mut rng = Rng::new(2);
    let (t, b, f) = (9, 6, meta(&m, "input"));
    let x = HostTensor::new([t, b, f], (0..t * b * f).map(|_| rng.normal()).collect()).unwrap();
    let labels = (0..b).map(|i| (i % 3) as f32).collect();
    (d, params, x, labels)
}

fn trainer(d: &ModelDescription, params: &ParamStore, opts: &TrainOptions) -> Trainer {
    Trainer::new(Box::new(CpuBackend::new()), d.clone(), params, opts.clone()).unwrap()
}

fn seeded(tbptt: usize, recompute: Option<usize>) -> TrainOptions {
    TrainOptions {
        tbptt,
        chunk: 4,
        recompute,
        optim: OptimConfig::adam(0.01),
        seed: 42,
        ..TrainOptions::default()
    }
}

/// Loss, every gradient and every parameter after `steps` steps on the same batch.
fn run(t: &mut Trainer, x: &HostTensor, labels: &[f32], steps: usize) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    for _ in 0..steps {
        out.push(vec![t.train_step(x, labels).unwrap().loss]);
        out.extend(t.gradients().unwrap().iter().map(|(_, g)| g.data.clone()));
    }
    out.extend(t.parameters().unwrap().iter().map(|(_, p)| p.data.clone()));
    out
}

#[test]
fn a_dropout_step_run_twice_or_recomputed_twice_gives_identical_results() {
    for cell in [Cell::Lstm, Cell::Gru] {
        let (d, params, x, labels) = dropped_model(cell);
        for opts in [seeded(7, None), seeded(7, Some(3))] {
            let a = run(&mut trainer(&d, &params, &opts), &x, &labels, 2);
            let b = run(&mut trainer(&d, &params, &opts), &x, &labels, 2);
            assert_eq!(a, b, "{cell:?}, recompute {:?}", opts.recompute);
        }
        // Another seed draws other masks: the loss of the first step changes.
        let other = TrainOptions {
            seed: 43,
            ..seeded(7, None)
        };
        let a = trainer(&d, &params, &seeded(7, None)).train_step(&x, &labels);
        let b = trainer(&d, &params, &other).train_step(&x, &labels);
        assert_ne!(a.unwrap().loss, b.unwrap().loss, "{cell:?}");
    }
}

#[test]
fn a_resumed_run_drops_what_the_uninterrupted_run_drops() {
    let (d, params, x, labels) = dropped_model(Cell::Lstm);
    let opts = seeded(7, None);
    let whole = run(&mut trainer(&d, &params, &opts), &x, &labels, 2);
    let mut first = trainer(&d, &params, &opts);
    first.train_step(&x, &labels).unwrap();
    let ck = first.checkpoint().unwrap();
    let mut resumed = trainer(&d, &ck.params, &opts);
    resumed.restore_optimizer(&ck.optimizer, ck.step).unwrap();
    // The second step's loss, gradients and the parameters after it, bit for bit.
    let after = run(&mut resumed, &x, &labels, 1);
    assert_eq!(&after[..], &whole[whole.len() - after.len()..]);
}

#[test]
fn evaluation_ignores_dropout() {
    let (d, params, x, labels) = dropped_model(Cell::Lstm);
    let mut plain = d.clone();
    plain.recurrent_mut().unwrap().dropout = DropoutRate::NONE;
    plain
        .head
        .layers
        .retain(|l| !matches!(l.kind, HeadLayerKind::Dropout { .. }));
    let a = trainer(&d, &params, &seeded(9, None))
        .evaluate(&x, &labels)
        .unwrap();
    let b = trainer(&plain, &params, &seeded(9, None))
        .evaluate(&x, &labels)
        .unwrap();
    assert_eq!(a.probs, b.probs);
    assert_eq!(a.loss, b.loss);
    // And its programs hold no dropout at all.
    let key = ProgramKey {
        kind: ProgramKind::Eval,
        batch: 6,
        steps: 9,
        recompute: None,
        padded: false,
    };
    let p = Program::build(&d, &OptimConfig::default(), key).unwrap();
    assert!(p
        .graph
        .nodes()
        .iter()
        .all(|n| !matches!(n.op, Op::Dropout(_))));
    assert_eq!(p.dropout_key, None);
}

#[test]
fn each_layer_and_head_dropout_has_its_own_site() {
    let (d, _, _, _) = dropped_model(Cell::Gru);
    let key = ProgramKey {
        kind: ProgramKind::Train,
        batch: 6,
        steps: 9,
        recompute: None,
        padded: false,
    };
    let p = Program::build(&d, &OptimConfig::default(), key).unwrap();
    assert!(p.dropout_key.is_some());
    let mut forward: Vec<u32> = p
        .graph
        .nodes()
        .iter()
        .filter(|n| !n.name.contains(".grad"))
        .filter_map(|n| match n.op {
            Op::Dropout(params) => Some(params.site),
            _ => None,
        })
        .collect();
    forward.sort();
    // Between layers 0-1 and 1-2, and head layers 0 and 2 (head.1 is dense).
    let want = vec![
        recurrent_site(0),
        recurrent_site(1),
        head_site(0),
        head_site(2),
    ];
    assert_eq!(forward, want);
}

#[test]
fn a_dropout_step_on_wgpu_draws_the_cpu_masks() {
    if !wgpu_present() {
        return;
    }
    let (d, params, x, labels) = dropped_model(Cell::Lstm);
    let opts = seeded(9, None);
    let mut cpu = trainer(&d, &params, &opts);
    let gpu: Box<dyn Backend> = Box::new(tensorfit_wgpu::WgpuBackend::new().unwrap());
    let mut gpu = Trainer::new(gpu, d.clone(), &params, opts).unwrap();
    let a = cpu.train_step(&x, &labels).unwrap();
    let b = gpu.train_step(&x, &labels).unwrap();
    check("loss", &[b.loss], &[a.loss]);
    let (ga, gb) = (cpu.gradients().unwrap(), gpu.gradients().unwrap());
    for (name, g) in ga.iter() {
        check(
            &format!("grad {name}"),
            &gb.get(name).unwrap().data,
            &g.data,
        );
    }
}

#[test]
fn train_with_dropout_resumed_from_its_checkpoint_repeats_the_uninterrupted_losses() {
    let dir = scratch("dropout_resume");
    let mut d = ModelDescription::seed();
    d.recurrent_mut().unwrap().dropout = rate(0.2);
    let model = dir.join("model.toml");
    std::fs::write(&model, d.to_toml()).unwrap();
    let model = model.to_str().unwrap();
    let ck = dir.join("ck");
    let ck = ck.to_str().unwrap();
    let run = [
        "--batch",
        "8",
        "--seq-len",
        "10",
        "--eval-every",
        "0",
        "--device",
        "cpu",
    ];
    let train = |extra: &[&str]| {
        let mut args = vec!["train", "--model", model, "--json"];
        args.extend(run);
        args.extend(extra);
        losses(&ok_json(&args))
    };
    let whole = train(&["--steps", "4"]);
    let first = train(&["--steps", "2", "--checkpoint-dir", ck]);
    let rest = losses(&ok_json(&[
        "train", "--resume", ck, "--steps", "2", "--json",
    ]));
    assert_eq!(whole.len(), 4);
    assert_eq!(
        [first, rest].concat(),
        whole,
        "the same masks after the resume"
    );
}
