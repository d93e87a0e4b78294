//! Agreement with PyTorch on the layers over a sequence, over padded batches (lengths 6,
//! 3, 1, 4, 6 of T=6; made by `tools/bidirectional_reference.py` and
//! `tools/pool_reference.py`), each through `pack_padded_sequence` in PyTorch:
//! - a tagger `nn.LSTM(5, 6, num_layers=2, bidirectional=True)` -> `Linear(12, 4)` on
//!   every step;
//! - a classifier `nn.GRU(5, 6, num_layers=2, bidirectional=True)` ->
//!   `torch.cat((h_n[-2], h_n[-1]), 1)` -> `Linear(12, 7)` -> tanh -> `Linear(7, 4)`;
//! - a classifier `nn.LSTM(5, 6, num_layers=2)` -> the mean over each sequence's steps ->
//!   `Linear(6, 4)`;
//! - a classifier of the bidirectional GRU -> each feature's maximum over each
//!   sequence's steps -> `Linear(12, 7)` -> tanh -> `Linear(7, 4)`;
//! - a TCN: `Conv1d(5, 8, 3)` causal, relu -> `Conv1d(8, 8, 2, dilation=2)` "same", relu,
//!   plus its input -> the mean over each sequence's steps -> `Linear(8, 4)`
//!   (`tools/body_reference.py`);
//! - Transformer classifiers: sinusoidal positions -> `nn.TransformerEncoder` of two
//!   `TransformerEncoderLayer(8, 2 heads, ff 16, dropout 0)` with the padded keys masked
//!   (post-norm ReLU; pre-norm GELU causal) -> the mean -> `Linear(8, 4)`; and after
//!   learned positions (`nn.Embedding(10, 8)`'s table, rows 0..6 added; the rows past the
//!   sequences' length keep a zero gradient and their values) pre-norm ReLU layers and
//!   the encoder's final `norm=nn.LayerNorm(8)`.
//!
//! Two Adam steps, then inference: the loss, the probabilities, every gradient and every
//! parameter after each step, on the CPU and on wgpu. Tolerance as in
//! `pytorch_agreement.rs`: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference tensor|.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{check_reference, meta_usize, reference, train_options, wgpu_present};
use tensorfit::core::{Activation, Backend};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{ConvPadding, ModelDescription, PositionEncoding, Trainer};

const LSTM: &str = "tests/data/bidirectional_lstm_reference.safetensors";
const GRU: &str = "tests/data/bidirectional_gru_reference.safetensors";
const MEAN: &str = "tests/data/pool_mean_reference.safetensors";
const MAX: &str = "tests/data/pool_max_reference.safetensors";
const TCN: &str = "tests/data/tcn_reference.safetensors";
const ENCODER: &str = "tests/data/encoder_reference.safetensors";
const PRENORM: &str = "tests/data/encoder_prenorm_reference.safetensors";
const LEARNED: &str = "tests/data/encoder_learned_reference.safetensors";

/// The model of reference file `file`, sized by its metadata.
fn model(file: &str, meta: &std::collections::HashMap<String, String>) -> ModelDescription {
    let size = |k| meta_usize(meta, k);
    let b = ModelDescription::builder().features(size("input"));
    let b = match file {
        TCN => b
            .conv1d(size("channels"), 3, ConvPadding::Causal, Activation::Relu)
            .named("conv1")
            .conv1d(size("channels"), 2, ConvPadding::Same, Activation::Relu)
            .dilation(2)
            .residual()
            .named("conv2")
            .mean_pool(),
        ENCODER | PRENORM | LEARNED => {
            let b = match file {
                LEARNED => b
                    .positions(PositionEncoding::Learned {
                        max_len: size("max_len"),
                    })
                    .named("positions"),
                _ => b.positions(PositionEncoding::Sinusoidal),
            };
            let b = b
                .transformer_encoder(size("layers"), size("heads"))
                .feedforward(size("feedforward"))
                .encoder_dropout(0.0)
                .named("encoder");
            let b = match file {
                PRENORM => b.norm_first().encoder_activation(Activation::Gelu).causal(),
                LEARNED => b.norm_first().final_norm(),
                _ => b,
            };
            b.mean_pool()
        }
        _ => {
            let (hidden, layers) = (size("hidden"), size("layers"));
            let b = match file {
                LSTM => b.lstm(hidden, layers).bidirectional().every_step(),
                GRU => b.gru(hidden, layers).bidirectional(),
                MEAN => b.lstm(hidden, layers).mean_pool(),
                _ => b.gru(hidden, layers).bidirectional().max_pool(),
            };
            match file {
                GRU | MAX => b.dense(size("dense"), Activation::Tanh),
                _ => b,
            }
        }
    };
    b.classify(size("classes")).build().unwrap()
}

/// The elements of the keys' bias in an attention's `in_proj_bias` `[3F]` (the middle
/// third), if `name` is one.
fn key_bias(name: &str, len: usize) -> Option<std::ops::Range<usize>> {
    name.ends_with("self_attn.in_proj_bias")
        .then(|| len / 3..2 * len / 3)
}

/// Trains the file's model for its two steps on `backend` and evaluates it, comparing
/// everything the file holds; returns how many gradients and parameters were compared.
fn matches_pytorch(file: &str, backend: Box<dyn Backend>) -> usize {
    let (init, meta) = reference(file, "init.");
    let opts = tensorfit::nn::TrainOptions {
        padded: true,
        ..train_options(meta_usize(&meta, "steps"), meta["lr"].parse().unwrap())
    };
    let mut trainer = Trainer::new(backend, model(file, &meta), &init, opts).unwrap();
    let mut compared = 0;
    for s in 1..=2 {
        let (r, _) = reference(file, &format!("step{s}."));
        let want = |n: &str| r.require(n).unwrap().data.clone();
        let x = r.require("x").unwrap();
        let lengths = want("lengths");
        let report = trainer
            .train_step_at(x, &want("labels"), Some(&lengths))
            .unwrap();
        check_reference(
            &format!("{file} step{s} loss"),
            &[report.loss],
            &want("loss"),
        );
        let probs = &report.probs.data;
        check_reference(&format!("{file} step{s} probs"), probs, &want("probs"));
        let grads = trainer.gradients().unwrap();
        let params = trainer.parameters().unwrap();
        for (kind, store) in [("grad", grads), ("after", params)] {
            for (name, t) in store.iter() {
                let what = format!("{file} step{s} {kind} {name}");
                let reference = want(&format!("{kind}.{name}"));
                let mut ours = t.data.clone();
                if let Some(keys) = key_bias(name, ours.len()) {
                    // Adding a constant to a query's every score leaves its softmax
                    // unchanged, so the key bias's gradient is zero but for rounding,
                    // and Adam's first steps (g / (|g| + eps)) turn that noise into
                    // updates of up to lr: no float32 engine matches PyTorch's there.
                    // The gradient is checked to be that noise; the keys' bias itself
                    // is left out of the comparison (it changes no output).
                    if kind == "grad" {
                        let largest = t.data.iter().fold(0f32, |m, g| m.max(g.abs()));
                        let noise = ours[keys.clone()].iter().fold(0f32, |m, g| m.max(g.abs()));
                        assert!(
                            noise <= 1e-5 * largest.max(1e-3),
                            "{what}: key bias gradient {noise}"
                        );
                    }
                    ours[keys.clone()].copy_from_slice(&reference[keys]);
                }
                check_reference(&what, &ours, &reference);
                compared += 1;
            }
        }
    }
    let (r, _) = reference(file, "step1.");
    let (e, _) = reference(file, "eval.");
    let want = |store: &tensorfit::nn::ParamStore, n: &str| store.require(n).unwrap().data.clone();
    let report = trainer
        .evaluate_at(
            r.require("x").unwrap(),
            &want(&r, "labels"),
            Some(&want(&r, "lengths")),
        )
        .unwrap();
    check_reference(
        &format!("{file} eval loss"),
        &[report.loss],
        &want(&e, "loss"),
    );
    let probs = &report.probs.data;
    check_reference(&format!("{file} eval probs"), probs, &want(&e, "probs"));
    compared
}

#[test]
fn a_bidirectional_lstm_tagger_over_a_padded_batch_trains_and_infers_as_pytorchs() {
    // Two layers of two directions of four tensors, and out's two: 18 gradients and 18
    // parameters a step.
    assert_eq!(matches_pytorch(LSTM, Box::new(CpuBackend::new())), 2 * 36);
}

#[test]
fn a_bidirectional_gru_classifier_reads_each_directions_own_last_step_as_pytorch() {
    assert_eq!(matches_pytorch(GRU, Box::new(CpuBackend::new())), 2 * 40);
}

#[test]
fn the_mean_over_each_sequences_own_steps_trains_and_infers_as_pytorchs() {
    // Two layers of four tensors, and out's two: 10 gradients and 10 parameters a step.
    assert_eq!(matches_pytorch(MEAN, Box::new(CpuBackend::new())), 2 * 20);
}

#[test]
fn each_features_maximum_over_each_sequences_own_steps_trains_as_pytorchs() {
    assert_eq!(matches_pytorch(MAX, Box::new(CpuBackend::new())), 2 * 40);
}

#[test]
fn a_tcn_of_causal_and_dilated_residual_convolutions_trains_as_pytorchs() {
    // Two convolutions and out, two tensors each: 6 gradients and 6 parameters a step.
    assert_eq!(matches_pytorch(TCN, Box::new(CpuBackend::new())), 2 * 12);
}

#[test]
fn a_post_norm_transformer_encoder_over_a_padded_batch_trains_as_pytorchs() {
    // Two encoder layers of 12 tensors, and out's two: 26 gradients and 26 parameters.
    assert_eq!(
        matches_pytorch(ENCODER, Box::new(CpuBackend::new())),
        2 * 52
    );
}

#[test]
fn a_pre_norm_gelu_causal_transformer_encoder_trains_as_pytorchs() {
    assert_eq!(
        matches_pytorch(PRENORM, Box::new(CpuBackend::new())),
        2 * 52
    );
}

#[test]
fn learned_positions_and_a_pre_norm_encoder_with_a_final_norm_train_as_pytorchs() {
    // The positions' table and the final norm's two: 29 gradients and 29 parameters.
    assert_eq!(
        matches_pytorch(LEARNED, Box::new(CpuBackend::new())),
        2 * 58
    );
}

#[test]
fn every_model_agrees_with_pytorch_on_wgpu() {
    if !wgpu_present() {
        return;
    }
    for file in [LSTM, GRU, MEAN, MAX, TCN, ENCODER, PRENORM, LEARNED] {
        let gpu = Box::new(tensorfit_wgpu::WgpuBackend::new().unwrap());
        matches_pytorch(file, gpu);
    }
}
