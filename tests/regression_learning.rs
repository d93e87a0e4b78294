//! The example regression model (`examples/models/regression.toml`, mean squared error)
//! learns the built-in running-mean task: held-out MSE below a tenth of that of predicting
//! zero (0.0086, where the noise alone costs 0.0025) within 600 steps. This is the test
//! that the regression path (f32 targets, the MSE loss and its gradient) learns.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{ModelDescription, ParamStore, RunningMean, Trainer};

use common::train_options;

#[test]
fn the_example_regression_model_learns_the_running_mean_task() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/regression.toml");
    let cfg = ModelDescription::load(&path).unwrap();
    let steps = 8;
    let params = ParamStore::init(&cfg, 1).unwrap();
    let opts = train_options(steps, 1e-2);
    let mut trainer =
        Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &params, opts).unwrap();
    let mut data = RunningMean::for_model(&cfg, 2).unwrap();
    let held_out = RunningMean::for_model(&cfg, 99)
        .unwrap()
        .batch(256, steps)
        .unwrap();
    let target = 0.1 * RunningMean::baseline_mse();
    let mut history = Vec::new();
    for step in 1..=600u32 {
        let b = data.batch(32, steps).unwrap();
        trainer.train_step(&b.x, &b.labels).unwrap();
        if step % 25 == 0 {
            let e = trainer.evaluate(&held_out.x, &held_out.labels).unwrap();
            assert_eq!(e.accuracy, None, "a regression reports no accuracy");
            assert_eq!(e.probs.shape.dims(), &[256, 2]);
            history.push((step, e.loss));
            if e.loss < target {
                break;
            }
        }
    }
    println!("held-out mse by step: {history:?}");
    let best = history.iter().map(|h| h.1).fold(f32::INFINITY, f32::min);
    assert!(
        best < target,
        "best held-out mse {best}, needed below {target} (a tenth of predicting zero's); history {history:?}"
    );
}
