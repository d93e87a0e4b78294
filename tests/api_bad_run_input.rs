//! The library's front door under the mistakes a real app makes once a run is open
//! (inputs, labels, streams, odd orders of calls, files, wgpu, a head on every step):
//! every case is a typed [`tensorfit::Error`] whose message names what is wrong, never a
//! panic, an abort or a hang. `tests/api_bad_input.rs` covers what comes before a run.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::{DeviceKind, HostTensor, Shape};
use tensorfit::nn::{InputSpec, LossSpec};
use tensorfit::{Control, DevicePolicy, Error, Model, Sequences, Training};

use common::api_inputs::*;
use common::task_model;

// --- Runner ----------------------------------------------------------------------------

#[test]
fn a_run_refuses_what_its_plan_does_not_hold() {
    let mut eval = small().open(EVAL, &cpu()).unwrap();
    bad_input(eval.train_step(&batch(), &[0.0; 4]), &["no training steps"]);
    let mut train = small().open(TRAIN, &cpu()).unwrap();
    bad_input(train.predict(&batch()), &["no evaluations", "eval"]);
    bad_input(
        eval.evaluate(&HostTensor::zeros([7, 4, 152]), &[0.0; 4]),
        &["up to 4 sequences of up to 6 steps", "4 of 7"],
    );
}

#[test]
fn an_untrained_model_predicts_probabilities() {
    let mut run = small().open(EVAL, &cpu()).unwrap();
    let p = run.predict(&batch()).unwrap();
    assert_eq!(p.shape.dims(), &[4, 6]);
    for row in p.data.chunks(6) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{row:?}");
    }
}

#[test]
fn inputs_of_the_wrong_width_or_rank_name_the_shape_expected() {
    let mut run = small().open(EVAL, &cpu()).unwrap();
    bad_input(
        run.evaluate(&HostTensor::zeros([6, 4, 10]), &[0.0; 4]),
        &["[6, 4, 10]", "[time, batch, 152]"],
    );
    bad_input(
        run.predict(&HostTensor::zeros([6, 4])),
        &["[6, 4]", "[time, batch, 152]"],
    );
    bad_input(
        run.predict(&HostTensor::zeros([152])),
        &["shape [152]", "[time, batch, features]"],
    );
}

#[test]
fn an_input_whose_values_do_not_fill_its_shape_is_refused() {
    // The fields are public: an app can build a tensor `HostTensor::new` would refuse.
    let short = HostTensor {
        shape: Shape::from([6, 4, 152]),
        data: vec![0.0; 100],
    };
    let mut run = small().open(EVAL, &cpu()).unwrap();
    bad_input(run.predict(&short), &["100 values", "[6, 4, 152]"]);
    let mut train = small().open(TRAIN, &cpu()).unwrap();
    bad_input(
        train.train_step(&short, &[0.0; 4]),
        &["100 values", "[6, 4, 152]"],
    );
}

#[test]
fn inputs_that_are_not_finite_name_time_sequence_and_feature() {
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut x = batch();
        x.data[(152 * 4) * 2 + 152 + 3] = v;
        bad_input(
            run.train_step(&x, &[0.0; 4]),
            &[&format!("{v}"), "time 2, sequence 1, feature 3"],
        );
    }
}

#[test]
fn labels_of_the_wrong_count_give_the_count_and_the_batch() {
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    bad_input(
        run.train_step(&batch(), &[0.0; 3]),
        &["3 labels", "batch of 4"],
    );
    let mut eval = small().open(EVAL, &cpu()).unwrap();
    bad_input(
        eval.evaluate(&batch(), &[0.0; 5]),
        &["5 labels", "batch of 4"],
    );
}

#[test]
fn a_classifier_refuses_labels_that_are_not_its_classes() {
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    for bad in [6.0, -1.0, 1.5, f32::NAN] {
        bad_input(
            run.train_step(&batch(), &[0.0, 1.0, bad, 2.0]),
            &[&format!("label 2 is {bad}"), "class index in 0..6"],
        );
    }
}

#[test]
fn a_regression_refuses_targets_of_the_wrong_count_or_not_finite() {
    let mut run = small_with(LossSpec::MeanSquaredError { outputs: 2 })
        .open(TRAIN, &cpu())
        .unwrap();
    // One class id per sequence is not two targets per sequence.
    bad_input(
        run.train_step(&batch(), &[0.0, 1.0, 2.0, 3.0]),
        &["4 labels", "2 per sequence"],
    );
    let mut targets = [0.5; 8];
    targets[3] = f32::INFINITY;
    bad_input(
        run.train_step(&batch(), &targets),
        &["target 1 of row 1 is inf"],
    );
}

#[test]
fn token_ids_outside_the_vocabulary_or_not_whole_name_step_and_row() {
    let model = small_on_tokens();
    let mut run = model.open(TRAIN, &cpu()).unwrap();
    for bad in [5.0, -1.0, 2.5, f32::NAN] {
        let mut x = HostTensor::zeros([6, 4]);
        x.data[4 * 3 + 2] = bad;
        bad_input(
            run.train_step(&x, &[0.0; 4]),
            &[&format!("token id {bad}"), "step 3, batch row 2", "0..5"],
        );
    }
    bad_input(
        run.train_step(&batch(), &[0.0; 4]),
        &["[time, batch] token ids in 0..5"],
    );
}

#[test]
fn fit_stops_at_the_first_bad_batch_with_its_error() {
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    let good = || Ok(tensorfit::Batch::new(batch(), vec![0.0; 4]));
    let bad = Err(Error::bad_input("the app's own reader failed"));
    let mut steps = 0;
    let r = run.fit([good(), bad, good()], |_| {
        steps += 1;
        Control::Continue
    });
    bad_input(r, &["the app's own reader failed"]);
    assert_eq!(steps, 1);
    // A batch longer than the plan's bound.
    let other = Sequences::new(vec![vec![0.0; 8 * 152]; 4], vec![0.0; 4], 152).unwrap();
    bad_input(
        run.fit(other.batches(4, 1, 1), |_| Control::Continue),
        &["up to 4 sequences of up to 6 steps", "4 of 8"],
    );
}

#[test]
fn padded_lengths_longer_than_the_batch_or_zero_name_the_sequence() {
    let mut run = small().open(EVAL, &cpu()).unwrap();
    for (lengths, says) in [
        (vec![6, 7, 6, 6], "length 7"),
        (vec![6, 0, 6, 6], "sequence 1"),
        (vec![6; 3], "3 lengths for a batch of 4"),
    ] {
        let b = tensorfit::Batch {
            lengths: Some(lengths),
            ..tensorfit::Batch::new(batch(), vec![0.0; 4])
        };
        bad_input(run.evaluate_batch(&b), &[says]);
    }
}

#[test]
fn truncation_lengths_longer_or_not_dividing_the_sequence_still_train() {
    for (tbptt, tbptt_mode) in [
        (Some(usize::MAX), tensorfit::nn::TbpttMode::Last),
        (Some(4), tensorfit::nn::TbpttMode::Windows),
        (Some(usize::MAX), tensorfit::nn::TbpttMode::Windows),
        (None, tensorfit::nn::TbpttMode::Windows),
    ] {
        let t = Training {
            tbptt,
            tbptt_mode,
            ..Training::default()
        };
        let mut run = small().with_training(t).open(TRAIN, &cpu()).unwrap();
        let step = run.train_step(&batch(), &[0.0; 4]).unwrap();
        assert!(step.loss.is_finite(), "{tbptt:?} {tbptt_mode:?}");
    }
}

// --- Stream ----------------------------------------------------------------------------

#[test]
fn a_stream_step_of_the_wrong_size_or_not_finite_is_refused() {
    let mut stream = small().stream(2, &cpu()).unwrap();
    bad_input(stream.step(&[0.0; 152]), &["takes 304 values", "got 152"]);
    let mut x = vec![0.0; 304];
    x[152 + 9] = f32::NAN;
    bad_input(stream.step(&x), &["NaN", "sequence 1, feature 9"]);
    bad_input(
        stream.reset_sequence(2),
        &["stream 2 does not exist", "2 sequences"],
    );
    // The stream is still usable after each refusal.
    assert_eq!(stream.step(&[0.0; 304]).unwrap().len(), 12);
}

#[test]
fn a_token_stream_refuses_an_id_outside_the_vocabulary() {
    let mut stream = small_on_tokens().stream(2, &cpu()).unwrap();
    bad_input(
        stream.step(&[1.0, 9.0]),
        &["token id 9", "batch row 1", "0..5"],
    );
    assert_eq!(stream.step(&[1.0, 4.0]).unwrap().len(), 12);
}

// --- Odd orders and files --------------------------------------------------------------

#[test]
fn a_refused_call_leaves_the_run_usable() {
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    bad_input(run.train_step(&batch(), &[9.0; 4]), &["label 0 is 9"]);
    let step = run.train_step(&batch(), &[0.0; 4]).unwrap();
    assert_eq!(step.step, 1, "the refused call took no step");
    assert!(step.loss.is_finite());
    // Saving, reading the model back and saving again need no training first.
    let dir = common::scratch("api_bad_input");
    run.save(&dir.join("usable.safetensors")).unwrap();
    run.model()
        .unwrap()
        .save(&dir.join("usable-model.safetensors"))
        .unwrap();
}

#[test]
fn step_labels_for_a_model_that_labels_sequences_give_both_counts() {
    let data = Sequences::with_step_labels(vec![vec![0.0; 6 * 152]; 4], vec![vec![0.0; 6]; 4], 152)
        .unwrap();
    let b = data.all().unwrap();
    let mut run = small().open(TRAIN, &cpu()).unwrap();
    bad_input(
        run.train_step(&b.x, &b.labels),
        &["24 labels", "batch of 4", "1 per sequence"],
    );
}

#[test]
fn files_that_cannot_be_written_or_read_are_file_errors_naming_the_path() {
    let missing = common::scratch("api_bad_input").join("no-such-dir/x.safetensors");
    for r in [
        small().save(&missing),
        small().open(EVAL, &cpu()).unwrap().save(&missing),
        Model::load(&missing).map(|_| ()),
        Model::from_description_file(&missing, 1).map(|_| ()),
    ] {
        match r {
            Err(Error::File { path, .. }) => assert!(path.ends_with("x.safetensors"), "{path:?}"),
            other => panic!("expected a file error, got {other:?}"),
        }
    }
}

/// A long CSV of three sequences of 2, 3 and 1 steps of 2 features, one label each.
fn three_sequences() -> std::sync::Arc<dyn tensorfit::data::Source> {
    let path = common::scratch("api_bad_input").join("three.csv");
    std::fs::write(
        &path,
        "s0,0,0.1,0.2,\ns0,1,0.3,0.4,1\ns1,0,0.5,0.6,\ns1,1,0.7,0.8,\ns1,2,0.9,1.0,0\ns2,0,1.1,1.2,1\n",
    )
    .unwrap();
    match tensorfit::data::open(&path, &Default::default()).unwrap() {
        tensorfit::data::Opened::Sequences(s) => s,
        other => panic!("expected sequences, got {other:?}"),
    }
}

#[test]
fn data_batches_of_sequences_that_are_not_in_the_file_name_the_index() {
    use tensorfit::data::{epoch_order, BatchSettings, Batches, DataError};
    let source = three_sequences();
    let settings = BatchSettings {
        batch: 2,
        ..BatchSettings::default()
    };
    let says = |r: Result<_, DataError>| match r {
        Err(DataError::Settings(m)) => {
            assert!(m.contains("sequence 7") && m.contains("3 sequences"), "{m}")
        }
        Err(e) => panic!("expected a settings error, got {e}"),
        Ok(_) => panic!("expected a settings error"),
    };
    says(epoch_order(source.as_ref(), &[0, 7], 0, &settings).map(|_| ()));
    says(Batches::in_order(source.clone(), vec![vec![0], vec![7, 1]], 1).map(|_| ()));
    // Batches of zero sequences are refused as well.
    match Batches::in_order(source, vec![vec![]], 1) {
        Err(DataError::Settings(m)) => {
            assert!(m.contains("batch 0") && m.contains("no sequences"), "{m}")
        }
        other => panic!("expected a settings error, got {:?}", other.map(|_| ())),
    }
}

// --- wgpu, whose kernels cannot return an error ----------------------------------------

#[test]
fn on_wgpu_bad_ids_and_short_inputs_are_refused_before_they_reach_a_kernel() {
    if !common::wgpu_present() {
        return;
    }
    let wgpu = DevicePolicy::only(DeviceKind::Wgpu);
    let mut run = small_on_tokens().open(TRAIN, &wgpu).unwrap();
    assert!(run.device().starts_with("wgpu"), "{}", run.device());
    let mut x = HostTensor::zeros([6, 4]);
    x.data[4 * 5 + 3] = 5.0;
    bad_input(
        run.train_step(&x, &[0.0; 4]),
        &["token id 5", "step 5, batch row 3"],
    );
    let short = HostTensor {
        shape: Shape::from([6, 4]),
        data: vec![0.0; 23],
    };
    bad_input(run.train_step(&short, &[0.0; 4]), &["23 values", "[6, 4]"]);
    assert!(run
        .train_step(&HostTensor::zeros([6, 4]), &[0.0; 4])
        .is_ok());
    let mut stream = small_on_tokens().stream(2, &wgpu).unwrap();
    bad_input(stream.step(&[0.0, -3.0]), &["token id -3", "batch row 1"]);
    match small().open(EVAL, &wgpu.cap(DeviceKind::Wgpu, 1024)) {
        Err(Error::OutOfMemory { device, .. }) => assert!(device.contains("wgpu"), "{device}"),
        other => panic!("expected out of memory, got {:?}", other.map(|_| ())),
    }
}

// --- A head on every step --------------------------------------------------------------

/// A character language model: ids of a vocabulary of 5 in, the next id at every step.
fn small_language_model() -> Model {
    let mut d = task_model(8, 1, 4);
    d.input = InputSpec::Tokens {
        vocab: 5,
        embedding: Some(3),
    };
    d.head.on = tensorfit::nn::HeadOn::EveryStep;
    d.head.layers.clear();
    d.loss = LossSpec::SoftmaxCrossEntropy { classes: 5 };
    Model::new(d, 1).unwrap()
}

#[test]
fn a_language_model_takes_ignored_steps_and_refuses_other_labels() {
    let mut run = small_language_model().open(TRAIN, &cpu()).unwrap();
    let x = HostTensor::zeros([6, 4]);
    bad_input(
        run.train_step(&x, &[0.0; 4]),
        &[
            "4 labels",
            "batch of 4 × 6 steps",
            "per step of each sequence",
        ],
    );
    let mut labels = [1.0; 24];
    labels[..4].fill(-1.0);
    assert!(run.train_step(&x, &labels).unwrap().loss.is_finite());
    // Every step ignored: nothing to learn from, and no division by zero.
    assert!(run.train_step(&x, &[-1.0; 24]).unwrap().loss.is_finite());
    labels[17] = 5.0;
    bad_input(
        run.train_step(&x, &labels),
        &["label 17 is 5", "0..5", "-1: ignored"],
    );
    let mut stream = small_language_model().stream(1, &cpu()).unwrap();
    bad_input(
        stream.step(&[1e30]),
        &["token id 1000000000000000000000000000000", "0..5"],
    );
    assert_eq!(stream.step(&[4.0]).unwrap().len(), 5);
}
