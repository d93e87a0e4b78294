//! Agreement with PyTorch on a language model with a head on every step: one-hot token
//! ids (V=7) -> LSTM(7, 6, 2 layers) -> every step as T·B rows -> BatchNorm1d(6) over all
//! rows -> Linear(6, 5) -> tanh -> Linear(5, 7), `CrossEntropyLoss(ignore_index=-1)`;
//! three Adam steps (the second and third with the steps past each sequence's length
//! ignored, as a padded batch's labels), then evaluation: loss, probabilities, every
//! gradient, every parameter and running statistic after each step.
//!
//! The reference file is made by `tools/make_reference.py` (its every-step part,
//! `tools/every_step_reference.py`) with PyTorch on the CPU; this test needs no PyTorch.
//! Tolerance as in `pytorch_agreement.rs`: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|b|, and
//! gradients against the exact (float64) ones the file holds, allowing besides three times
//! PyTorch's own float32 error on that tensor (BatchNorm amplifies rounding).

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::{
    assert_close, check_reference as check, matches_reference_eval, max_abs, meta_usize, reference,
    train_options,
};
use tensorfit::core::Activation;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{HeadLayer, HeadLayerKind, ModelDescription, ParamStore, Trainer};

const FILE: &str = "tests/data/every_step_reference.safetensors";

fn load(prefix: &str) -> (ParamStore, HashMap<String, String>) {
    reference(FILE, prefix)
}

fn description(meta: &HashMap<String, String>) -> ModelDescription {
    let (vocab, hidden) = (meta_usize(meta, "vocab"), meta_usize(meta, "hidden"));
    let mut d = ModelDescription::lstm_language_model(vocab, hidden, meta_usize(meta, "layers"));
    d.head.layers = vec![
        HeadLayer {
            name: "head.0".into(),
            kind: HeadLayerKind::BatchNorm,
            residual: false,
        },
        HeadLayer {
            name: "head.1".into(),
            kind: HeadLayerKind::Dense {
                units: meta_usize(meta, "dense"),
                activation: Activation::Tanh,
            },
            residual: false,
        },
    ];
    d
}

#[test]
fn every_step_training_with_ignored_steps_and_inference_match_pytorch() {
    let (init, meta) = load("init.");
    let cfg = description(&meta);
    let opts = train_options(meta_usize(&meta, "steps"), meta["lr"].parse().unwrap());
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &init, opts).unwrap();
    let mut compared = 0;
    for s in 1..=3 {
        let (r, _) = load(&format!("step{s}."));
        let x = r.require("x").unwrap();
        let labels = &r.require("labels").unwrap().data;
        let report = trainer.train_step(x, labels).unwrap();
        let want = |n: &str| r.require(n).unwrap().data.clone();
        check(&format!("step{s} loss"), &[report.loss], &want("loss"));
        check(
            &format!("step{s} probs"),
            &report.probs.data,
            &want("probs"),
        );
        for (name, g) in trainer.gradients().unwrap().iter() {
            let (exact, torch) = (
                want(&format!("exact_grad.{name}")),
                want(&format!("grad.{name}")),
            );
            let torch_error = exact
                .iter()
                .zip(&torch)
                .map(|(e, t)| (e - t).abs())
                .fold(0.0f32, f32::max);
            let what = format!("step{s} grad {name}");
            assert_close(
                &what,
                &g.data,
                &exact,
                1e-5 * max_abs(&exact) + 3.0 * torch_error,
                1e-5,
            );
            compared += 1;
        }
        for (name, p) in trainer.parameters().unwrap().iter() {
            let what = format!("step{s} after {name}");
            check(&what, &p.data, &want(&format!("after.{name}")));
            compared += 1;
        }
    }
    // 8 LSTM tensors, head.0, head.1 and out's 6: 14 gradients; 16 parameters and
    // statistics.
    assert_eq!(compared, 3 * (14 + 16), "everything was compared");
    let (report, e) = matches_reference_eval(&mut trainer, FILE, "step2.", ("labels", "probs"));
    check(
        "eval loss",
        &[report.loss],
        &e.require("loss").unwrap().data,
    );
}
