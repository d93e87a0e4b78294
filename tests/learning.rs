//! A scaled-down seed network learns the built-in temporal-order task: held-out
//! accuracy far above chance (1/6) within a bounded number of steps. This is the test
//! that the whole training path (graphs, kernels, autodiff, Adam, BatchNorm) learns.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{ParamStore, TemporalOrder, Trainer};

use common::{task_model, train_options};

#[test]
fn scaled_down_seed_network_learns_the_temporal_order_task() {
    let cfg = task_model(32, 3, 16);
    let steps = 12;
    let opts = train_options(steps, 1e-2);
    let params = ParamStore::init(&cfg, 1).unwrap();
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &params, opts).unwrap();
    let mut data = TemporalOrder::new(2);
    let held_out = TemporalOrder::new(99).batch(512, steps).unwrap();
    let mut best = 0.0f32;
    let mut history = Vec::new();
    for step in 1..=600u32 {
        let b = data.batch(32, steps).unwrap();
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
    println!("held-out accuracy by step: {history:?}");
    assert!(
        best > 0.9,
        "best held-out accuracy {best}; history {history:?}"
    );
}
