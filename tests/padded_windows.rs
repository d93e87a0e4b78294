//! Padded batches with truncated BPTT and a head on every step: windowed truncated BPTT
//! (`TbpttMode::Windows`) and evaluation in chunks read every step from step 0, so a
//! sequence that ends before the last window (or the last chunk) runs, its steps past the
//! end masked. The result is the unpadded equivalent's: the same batch run without lengths,
//! its labels past each sequence's end `IGNORE_LABEL` (an LSTM is causal, so its steps
//! before the end do not see the padding): the same loss of every window, the same
//! updates, the same probabilities at every real step.
//!
//! In mode `last` only the segment's steps have a loss: a sequence that ends before it is
//! refused, saying so (not "the head reads each sequence's last step").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::assert_close;
use tensorfit::core::HostTensor;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::every_step::IGNORE_LABEL;
use tensorfit::nn::{
    Cell, HeadLayer, HeadLayerKind, ModelDescription, OptimConfig, ParamStore, TbpttMode,
    TrainOptions, Trainer,
};

const VOCAB: usize = 5;
/// Four sequences padded to 7 steps; two end before the last window of 3 (steps 6..7),
/// one before the last two.
const LENGTHS: [f32; 4] = [7.0, 3.0, 5.0, 2.0];
const STEPS: usize = 7;

/// A language model over `VOCAB` token ids: 2 layers of `cell`.
fn model(cell: Cell) -> ModelDescription {
    let mut m = ModelDescription::lstm_language_model(VOCAB, 6, 2);
    m.recurrent_mut().unwrap().cell = cell;
    m
}

/// Token ids `[T, B]` and per-step labels `[T, B]`, labels past each end `IGNORE_LABEL`
/// (as `train --data` writes them), from a fixed pattern.
fn batch() -> (HostTensor, Vec<f32>) {
    let b = LENGTHS.len();
    let ids: Vec<f32> = (0..STEPS * b)
        .map(|i| ((i * 7 + 3) % VOCAB) as f32)
        .collect();
    let labels = (0..STEPS * b)
        .map(|i| match (i / b) as f32 >= LENGTHS[i % b] {
            true => IGNORE_LABEL,
            false => ((i * 3 + 1) % VOCAB) as f32,
        })
        .collect();
    (HostTensor::new([STEPS, b], ids).unwrap(), labels)
}

fn trainer(
    cfg: &ModelDescription,
    init: &ParamStore,
    mode: TbpttMode,
    chunk: usize,
    padded: bool,
) -> Trainer {
    let opts = TrainOptions {
        tbptt: 3,
        tbptt_mode: mode,
        chunk,
        padded,
        optim: OptimConfig::adam(0.05),
        ..TrainOptions::default()
    };
    Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), init, opts).unwrap()
}

/// The padded batch trained in windows (its activations recomputed in sub-segments of
/// `recompute` steps, when given) against the unpadded one with ignored labels.
fn windows_train_as_the_unpadded_batch_with_ignored_labels(cell: Cell, recompute: Option<usize>) {
    let cfg = model(cell);
    let init = ParamStore::init(&cfg, 3).unwrap();
    let (x, labels) = batch();
    let mut padded = trainer(&cfg, &init, TbpttMode::Windows, 3, true);
    if recompute.is_some() {
        let opts = TrainOptions {
            recompute,
            ..padded.options().clone()
        };
        padded = Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &init, opts).unwrap();
    }
    let mut plain = trainer(&cfg, &init, TbpttMode::Windows, 3, false);
    for step in 1..=2 {
        let got = padded.train_step_at(&x, &labels, Some(&LENGTHS)).unwrap();
        let want = plain.train_step(&x, &labels).unwrap();
        assert_eq!(
            got.step,
            3 * step,
            "windows of 3, 3 and 1 steps: an update each"
        );
        assert_close("loss", &[got.loss], &[want.loss], 1e-6, 1e-5);
        assert_eq!(got.accuracy, want.accuracy, "step {step}");
    }
    let (after, want) = (padded.parameters().unwrap(), plain.parameters().unwrap());
    for (name, p) in after.iter() {
        let w = &want.get(name).unwrap().data;
        assert_close(&format!("{name} after 6 updates"), &p.data, w, 1e-6, 1e-5);
    }
}

#[test]
fn windowed_truncated_bptt_trains_a_padded_batch_as_the_unpadded_one_with_ignored_labels() {
    windows_train_as_the_unpadded_batch_with_ignored_labels(Cell::Lstm, None);
}

#[test]
fn windowed_truncated_bptt_recomputed_trains_a_padded_batch_as_the_unpadded_one() {
    windows_train_as_the_unpadded_batch_with_ignored_labels(Cell::Lstm, Some(2));
}

#[test]
fn windowed_truncated_bptt_trains_a_padded_batch_of_a_gru_as_the_unpadded_one() {
    windows_train_as_the_unpadded_batch_with_ignored_labels(Cell::Gru, None);
}

#[test]
fn a_padded_batch_evaluated_in_chunks_scores_every_real_step_with_a_head_on_every_step() {
    let cfg = model(Cell::Lstm);
    let init = ParamStore::init(&cfg, 5).unwrap();
    let (x, labels) = batch();
    // Chunks of 2 steps: the last (5..7) is past the end of three sequences.
    let got = trainer(&cfg, &init, TbpttMode::Last, 2, true)
        .evaluate_at(&x, &labels, Some(&LENGTHS))
        .unwrap();
    let want = trainer(&cfg, &init, TbpttMode::Last, STEPS, false)
        .evaluate_at(&x, &labels, None)
        .unwrap();
    assert_close("loss", &[got.loss], &[want.loss], 1e-6, 1e-5);
    assert_eq!(got.accuracy, want.accuracy);
    let b = LENGTHS.len();
    for t in 0..STEPS {
        for (r, &len) in LENGTHS.iter().enumerate() {
            if (t as f32) < len {
                let row = (t * b + r) * VOCAB..(t * b + r + 1) * VOCAB;
                let what = format!("probabilities of step {t} of sequence {r}");
                let (g, w) = (&got.probs.data[row.clone()], &want.probs.data[row]);
                assert_close(&what, g, w, 1e-6, 1e-5);
            }
        }
    }
}

#[test]
fn a_batchnorm_on_every_step_evaluates_a_padded_batch_as_the_unpadded_one() {
    // Inference normalises each row by the running statistics: the padding counts for
    // nothing (training it over padded batches is refused, its batch statistics would
    // count the padding).
    let mut cfg = model(Cell::Lstm);
    cfg.head.layers = vec![HeadLayer {
        name: "bn".into(),
        kind: HeadLayerKind::BatchNorm,
        residual: false,
    }];
    let init = ParamStore::init(&cfg, 5).unwrap();
    let (x, labels) = batch();
    let got = trainer(&cfg, &init, TbpttMode::Last, 2, true)
        .evaluate_at(&x, &labels, Some(&LENGTHS))
        .unwrap();
    let want = trainer(&cfg, &init, TbpttMode::Last, STEPS, false)
        .evaluate_at(&x, &labels, None)
        .unwrap();
    assert_close("loss", &[got.loss], &[want.loss], 1e-6, 1e-5);
    assert_eq!(got.accuracy, want.accuracy);
    let e = trainer(&cfg, &init, TbpttMode::Windows, 3, true)
        .train_step_at(&x, &labels, Some(&LENGTHS))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot train over a padded batch"), "{e}");
}

#[test]
fn mode_last_refuses_a_sequence_without_a_step_in_the_segment_saying_why() {
    let cfg = model(Cell::Lstm);
    let init = ParamStore::init(&cfg, 5).unwrap();
    let (x, labels) = batch();
    let e = trainer(&cfg, &init, TbpttMode::Last, 3, true)
        .train_step_at(&x, &labels, Some(&LENGTHS))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a sequence of 2 steps ends before the last truncated-BPTT segment (--tbptt) of steps 4..7"),
        "{e}"
    );
    assert!(e.contains("the head reads every step"), "{e}");
    assert!(e.contains("none of its labels would count"), "{e}");
    assert!(!e.contains("last step"), "a head on every step: {e}");
}
