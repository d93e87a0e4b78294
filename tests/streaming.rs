//! Streaming inference through the front door: a sequence fed step by step gives, at
//! every step, what one whole-sequence prediction of the steps so far gives, on the CPU
//! and on wgpu (skipped with a printed reason when no adapter is present, and failing
//! instead under `TENSORFIT_REQUIRE=wgpu`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::{DeviceKind, HostTensor, Rng};
use tensorfit::nn::{Cell, HeadOn, InputSpec, Job, ModelDescription};
use tensorfit::{DevicePolicy, Error, Model};

use common::{task_model, wgpu_present};

const BATCH: usize = 3;
const STEPS: usize = 9;

fn small_lstm() -> ModelDescription {
    task_model(16, 2, 8)
}

fn small_gru() -> ModelDescription {
    let mut d = task_model(16, 2, 8);
    d.recurrent_mut().unwrap().cell = Cell::Gru;
    d
}

fn small_tokens() -> ModelDescription {
    let mut d = task_model(16, 2, 8);
    d.input = InputSpec::Tokens {
        vocab: 11,
        embedding: None,
    };
    d.head.on = HeadOn::LAST_STEP;
    d
}

/// `[STEPS, BATCH, width]` values, time-major, random from `seed` (ids for a token model).
fn inputs(d: &ModelDescription, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    match d.input {
        InputSpec::Dense { features } => (0..STEPS * BATCH * features)
            .map(|_| rng.uniform_range(-1.0, 1.0))
            .collect(),
        InputSpec::Tokens { vocab, .. } => (0..STEPS * BATCH)
            .map(|_| rng.int_inclusive(0, vocab - 1) as f32)
            .collect(),
    }
}

fn width(d: &ModelDescription) -> usize {
    match d.input {
        InputSpec::Dense { features } => features,
        InputSpec::Tokens { .. } => 1,
    }
}

/// The first `t` steps of `x` as a whole-sequence input tensor.
fn prefix(d: &ModelDescription, x: &[f32], t: usize) -> HostTensor {
    let w = width(d);
    let data = x[..t * BATCH * w].to_vec();
    let tensor = match d.input {
        InputSpec::Dense { .. } => HostTensor::new([t, BATCH, w], data),
        InputSpec::Tokens { .. } => HostTensor::new([t, BATCH], data),
    };
    tensor.expect("prefix shape")
}

/// Steps every sequence through a stream and checks each step's output against a
/// whole-sequence prediction of the prefix, within 1e-6.
fn stream_equals_whole_sequences(d: ModelDescription, devices: &DevicePolicy) {
    let model = Model::new(d.clone(), 3).expect("model");
    let x = inputs(&d, 5);
    let w = width(&d);
    let mut stream = model.stream(BATCH, devices).expect("stream");
    for t in 1..=STEPS {
        let got = stream
            .step(&x[(t - 1) * BATCH * w..t * BATCH * w])
            .expect("step");
        let mut run = model
            .open(
                Job::Eval {
                    batch: BATCH,
                    seq_len: t,
                },
                devices,
            )
            .expect("whole-sequence run");
        let want = run.predict(&prefix(&d, &x, t)).expect("predict");
        common::assert_close(&format!("step {t}"), &got, &want.data, 1e-6, 0.0);
    }
}

#[test]
fn an_lstm_stream_equals_whole_sequence_predictions_on_the_cpu() {
    stream_equals_whole_sequences(small_lstm(), &DevicePolicy::only_cpu());
}

#[test]
fn a_gru_stream_equals_whole_sequence_predictions_on_the_cpu() {
    stream_equals_whole_sequences(small_gru(), &DevicePolicy::only_cpu());
}

#[test]
fn a_token_stream_equals_whole_sequence_predictions_on_the_cpu() {
    stream_equals_whole_sequences(small_tokens(), &DevicePolicy::only_cpu());
}

#[test]
fn an_lstm_stream_equals_whole_sequence_predictions_on_wgpu() {
    if !wgpu_present() {
        return;
    }
    stream_equals_whole_sequences(small_lstm(), &DevicePolicy::only(DeviceKind::Wgpu));
}

#[test]
fn resetting_one_sequence_starts_it_again_and_leaves_the_others() {
    let d = small_lstm();
    let model = Model::new(d.clone(), 3).expect("model");
    let x = inputs(&d, 6);
    let w = width(&d);
    let devices = DevicePolicy::only_cpu();
    let mut stream = model.stream(BATCH, &devices).expect("stream");
    let step = |t: usize| &x[t * BATCH * w..(t + 1) * BATCH * w];
    for t in 0..4 {
        stream.step(step(t)).expect("step");
    }
    stream.reset_sequence(1).expect("reset");
    let after = stream.step(step(4)).expect("step");
    // Sequence 1 restarted at step 4 with step 4's input: the output of one step from zero.
    let mut fresh = model.stream(BATCH, &devices).expect("stream");
    let from_zero = fresh.step(step(4)).expect("step");
    let outputs = d.loss.outputs();
    let row = |v: &[f32], r: usize| v[r * outputs..(r + 1) * outputs].to_vec();
    assert_eq!(row(&after, 1), row(&from_zero, 1));
    // Sequence 0 went on: five steps, not one.
    let mut run = model
        .open(
            Job::Eval {
                batch: BATCH,
                seq_len: 5,
            },
            &devices,
        )
        .expect("run");
    let whole = run.predict(&prefix(&d, &x, 5)).expect("predict");
    common::assert_close(
        "sequence 0",
        &row(&after, 0),
        &row(&whole.data, 0),
        1e-6,
        0.0,
    );
    assert_ne!(row(&after, 0), row(&from_zero, 0));
    stream.reset().expect("reset");
    assert_eq!(stream.step(step(4)).expect("step"), from_zero);
}

#[test]
fn a_stream_is_planned_like_any_job() {
    let model = Model::new(small_lstm(), 3).expect("model");
    let stream = model.stream(2, &DevicePolicy::only_cpu()).expect("stream");
    let plan = stream.plan();
    assert_eq!(
        plan.job(),
        Job::Eval {
            batch: 2,
            seq_len: 1
        }
    );
    assert_eq!(plan.device(), Some("cpu"));
    assert!(plan.peak_bytes().unwrap_or(0) > 0);
    assert!(plan.table().contains("cpu"), "{}", plan.table());
}

#[test]
fn a_step_of_the_wrong_width_or_a_missing_sequence_is_bad_input() {
    let model = Model::new(small_lstm(), 3).expect("model");
    let mut stream = model.stream(2, &DevicePolicy::only_cpu()).expect("stream");
    match stream.step(&[0.0; 5]) {
        Err(Error::BadInput(m)) => assert!(m.message.contains("304 values"), "{m}"),
        other => panic!("expected bad input, got {other:?}"),
    }
    match stream.reset_sequence(2) {
        Err(Error::BadInput(m)) => assert!(m.message.contains("stream 2"), "{m}"),
        other => panic!("expected bad input, got {other:?}"),
    }
    let mut x = vec![0.0; 2 * 152];
    x[7] = f32::NAN;
    assert!(matches!(stream.step(&x), Err(Error::BadInput(_))));
}
