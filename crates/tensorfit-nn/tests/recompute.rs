//! Activation recomputation gives the gradients and updates of the plain training step:
//! the same loss, every gradient within 1e-5 of its tensor's scale, and the same
//! parameters after two Adam steps.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Activation, HostTensor};
use tensorfit_cpu::CpuBackend;
use tensorfit_nn::{OptimConfig, ParamStore, Rng, SeedShape, TrainOptions, Trainer};

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

#[test]
fn recomputed_segments_match_the_plain_step() {
    let shape = SeedShape {
        features: 7,
        hidden: 6,
        layers: 3,
        dense: 5,
        classes: 4,
        activation: Activation::Tanh,
    };
    let cfg = shape.description();
    let (batch, steps) = (6, 12);
    let mut rng = Rng::new(9);
    let x = HostTensor::new(
        [steps + 4, batch, shape.features],
        (0..(steps + 4) * batch * shape.features)
            .map(|_| rng.normal())
            .collect(),
    )
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
                &format!("segment {segment} step {step} loss"),
                &[b.loss],
                &[a.loss],
            );
            let (ga, gb) = (reference.gradients().unwrap(), re.gradients().unwrap());
            assert_eq!(ga.len(), gb.len());
            for (name, t) in ga.iter() {
                close(
                    &format!("segment {segment} step {step} grad {name}"),
                    &gb.get(name).unwrap().data,
                    &t.data,
                );
            }
        }
        let (pa, pb) = (reference.parameters().unwrap(), re.parameters().unwrap());
        for (name, t) in pa.iter() {
            close(
                &format!("segment {segment} param {name}"),
                &pb.get(name).unwrap().data,
                &t.data,
            );
        }
    }
}
