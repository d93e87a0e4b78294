//! Agreement with PyTorch on a LayerNorm and a residual block in a head on every step:
//! LSTM(5, 6) -> every step -> Linear(6, 7) -> ReLU -> LayerNorm(7) -> x + tanh(Linear(7,
//! 7)(x)) -> Linear(7, 4), cross-entropy over all
//! steps, two Adam steps on whole sequences, then inference: loss, probabilities, every
//! gradient and every parameter after each step.
//!
//! The reference file is made by `tools/make_reference.py` (its LayerNorm part,
//! `tools/layernorm_reference.py`) with PyTorch on the CPU; this test needs no PyTorch.
//! Tolerance as in `pytorch_agreement.rs`: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference
//! tensor| (LayerNorm normalises each row by itself, so no batch statistic amplifies
//! rounding: PyTorch's float32 gradients are the reference).

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{
    matches_reference_eval, matches_reference_steps, meta_usize, reference, train_options,
};
use tensorfit::core::Activation;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{ModelDescription, Trainer};

const FILE: &str = "tests/data/layernorm_reference.safetensors";

#[test]
fn a_layernorm_and_a_residual_block_on_every_step_train_and_infer_as_pytorchs() {
    let (init, meta) = reference(FILE, "init.");
    let cfg = ModelDescription::builder()
        .features(meta_usize(&meta, "input"))
        .lstm(meta_usize(&meta, "hidden"), 1)
        .every_step()
        .dense(meta_usize(&meta, "dense"), Activation::Relu)
        .layer_norm()
        .dense(meta_usize(&meta, "dense"), Activation::Tanh)
        .residual()
        .classify(meta_usize(&meta, "classes"))
        .build()
        .unwrap();
    let opts = train_options(meta_usize(&meta, "steps"), meta["lr"].parse().unwrap());
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &init, opts).unwrap();
    let compared = matches_reference_steps(&mut trainer, FILE, 2, ("labels", "probs"));
    // 4 LSTM tensors, head.0's, head.1's (the LayerNorm), head.2's (the residual block)
    // and out's weight and bias: 12 gradients and 12 parameters a step.
    assert_eq!(
        compared,
        2 * 24,
        "every gradient and parameter was compared"
    );
    matches_reference_eval(&mut trainer, FILE, "step1.", ("labels", "probs"));
}
