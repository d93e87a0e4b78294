//! Agreement with PyTorch on a small regression (`nn.MSELoss()`): LSTM(5, 6) -> last
//! step -> Linear(6, 4) -> tanh -> Linear(4, 3), two Adam steps on whole sequences, then
//! inference: loss, predictions, every gradient and every parameter after each step.
//!
//! The reference file is made by `tools/make_reference.py` (its regression part,
//! `tools/mse_reference.py`) with PyTorch on the CPU; this test needs no PyTorch.
//! Tolerance: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference tensor|, as in
//! `pytorch_agreement.rs` (gradients here have no BatchNorm to amplify rounding, so
//! PyTorch's float32 gradients are the reference).

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::{
    matches_reference_eval, matches_reference_steps, meta_usize, reference, train_options,
};
use tensorfit::core::Activation;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    BodyLayer, Cell, DropoutRate, HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec,
    ModelDescription, RecurrentSpec, Trainer,
};

const FILE: &str = "tests/data/mse_small_reference.safetensors";

fn description(meta: &HashMap<String, String>) -> ModelDescription {
    ModelDescription {
        input: InputSpec::Dense {
            features: meta_usize(meta, "input"),
        },
        body: vec![BodyLayer::Recurrent(RecurrentSpec {
            cell: Cell::Lstm,
            hidden: meta_usize(meta, "hidden"),
            layers: 1,
            dropout: DropoutRate::NONE,
            bidirectional: false,
        })],
        head: HeadSpec {
            on: HeadOn::LAST_STEP,
            layers: vec![HeadLayer {
                name: "head.0".into(),
                kind: HeadLayerKind::Dense {
                    units: meta_usize(meta, "dense"),
                    activation: Activation::Tanh,
                },
                residual: false,
            }],
        },
        loss: LossSpec::MeanSquaredError {
            outputs: meta_usize(meta, "outputs"),
        },
    }
}

#[test]
fn mse_training_gradients_and_inference_match_pytorch() {
    let (init, meta) = reference(FILE, "init.");
    let cfg = description(&meta);
    let opts = train_options(meta_usize(&meta, "steps"), meta["lr"].parse().unwrap());
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &init, opts).unwrap();
    let compared = matches_reference_steps(&mut trainer, FILE, 2, ("targets", "pred"));
    // 4 LSTM tensors, head.0 and out's weight and bias: 8 gradients and 8 parameters.
    assert_eq!(
        compared,
        2 * 16,
        "every gradient and parameter was compared"
    );
    matches_reference_eval(&mut trainer, FILE, "step1.", ("targets", "pred"));
}
