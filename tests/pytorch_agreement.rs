//! Agreement with PyTorch on a small seed-shaped network (F=10, H=8, 3 layers, Dense 5,
//! 6 classes, batch 16, length 9, truncated BPTT 3 carrying state): loss, probabilities,
//! carried state, every gradient, and every parameter and running statistic after each
//! of two Adam steps, then inference with running statistics. The same network with a
//! GRU stack (`nn.GRU`, carrying h only) is checked the same way against its own file.
//!
//! The reference file is made by `tools/make_reference.py` with PyTorch on the CPU; this
//! test needs no PyTorch. Tolerance: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference tensor|
//! (relative 1e-5, with the tensor's own scale as the floor for values near zero).
//!
//! Gradients are the exception, because no float32 engine can meet 1e-5 on them here:
//! PyTorch's own float32 gradients differ from the exact (float64) ones by up to 2e-5 of
//! a tensor's scale (BatchNorm over a small batch amplifies rounding). So gradients are
//! compared with the exact values the file also holds, allowing 1e-5 of the scale plus
//! three times PyTorch's own float32 error on that tensor: tensorfit must be about as exact
//! as PyTorch. The test prints both errors for every gradient. Each step's gradients are
//! computed from PyTorch's weights before that step, so weights that drifted by rounding
//! in step 1 do not count against step 2.

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
use tensorfit::nn::{Cell, ModelDescription, SeedShape, TrainOptions, Trainer};

/// The reference files, LSTM and GRU stack.
const FILES: [&str; 2] = [
    "tests/data/seed_small_reference.safetensors",
    "tests/data/seed_small_gru_reference.safetensors",
];

fn config(meta: &HashMap<String, String>) -> ModelDescription {
    assert_eq!(meta["dense_activation"], "tanh");
    let mut d = SeedShape {
        features: meta_usize(meta, "input"),
        hidden: meta_usize(meta, "hidden"),
        layers: meta_usize(meta, "layers"),
        dense: meta_usize(meta, "dense"),
        classes: meta_usize(meta, "classes"),
        activation: Activation::Tanh,
    }
    .description();
    // The LSTM file predates the key.
    if meta.get("cell").map(String::as_str) == Some("gru") {
        d.recurrent_mut().unwrap().cell = Cell::Gru;
    }
    d
}

fn options(meta: &HashMap<String, String>) -> TrainOptions {
    train_options(meta_usize(meta, "tbptt"), meta["lr"].parse().unwrap())
}

#[test]
fn training_and_inference_match_pytorch() {
    for file in FILES {
        training_and_inference_match(file);
    }
}

fn training_and_inference_match(file: &str) {
    let load = |prefix: &str| reference(file, prefix);
    let (init, meta) = load("init.");
    let cfg = config(&meta);
    let opts = options(&meta);
    let batch = meta_usize(&meta, "batch");
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &init, opts).unwrap();
    let mut compared = 0;
    for s in 1..=2 {
        let (r, _) = load(&format!("step{s}."));
        let x = r.require("x").unwrap();
        let labels = &r.require("labels").unwrap().data;
        let report = trainer.train_step(x, labels).unwrap();
        check(
            &format!("step{s} loss"),
            &[report.loss],
            &r.require("loss").unwrap().data,
        );
        check(
            &format!("step{s} probs"),
            &report.probs.data,
            &r.require("probs").unwrap().data,
        );
        let (h, c) = trainer.carried_state(batch).unwrap();
        check(
            &format!("step{s} h_carry"),
            &h.data,
            &r.require("h_carry").unwrap().data,
        );
        // A GRU carries no c: the trainer gives `[0, B, H]`, the file has none.
        let want_c = r.get("c_carry").map_or(&[][..], |t| &t.data[..]);
        check(&format!("step{s} c_carry"), &c.data, want_c);
        let params = trainer.parameters().unwrap();
        for (name, p) in params.iter() {
            let want = r.require(&format!("after.{name}")).unwrap();
            check(&format!("step{s} after {name}"), &p.data, &want.data);
            compared += 1;
        }
    }
    assert_eq!(
        compared,
        2 * 24,
        "every parameter and statistic was compared"
    );

    matches_reference_eval(&mut trainer, file, "step1.", ("labels", "probs"));
}

#[test]
fn gradients_are_as_exact_as_pytorch() {
    for file in FILES {
        gradients_are_as_exact(file);
    }
}

fn gradients_are_as_exact(file: &str) {
    let load = |prefix: &str| reference(file, prefix);
    let (_, meta) = load("init.");
    let cfg = config(&meta);
    let batch = meta_usize(&meta, "batch");
    let mut compared = 0;
    for (s, weights) in [(1, "init."), (2, "step1.after.")] {
        let (w, _) = load(weights);
        let mut trainer =
            Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &w, options(&meta)).unwrap();
        let (r, _) = load(&format!("step{s}."));
        trainer
            .train_step(r.require("x").unwrap(), &r.require("labels").unwrap().data)
            .unwrap();
        assert_eq!(
            trainer.carried_state(batch).unwrap().0.shape.dims(),
            &[
                cfg.recurrent().unwrap().layers,
                batch,
                cfg.recurrent().unwrap().hidden
            ]
        );
        let grads = trainer.gradients().unwrap();
        for (name, g) in grads.iter() {
            let torch32 = r.require(&format!("grad.{name}")).unwrap();
            let exact = r.require(&format!("grad64.{name}")).unwrap();
            assert_eq!(g.shape, exact.shape, "{name}");
            let scale = max_abs(&exact.data);
            let err = |v: &[f32]| {
                max_abs(
                    &v.iter()
                        .zip(&exact.data)
                        .map(|(a, b)| a - b)
                        .collect::<Vec<_>>(),
                )
            };
            let (ours, theirs) = (err(&g.data), err(&torch32.data));
            println!(
                "step{s} grad {name:22} error vs exact: tensorfit {:.1e}, PyTorch {:.1e} (of scale {scale:.2e})",
                ours / scale,
                theirs / scale
            );
            assert_close(
                &format!("step{s} grad {name}"),
                &g.data,
                &exact.data,
                1e-5 * scale + 3.0 * theirs,
                0.0,
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * 20, "every gradient was compared");
}
