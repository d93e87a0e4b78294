//! Scaled-down networks learn the built-in temporal-order task: held-out accuracy far
//! above chance (1/6) within a bounded number of steps. This is the test that the whole
//! training path (graphs, kernels, autodiff, Adam, BatchNorm) learns, for each recurrent
//! cell and each kind of input.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{Cell, InputSpec, ModelDescription, ParamStore, TemporalOrder, Trainer};

use common::{task_model, train_options};

/// Trains `cfg` on the task (batches of 32 sequences of 12 steps, Adam at 1e-2) for at
/// most `max_steps` steps, evaluating every 25 on 512 held-out sequences; returns the
/// best held-out accuracy, stopping early above 0.95.
fn best_accuracy(cfg: ModelDescription, max_steps: u32) -> f32 {
    let steps = 12;
    let opts = train_options(steps, 1e-2);
    let params = ParamStore::init(&cfg, 1).unwrap();
    let mut data = TemporalOrder::new(2);
    let held_out = TemporalOrder::new(99).batch_for(&cfg, 512, steps).unwrap();
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &params, opts).unwrap();
    let mut best = 0.0f32;
    let mut history = Vec::new();
    for step in 1..=max_steps {
        let b = data.batch_for(trainer.model(), 32, steps).unwrap();
        trainer.train_step(&b.x, &b.labels).unwrap();
        if step % 25 == 0 {
            let e = trainer.evaluate(&held_out.x, &held_out.labels).unwrap();
            let accuracy = e.accuracy.expect("a classifier reports accuracy");
            history.push((step, accuracy));
            best = best.max(accuracy);
            if best > 0.95 {
                break;
            }
        }
    }
    println!(
        "{}: held-out accuracy by step: {history:?}",
        trainer.model()
    );
    best
}

#[test]
fn scaled_down_seed_network_learns_the_temporal_order_task() {
    let best = best_accuracy(task_model(32, 3, 16), 600);
    assert!(best > 0.9, "best held-out accuracy {best}");
}

#[test]
fn a_gru_classifier_learns_the_temporal_order_task() {
    let mut cfg = task_model(32, 2, 16);
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    let best = best_accuracy(cfg, 600);
    assert!(best > 0.9, "best held-out accuracy {best}");
}

#[test]
fn an_lstm_on_token_ids_learns_the_task_with_and_without_an_embedding() {
    for embedding in [None, Some(16)] {
        let mut cfg = task_model(32, 2, 16);
        cfg.input = InputSpec::Tokens {
            vocab: TemporalOrder::FEATURES,
            embedding,
        };
        let best = best_accuracy(cfg, 600);
        assert!(
            best > 0.9,
            "embedding {embedding:?}: best held-out accuracy {best}"
        );
    }
}

#[test]
fn a_gru_on_embedded_token_ids_learns_the_task() {
    let mut cfg = task_model(32, 2, 16);
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    cfg.input = InputSpec::Tokens {
        vocab: TemporalOrder::FEATURES,
        embedding: Some(16),
    };
    let best = best_accuracy(cfg, 600);
    assert!(best > 0.9, "best held-out accuracy {best}");
}
