//! Recomputation with a head on every step and over padded batches gives the plain
//! training step: the loss, every gradient within 1e-5 of its tensor's scale, and the
//! parameters after two Adam steps, on the CPU and on wgpu where an adapter is present.
//! A head on every step is checked for LSTM and GRU stacks on token ids read directly and
//! through an embedding, with ignored labels and with a head dropout; a padded batch (one
//! sequence of each length 1..T) for both cells and both head kinds. Windowed truncated
//! BPTT with recomputation trains as without it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::{Activation, Backend, HostTensor};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::every_step::IGNORE_LABEL;
use tensorfit::nn::{
    Cell, DropoutRate, HeadLayer, HeadLayerKind, HeadOn, InputSpec, LossSpec, ModelDescription,
    OptimConfig, ParamStore, Rng, SeedShape, TbpttMode, TrainOptions, Trainer,
};
use tensorfit_testing::assert_close;

use common::{max_abs, wgpu_present};

const SHAPE: SeedShape = SeedShape {
    features: 7,
    hidden: 6,
    layers: 2,
    dense: 5,
    classes: 4,
    activation: Activation::Tanh,
};
const VOCAB: usize = 7;

fn close(what: &str, got: &[f32], want: &[f32]) {
    let tol = 1e-5 * max_abs(want).max(1e-3);
    assert_close(what, got, want, f64::from(tol), 0.0);
}

/// The small seed network with its head on the last step and no BatchNorm (a padded
/// batch's rows would meet in its statistics): Dense 5 (tanh), then the output layer.
fn last_step_model(cell: Cell) -> ModelDescription {
    let mut cfg = SHAPE.description();
    cfg.recurrent_mut().unwrap().cell = cell;
    cfg.head.layers = vec![HeadLayer {
        name: "fc".into(),
        kind: HeadLayerKind::Dense {
            units: SHAPE.dense,
            activation: Activation::Tanh,
        },
        residual: false,
    }];
    cfg
}

/// A language model: token ids (through an embedding of width `embedding`, if any), the
/// stack, a head on every step (Dense 5, tanh), softmax over the vocabulary.
fn language_model(cell: Cell, embedding: Option<usize>) -> ModelDescription {
    let mut cfg = last_step_model(cell);
    cfg.input = InputSpec::Tokens {
        vocab: VOCAB,
        embedding,
    };
    cfg.head.on = HeadOn::EveryStep;
    cfg.loss = LossSpec::SoftmaxCrossEntropy { classes: VOCAB };
    cfg
}

/// A batch: `x` `[T, B(, F)]`, labels, and with `padded` one sequence of each length
/// 1..=T (cycling), the steps past a sequence's end labelled `IGNORE_LABEL` on every
/// step. Without `padded`, every fifth step of every step's labels is ignored.
struct Data {
    x: HostTensor,
    labels: Vec<f32>,
    lengths: Option<Vec<f32>>,
}

fn data(cfg: &ModelDescription, (batch, steps): (usize, usize), padded: bool) -> Data {
    let mut rng = Rng::new(9);
    let x = match cfg.input {
        InputSpec::Dense { features } => HostTensor::new(
            [steps, batch, features],
            (0..steps * batch * features)
                .map(|_| rng.normal())
                .collect(),
        ),
        InputSpec::Tokens { vocab, .. } => HostTensor::new(
            [steps, batch],
            (0..steps * batch)
                .map(|_| rng.int_inclusive(0, vocab - 1) as f32)
                .collect(),
        ),
    }
    .unwrap();
    let lengths: Vec<usize> = (0..batch).map(|b| b % steps + 1).collect();
    let classes = cfg.loss.outputs();
    let labels = match cfg.head.on {
        HeadOn::Sequence(_) => (0..batch).map(|b| (b % classes) as f32).collect(),
        HeadOn::EveryStep => (0..steps * batch)
            .map(|i| {
                let (t, b) = (i / batch, i % batch);
                let ignored = match padded {
                    true => t >= lengths[b],
                    false => i % 5 == 3,
                };
                match ignored {
                    true => IGNORE_LABEL,
                    false => rng.int_inclusive(0, classes - 1) as f32,
                }
            })
            .collect(),
    };
    Data {
        x,
        labels,
        lengths: padded.then(|| lengths.iter().map(|&l| l as f32).collect()),
    }
}

type MakeBackend = fn() -> Box<dyn Backend>;

fn cpu() -> Box<dyn Backend> {
    Box::new(CpuBackend::new())
}

fn wgpu() -> Box<dyn Backend> {
    Box::new(tensorfit_wgpu::WgpuBackend::new().unwrap())
}

/// Trains `cfg` two Adam steps on `d` with each sub-segment length and without
/// recomputation; asserts the same loss and gradients at each step and the same
/// parameters after.
fn recomputed_matches_the_plain_step(cfg: &ModelDescription, d: &Data, backend: MakeBackend) {
    let steps = d.x.shape.dims()[0];
    let params = ParamStore::init(cfg, 4).unwrap();
    let trainer = |recompute| {
        let opts = TrainOptions {
            tbptt: steps,
            chunk: steps,
            recompute,
            padded: d.lengths.is_some(),
            optim: OptimConfig::adam(0.01),
            ..TrainOptions::default()
        };
        Trainer::new(backend(), cfg.clone(), &params, opts).unwrap()
    };
    let mut plain = trainer(None);
    let mut want = Vec::new();
    for _ in 0..2 {
        let report = plain
            .train_step_at(&d.x, &d.labels, d.lengths.as_deref())
            .unwrap();
        want.push((report.loss, plain.gradients().unwrap()));
    }
    let want_params = plain.parameters().unwrap();
    for segment in [5, 4, 1] {
        let mut re = trainer(Some(segment));
        for (step, (loss, grads)) in want.iter().enumerate() {
            let at = format!("{cfg}: segment {segment} step {step}");
            let got = re
                .train_step_at(&d.x, &d.labels, d.lengths.as_deref())
                .unwrap();
            close(&format!("{at} loss"), &[got.loss], &[*loss]);
            let got_grads = re.gradients().unwrap();
            assert_eq!(got_grads.len(), grads.len(), "{at}");
            for (name, t) in grads.iter() {
                let g = &got_grads.get(name).unwrap().data;
                close(&format!("{at} grad {name}"), g, &t.data);
            }
        }
        let got_params = re.parameters().unwrap();
        for (name, t) in want_params.iter() {
            let p = &got_params.get(name).unwrap().data;
            close(
                &format!("{cfg}: segment {segment} param {name}"),
                p,
                &t.data,
            );
        }
    }
}

fn every_step_heads(backend: MakeBackend) {
    let mut dropped = language_model(Cell::Lstm, Some(4));
    dropped.recurrent_mut().unwrap().dropout = DropoutRate::new(0.3).unwrap();
    dropped.head.layers.push(HeadLayer {
        name: "drop".into(),
        kind: HeadLayerKind::Dropout {
            p: DropoutRate::new(0.5).unwrap(),
        },
        residual: false,
    });
    let mut normalised = language_model(Cell::Gru, None);
    normalised.head.layers.push(layer_norm());
    let models = [
        language_model(Cell::Lstm, None),
        language_model(Cell::Lstm, Some(4)),
        language_model(Cell::Gru, None),
        language_model(Cell::Gru, Some(4)),
        dropped,
        normalised,
    ];
    for cfg in &models {
        let d = data(cfg, (6, 12), false);
        recomputed_matches_the_plain_step(cfg, &d, backend);
    }
}

/// A LayerNorm named `ln`: it mixes no rows, so it is recomputed and padded on every
/// step where a BatchNorm is refused.
fn layer_norm() -> HeadLayer {
    HeadLayer {
        name: "ln".into(),
        kind: HeadLayerKind::LayerNorm,
        residual: false,
    }
}

fn padded_batches(backend: MakeBackend) {
    let mut normalised = language_model(Cell::Lstm, Some(4));
    normalised.head.layers.insert(0, layer_norm());
    for cell in [Cell::Lstm, Cell::Gru] {
        for cfg in [
            last_step_model(cell),
            language_model(cell, Some(4)),
            normalised.clone(),
        ] {
            // 13 sequences of 12 steps: every length from 1 to 12, and 12 again.
            let d = data(&cfg, (13, 12), true);
            recomputed_matches_the_plain_step(&cfg, &d, backend);
        }
    }
}

#[test]
fn recomputation_with_a_head_on_every_step_matches_the_plain_step_on_the_cpu() {
    every_step_heads(cpu);
}

#[test]
fn recomputation_with_a_head_on_every_step_matches_the_plain_step_on_wgpu() {
    if wgpu_present() {
        every_step_heads(wgpu);
    }
}

#[test]
fn recomputation_over_a_padded_batch_matches_the_plain_step_on_the_cpu() {
    padded_batches(cpu);
}

#[test]
fn recomputation_over_a_padded_batch_matches_the_plain_step_on_wgpu() {
    if wgpu_present() {
        padded_batches(wgpu);
    }
}

#[test]
fn windowed_truncated_bptt_with_recomputation_trains_as_without_it() {
    let cfg = language_model(Cell::Lstm, Some(4));
    // Windows of 4, 4 and 2 steps: the first two recomputed in sub-segments of 3 and 1.
    let d = data(&cfg, (5, 10), false);
    let params = ParamStore::init(&cfg, 4).unwrap();
    let run = |recompute| {
        let opts = TrainOptions {
            tbptt: 4,
            tbptt_mode: TbpttMode::Windows,
            recompute,
            optim: OptimConfig::adam(0.01),
            ..TrainOptions::default()
        };
        let mut t = Trainer::new(cpu(), cfg.clone(), &params, opts).unwrap();
        let losses: Vec<f32> = (0..3)
            .map(|_| t.train_step(&d.x, &d.labels).unwrap().loss)
            .collect();
        (losses, t.parameters().unwrap())
    };
    let (want, want_params) = run(None);
    let (got, got_params) = run(Some(3));
    close("windowed losses", &got, &want);
    for (name, t) in want_params.iter() {
        close(
            &format!("windowed param {name}"),
            &got_params.get(name).unwrap().data,
            &t.data,
        );
    }
}

#[test]
fn a_batch_norm_in_a_head_on_every_step_is_refused_with_recomputation_naming_it() {
    let mut cfg = language_model(Cell::Lstm, None);
    cfg.head.layers.push(HeadLayer {
        name: "bn1".into(),
        kind: HeadLayerKind::BatchNorm,
        residual: false,
    });
    let params = ParamStore::init(&cfg, 4).unwrap();
    let opts = TrainOptions {
        tbptt: 12,
        recompute: Some(4),
        ..TrainOptions::default()
    };
    let mut t = Trainer::new(cpu(), cfg.clone(), &params, opts).unwrap();
    let d = data(&cfg, (6, 12), false);
    let e = t.train_step(&d.x, &d.labels).unwrap_err().to_string();
    assert!(e.contains("`bn1`") && e.contains("recomputation"), "{e}");
    assert!(!tensorfit::nn::recomputable(&cfg));
    assert!(tensorfit::nn::recomputable(&language_model(
        Cell::Lstm,
        None
    )));
    // A LayerNorm in its place is recomputed (`every_step_heads`).
    let mut normalised = language_model(Cell::Lstm, None);
    normalised.head.layers.push(layer_norm());
    assert!(tensorfit::nn::recomputable(&normalised));
}
