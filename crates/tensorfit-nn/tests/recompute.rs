//! Activation recomputation gives the gradients and updates of the plain training step:
//! the same loss, every gradient within 1e-5 of its tensor's scale, and the same
//! parameters after two Adam steps; for an LSTM and a GRU stack, on features, token ids
//! and embedded token ids.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Activation, HostTensor};
use tensorfit_cpu::CpuBackend;
use tensorfit_nn::{
    Cell, DropoutRate, HeadLayer, HeadLayerKind, InputSpec, ModelDescription, OptimConfig,
    ParamStore, Rng, SeedShape, TrainOptions, Trainer,
};

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

fn close(what: &str, a: &[f32], b: &[f32]) {
    let tol = 1e-5 * max_abs(b).max(1e-3);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol,
            "{what}[{i}]: {x} vs {y} (tolerance {tol})"
        );
    }
}

const SHAPE: SeedShape = SeedShape {
    features: 7,
    hidden: 6,
    layers: 3,
    dense: 5,
    classes: 4,
    activation: Activation::Tanh,
};

#[test]
fn recomputed_segments_match_the_plain_step() {
    recomputed_segments_match(SHAPE.description());
}

#[test]
fn recomputed_gru_segments_match_the_plain_step() {
    let mut cfg = SHAPE.description();
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    recomputed_segments_match(cfg);
}

#[test]
fn recomputed_segments_on_token_ids_match_the_plain_step() {
    for (cell, embedding) in [
        (Cell::Lstm, None),
        (Cell::Lstm, Some(4)),
        (Cell::Gru, Some(4)),
    ] {
        let mut cfg = SHAPE.description();
        cfg.recurrent_mut().unwrap().cell = cell;
        cfg.input = InputSpec::Tokens {
            vocab: SHAPE.features,
            embedding,
        };
        recomputed_segments_match(cfg);
    }
}

#[test]
fn recomputed_segments_drop_what_the_plain_step_drops() {
    // A sub-segment draws its part of the whole segment's mask, in the forward pass, in
    // its recomputation and in the backward pass: a mask drawn from the sub-segment's own
    // indices would change the loss and every gradient.
    for cell in [Cell::Lstm, Cell::Gru] {
        let mut cfg = SHAPE.description();
        cfg.recurrent_mut().unwrap().cell = cell;
        cfg.recurrent_mut().unwrap().dropout = DropoutRate::new(0.3).unwrap();
        let p = DropoutRate::new(0.5).unwrap();
        cfg.head.layers.insert(
            2,
            HeadLayer {
                name: "drop".into(),
                kind: HeadLayerKind::Dropout { p },
                residual: false,
            },
        );
        recomputed_segments_match(cfg);
    }
}

fn recomputed_segments_match(cfg: ModelDescription) {
    let shape = SHAPE;
    let (batch, steps) = (6, 12);
    let mut rng = Rng::new(9);
    let x = match cfg.input {
        InputSpec::Dense { features } => HostTensor::new(
            [steps + 4, batch, features],
            (0..(steps + 4) * batch * features)
                .map(|_| rng.normal())
                .collect(),
        ),
        InputSpec::Tokens { vocab, .. } => HostTensor::new(
            [steps + 4, batch],
            (0..(steps + 4) * batch)
                .map(|_| rng.int_inclusive(0, vocab - 1) as f32)
                .collect(),
        ),
    }
    .unwrap();
    let labels: Vec<f32> = (0..batch).map(|b| (b % shape.classes) as f32).collect();
    let params = ParamStore::init(&cfg, 4).unwrap();
    let trainer = |recompute| {
        let opts = TrainOptions {
            tbptt: steps,
            chunk: 3,
            micro_batch: None,
            recompute,
            optim: OptimConfig::adam(0.01),
            ..TrainOptions::default()
        };
        Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &params, opts).unwrap()
    };
    for segment in [5, 4, 1] {
        let mut re = trainer(Some(segment));
        let mut reference = trainer(None);
        {
            let step = 0;
            let a = reference.train_step(&x, &labels).unwrap();
            let b = re.train_step(&x, &labels).unwrap();
            close(
                &format!("{cfg}: segment {segment} step {step} loss"),
                &[b.loss],
                &[a.loss],
            );
            let (ga, gb) = (reference.gradients().unwrap(), re.gradients().unwrap());
            assert_eq!(ga.len(), gb.len());
            for (name, t) in ga.iter() {
                close(
                    &format!("{cfg}: segment {segment} step {step} grad {name}"),
                    &gb.get(name).unwrap().data,
                    &t.data,
                );
            }
        }
        let (pa, pb) = (reference.parameters().unwrap(), re.parameters().unwrap());
        for (name, t) in pa.iter() {
            close(
                &format!("{cfg}: segment {segment} param {name}"),
                &pb.get(name).unwrap().data,
                &t.data,
            );
        }
    }
}
