//! A training step split at its gradients (`TrainOptions::split_update`: the gradient
//! program, the host's exchange, the update program), as data-parallel ranks run it,
//! takes exactly the step of the whole training program when the exchange leaves the
//! gradients alone, and updates from what the exchange returns; split at the head too
//! (BatchNorm over the ranks' global batch), it takes the same step up to rounding.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Activation, HostTensor, Result};
use tensorfit_cpu::CpuBackend;
use tensorfit_nn::trainer::GradientExchange;
use tensorfit_nn::{
    Clip, OptimConfig, Optimizer, ParamStore, Rng, SeedShape, SgdConfig, TrainOptions, Trainer,
};

const SHAPE: SeedShape = SeedShape {
    features: 5,
    hidden: 6,
    layers: 2,
    dense: 4,
    classes: 3,
    activation: Activation::Tanh,
};

fn trainer(split_update: bool, optim: OptimConfig) -> Trainer {
    with_options(TrainOptions {
        split_update,
        optim,
        ..TrainOptions::default()
    })
}

fn with_options(opts: TrainOptions) -> Trainer {
    let cfg = SHAPE.description();
    let params = ParamStore::init(&cfg, 3).unwrap();
    let opts = TrainOptions {
        tbptt: 6,
        chunk: 4,
        ..opts
    };
    Trainer::new(Box::new(CpuBackend::new()), cfg, &params, opts).unwrap()
}

fn batch(seed: u64) -> (HostTensor, Vec<f32>) {
    let (steps, rows) = (9, 5);
    let mut rng = Rng::new(seed);
    let x = (0..steps * rows * SHAPE.features)
        .map(|_| rng.normal())
        .collect();
    let labels = (0..rows).map(|b| (b % SHAPE.classes) as f32).collect();
    (
        HostTensor::new([steps, rows, SHAPE.features], x).unwrap(),
        labels,
    )
}

/// Adam with clipping by a norm below the gradients', so that clipping applies.
fn clipped_adam() -> OptimConfig {
    OptimConfig {
        clip: Clip {
            max_norm: Some(0.05),
            value: None,
        },
        ..OptimConfig::adam(0.01)
    }
}

#[test]
fn a_split_step_is_bit_for_bit_the_whole_step_with_clipping_and_batch_norm() {
    let optim = clipped_adam();
    let (mut whole, mut split) = (trainer(false, optim), trainer(true, optim));
    for seed in 1..=3 {
        let (x, labels) = batch(seed);
        let a = whole.train_step(&x, &labels).unwrap();
        let b = split.train_step(&x, &labels).unwrap();
        assert_eq!(a, b, "step {seed}");
        assert!(a.grad_norm.is_some_and(|n| n > 0.05), "clipping applied");
        // The gradients the update used: before clipping in both.
        assert_eq!(whole.gradients().unwrap(), split.gradients().unwrap());
    }
    assert_eq!(whole.parameters().unwrap(), split.parameters().unwrap());
    assert_eq!(whole.checkpoint().unwrap(), split.checkpoint().unwrap());
}

/// Zeroes every gradient and sets the loss, recording the steps it saw.
#[derive(Debug, Default)]
struct Zero {
    steps: Vec<u64>,
}

impl GradientExchange for Zero {
    fn exchange(&mut self, step: u64, grads: &mut [Vec<f32>], loss: &mut f32) -> Result<()> {
        self.steps.push(step);
        grads.iter_mut().for_each(|g| g.fill(0.0));
        *loss = 42.0;
        Ok(())
    }
}

#[test]
fn the_update_uses_the_gradients_and_loss_the_exchange_returns() {
    let sgd = OptimConfig {
        optimizer: Optimizer::Sgd(SgdConfig {
            lr: 0.1,
            ..SgdConfig::default()
        }),
        ..OptimConfig::default()
    };
    let mut t = trainer(true, sgd);
    let before = t.parameters().unwrap();
    let mut zero = Zero::default();
    for seed in 1..=2 {
        let (x, labels) = batch(seed);
        let report = t
            .train_step_exchanging(&x, &labels, None, &mut zero)
            .unwrap();
        assert_eq!(report.loss, 42.0);
    }
    assert_eq!(zero.steps, [1, 2]);
    let after = t.parameters().unwrap();
    // Only the running statistics (updated in the gradient program) may move.
    for (name, p) in before.iter() {
        if !name.contains("running") && !name.contains("num_batches") {
            assert_eq!(&after.get(name).unwrap().data, &p.data, "{name}");
        }
    }
    assert_ne!(after, before, "the running statistics are updated");
}

fn close(what: &str, got: &[f32], want: &[f32]) {
    let scale = want.iter().fold(1e-3f32, |m, x| m.max(x.abs()));
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= 2e-5 * scale, "{what}[{i}]: {a} vs {b}");
    }
    assert_eq!(got.len(), want.len(), "{what}");
}

#[test]
fn a_step_split_at_the_head_for_synchronised_batch_norm_takes_the_whole_step() {
    let optim = clipped_adam();
    let mut whole = trainer(false, optim);
    let mut split = with_options(TrainOptions {
        split_update: true,
        sync_batch_norm: Some(5),
        optim,
        ..TrainOptions::default()
    });
    for seed in 1..=3 {
        let (x, labels) = batch(seed);
        let a = whole.train_step(&x, &labels).unwrap();
        let b = split.train_step(&x, &labels).unwrap();
        close(&format!("step {seed} loss"), &[b.loss], &[a.loss]);
        close(
            &format!("step {seed} norm"),
            &[b.grad_norm.unwrap()],
            &[a.grad_norm.unwrap()],
        );
        close(&format!("step {seed} probs"), &b.probs.data, &a.probs.data);
        let (ga, gb) = (whole.gradients().unwrap(), split.gradients().unwrap());
        for (name, t) in ga.iter() {
            close(
                &format!("step {seed} grad {name}"),
                &gb.get(name).unwrap().data,
                &t.data,
            );
        }
    }
    let (pa, pb) = (whole.parameters().unwrap(), split.parameters().unwrap());
    assert_eq!(pa.len(), pb.len());
    for (name, t) in pa.iter() {
        close(
            &format!("param {name}"),
            &pb.get(name).unwrap().data,
            &t.data,
        );
    }
}
