//! A head on every step through the trainer: a language model learns the built-in
//! next-symbol task to near the chain's entropy; evaluation in chunks and micro-batches
//! gives what one whole pass gives; steps labelled IGNORE_LABEL count nowhere.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::cpu::CpuBackend;
use tensorfit::nn::every_step::IGNORE_LABEL;
use tensorfit::nn::{
    HeadOn, InputSpec, LossSpec, MarkovText, ModelDescription, ParamStore, TrainOptions, Trainer,
};

use common::{assert_close, train_options};

/// A character model: `vocab` token ids straight into one LSTM layer of `hidden`, the
/// output layer on every step.
fn language_model(vocab: usize, hidden: usize) -> ModelDescription {
    let mut d = ModelDescription::seed();
    d.input = InputSpec::Tokens {
        vocab,
        embedding: None,
    };
    d.recurrent_mut().unwrap().hidden = hidden;
    d.recurrent_mut().unwrap().layers = 1;
    d.head.on = HeadOn::EveryStep;
    d.head.layers.clear();
    d.loss = LossSpec::SoftmaxCrossEntropy { classes: vocab };
    d
}

fn trainer(cfg: &ModelDescription, opts: TrainOptions) -> Trainer {
    let params = ParamStore::init(cfg, 4).unwrap();
    Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &params, opts).unwrap()
}

#[test]
fn a_language_model_learns_the_next_symbol_task_to_near_the_chains_entropy() {
    let cfg = language_model(16, 32);
    let (batch, steps) = (16, 20);
    let mut t = trainer(&cfg, train_options(steps, 2e-2));
    let mut data = MarkovText::for_model(&cfg, 1).unwrap();
    let held_out = MarkovText::for_model(&cfg, 77)
        .unwrap()
        .batch(64, steps)
        .unwrap();
    let start = t.evaluate(&held_out.x, &held_out.labels).unwrap();
    let mut history = Vec::new();
    let mut best = f32::INFINITY;
    for step in 1..=300 {
        let b = data.batch(batch, steps).unwrap();
        let r = t.train_step(&b.x, &b.labels).unwrap();
        assert_eq!(r.probs.shape.dims(), &[steps, batch, 16]);
        if step % 50 == 0 {
            let e = t.evaluate(&held_out.x, &held_out.labels).unwrap();
            let bits = e.loss / std::f32::consts::LN_2;
            history.push((step, bits, e.accuracy.unwrap()));
            best = best.min(bits);
        }
    }
    let entropy = MarkovText::entropy_bits() as f32;
    println!(
        "start {:.3} bits; held-out (step, bits per symbol, accuracy): {history:?}; chain {entropy:.4} bits",
        start.loss / std::f32::consts::LN_2
    );
    // Uniform guessing is log2(16) = 4 bits; the chain's floor is 1.30.
    assert!(best < entropy + 0.25, "best {best} bits, chain {entropy}");
    let last = history.last().unwrap();
    assert!(last.2 > 0.5, "accuracy {} (best possible 0.6)", last.2);
}

#[test]
fn evaluation_in_chunks_and_micro_batches_gives_what_one_pass_gives() {
    let cfg = language_model(9, 12);
    let (batch, steps) = (5, 23);
    let b = MarkovText::for_model(&cfg, 3)
        .unwrap()
        .batch(batch, steps)
        .unwrap();
    let whole = TrainOptions {
        chunk: steps,
        ..train_options(steps, 1e-2)
    };
    let want = trainer(&cfg, whole).evaluate(&b.x, &b.labels).unwrap();
    assert_eq!(want.probs.shape.dims(), &[steps, batch, 9]);
    let streamed = TrainOptions {
        chunk: 7,
        micro_batch: Some(2),
        ..train_options(steps, 1e-2)
    };
    let got = trainer(&cfg, streamed).evaluate(&b.x, &b.labels).unwrap();
    assert_close("probs", &got.probs.data, &want.probs.data, 1e-6, 1e-5);
    assert_close("loss", &[got.loss], &[want.loss], 1e-6, 1e-5);
    assert_eq!(got.accuracy, want.accuracy);
    let predicted = trainer(&cfg, train_options(steps, 1e-2))
        .predict(&b.x)
        .unwrap();
    assert_eq!(predicted.shape.dims(), &[steps, batch, 9]);
}

#[test]
fn ignored_steps_count_neither_in_the_loss_nor_in_the_gradients() {
    // Steps past each sequence's own length labelled IGNORE_LABEL: the loss is the mean
    // over the real steps, and the gradient is each sequence's own gradient (run alone
    // at its length) weighted by its share of the real steps.
    let cfg = language_model(7, 6);
    let (batch, steps) = (3, 8);
    let b = MarkovText::for_model(&cfg, 5)
        .unwrap()
        .batch(batch, steps)
        .unwrap();
    let lengths = [8, 3, 5];
    let labels: Vec<f32> = (0..steps * batch)
        .map(|i| {
            let (t, row) = (i / batch, i % batch);
            if t < lengths[row] {
                b.labels[i]
            } else {
                IGNORE_LABEL
            }
        })
        .collect();
    let mut all = trainer(&cfg, train_options(steps, 1e-2));
    let r = all.train_step(&b.x, &labels).unwrap();
    let real: Vec<(usize, f32)> = labels
        .iter()
        .enumerate()
        .filter(|(_, &l)| l != IGNORE_LABEL)
        .map(|(i, &l)| (i, l))
        .collect();
    assert_eq!(real.len(), 16);
    let mean: f64 = real
        .iter()
        .map(|&(i, l)| -(r.probs.data[i * 7 + l as usize] as f64).ln())
        .sum::<f64>()
        / 16.0;
    assert!((r.loss as f64 - mean).abs() < 1e-5, "{} vs {mean}", r.loss);
    let got = all.gradients().unwrap();

    let mut want: Vec<(String, Vec<f64>)> = Vec::new();
    for (row, &len) in lengths.iter().enumerate() {
        let x: Vec<f32> = (0..len).map(|t| b.x.data[t * batch + row]).collect();
        let y: Vec<f32> = (0..len).map(|t| b.labels[t * batch + row]).collect();
        let x = tensorfit::core::HostTensor::new([len, 1], x).unwrap();
        let mut one = trainer(&cfg, train_options(len, 1e-2));
        one.train_step(&x, &y).unwrap();
        let share = len as f64 / 16.0;
        for (k, (name, g)) in one.gradients().unwrap().iter().enumerate() {
            if want.len() <= k {
                want.push((name.to_string(), vec![0.0; g.data.len()]));
            }
            for (w, &v) in want[k].1.iter_mut().zip(&g.data) {
                *w += share * v as f64;
            }
        }
    }
    for (name, w) in &want {
        let w: Vec<f32> = w.iter().map(|&v| v as f32).collect();
        assert_close(name, &got.get(name).unwrap().data, &w, 1e-6, 1e-4);
    }
}
