//! The library's front door as an app uses it: fit with a callback that stops early,
//! save and load, and errors an app can match on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::DeviceKind;
use tensorfit::nn::Job;
use tensorfit::{Control, DevicePolicy, Error, Model, Sequences};

use common::{hot_first_step, scratch, task_model};

/// 12 sequences of 6 steps whose class is the feature hot at step 0.
fn data() -> Sequences {
    hot_first_step(12, 6)
}

fn small() -> Model {
    Model::new(task_model(16, 1, 8), 2).expect("model")
}

#[test]
fn fit_calls_back_after_every_step_and_stops_when_told() {
    let job = Job::Train {
        batch: 4,
        seq_len: 6,
        eval: None,
    };
    let mut run = small().open(job, &DevicePolicy::only_cpu()).expect("open");
    let mut seen = Vec::new();
    let report = run
        .fit(data().batches(4, 10, 1), |s| {
            seen.push(s.step);
            if s.step == 5 {
                Control::Stop
            } else {
                Control::Continue
            }
        })
        .expect("fit");
    assert_eq!(seen, [1, 2, 3, 4, 5]);
    assert_eq!(report.steps, 5);
    assert!(report.stopped_early && report.last_loss.is_finite());
    // Without a stop, every batch runs: 10 epochs of 3 batches.
    let all = run.fit(data().batches(4, 10, 2), |_| Control::Continue);
    assert_eq!(all.expect("fit").steps, 30);
}

#[test]
fn a_saved_run_loads_as_a_model_that_predicts_the_same() {
    let devices = DevicePolicy::only_cpu();
    let train = Job::Train {
        batch: 4,
        seq_len: 6,
        eval: None,
    };
    let mut run = small().open(train, &devices).expect("open");
    run.fit(data().batches(4, 2, 1), |_| Control::Continue)
        .expect("fit");
    let path = scratch("library_api").join("trained.safetensors");
    run.save(&path).expect("save");
    let all = data().all().expect("batch");
    let eval = Job::Eval {
        batch: 12,
        seq_len: 6,
    };
    let trained = run.model().expect("model");
    let want = trained.open(eval, &devices).expect("open").predict(&all.x);
    let loaded = Model::load(&path).expect("load");
    let got = loaded.open(eval, &devices).expect("open").predict(&all.x);
    assert_eq!(got.expect("predict"), want.expect("predict"));
    assert_eq!(loaded.description(), trained.description());
}

#[test]
fn a_job_too_large_for_every_device_is_out_of_memory() {
    let devices = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20);
    let job = Job::Eval {
        batch: 100,
        seq_len: 2000,
    };
    let model = Model::seed();
    let plan = model
        .plan(job, &devices)
        .expect("a plan, even one that fits nowhere");
    assert!(!plan.fits());
    match model.open(job, &devices) {
        Err(Error::OutOfMemory {
            device,
            requested,
            available,
            detail,
        }) => {
            assert!(requested > available, "{requested} <= {available}");
            // Fields, not a paragraph: the device is an id, the explanation beside it.
            assert_eq!(device, "cpu");
            assert!(
                detail.contains("smallest plan") && detail.contains("largest usable capacity"),
                "{detail}"
            );
        }
        other => panic!("expected out of memory, got {other:?}"),
    }
}

#[test]
fn bad_files_and_bad_input_are_told_apart() {
    let missing = scratch("library_api").join("missing.safetensors");
    match Model::load(&missing) {
        Err(Error::File { path, .. }) => assert!(path.ends_with("missing.safetensors")),
        other => panic!("expected a file error, got {other:?}"),
    }
    let toml = scratch("library_api").join("bad.toml");
    std::fs::write(
        &toml,
        "[recurrent]\ncell = \"lstm\"\nhidden = 0\nlayers = 1\n",
    )
    .expect("write");
    match Model::from_description_file(&toml, 1) {
        Err(e @ Error::File { .. }) => assert!(e.to_string().contains("line"), "{e}"),
        other => panic!("expected a file error naming the line, got {other:?}"),
    }
    assert!(matches!(
        DevicePolicy::auto().margin(1.5),
        Err(Error::BadInput(_))
    ));
    // Sequences may differ in length, but each is whole steps of the features.
    match Sequences::new(vec![vec![0.0; 4], vec![0.0; 5]], vec![0.0, 1.0], 2) {
        Err(Error::BadInput(m)) => assert!(m.message.contains("sequence 1"), "{m}"),
        other => panic!("expected bad input, got {other:?}"),
    }
    let job = Job::Eval {
        batch: 2,
        seq_len: 6,
    };
    let mut run = small().open(job, &DevicePolicy::only_cpu()).expect("open");
    let wrong = data().batch(&[0, 1, 2]).expect("batch");
    match run.evaluate(&wrong.x, &wrong.labels) {
        Err(Error::BadInput(m)) => {
            assert!(
                m.message.contains("of up to 2 sequences of up to 6 steps"),
                "{m}"
            )
        }
        other => panic!("expected bad input, got {other:?}"),
    }
}

#[test]
fn training_backpropagates_through_the_whole_sequence_unless_told_to_truncate() {
    // 60 steps, longer than any fixed default truncation would be.
    let data = hot_first_step(8, 60);
    let losses = |tbptt: Option<usize>| {
        let training = tensorfit::Training {
            tbptt,
            ..tensorfit::Training::default()
        };
        let job = Job::Train {
            batch: 4,
            seq_len: 60,
            eval: None,
        };
        let mut run = small()
            .with_training(training)
            .open(job, &DevicePolicy::only_cpu())
            .expect("open");
        let mut losses = Vec::new();
        run.fit(data.batches(4, 2, 3), |s| {
            losses.push(s.loss.to_bits());
            Control::Continue
        })
        .expect("fit");
        losses
    };
    let default = losses(tensorfit::Training::default().tbptt);
    assert_eq!(
        default,
        losses(Some(60)),
        "the default is the whole sequence"
    );
    // Truncated to the last 50 steps, the first step's gradient differs, so the second
    // step's loss does.
    assert_ne!(default[1..], losses(Some(50))[1..]);
}

#[test]
fn bad_input_names_the_argument_and_data_errors_keep_their_type() {
    match Sequences::new(vec![vec![0.0; 6], vec![0.0; 3]], vec![0.0, 1.0], 2) {
        Err(Error::BadInput(b)) => {
            assert_eq!(b.argument.as_deref(), Some("inputs"));
            assert_eq!(b.given.as_deref(), Some("3 values in sequence 1"));
            assert!(b.message.contains("sequence 1"), "{}", b.message);
        }
        other => panic!("expected bad input, got {other:?}"),
    }
    let e = Error::from(tensorfit::data::DataError::Settings("a batch of 0".into()));
    assert!(matches!(&e, Error::Data(_)), "{e:?}");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn a_run_takes_any_shape_within_its_job_and_gives_what_an_exact_plan_gives() {
    let devices = DevicePolicy::only_cpu();
    let bound = Job::Train {
        batch: 4,
        seq_len: 6,
        eval: Some((12, 6)),
    };
    let mut run = small().open(bound, &devices).expect("open");
    // 3 sequences of 4 steps (and an evaluation of 5 of 2 steps) on the 4 × 6 plan, against
    // runs planned for exactly those shapes, from the same weights.
    let short = hot_first_step(3, 4).all().expect("batch");
    let few = hot_first_step(5, 2).all().expect("batch");
    let exact = Job::Train {
        batch: 3,
        seq_len: 4,
        eval: None,
    };
    let mut exact_run = small().open(exact, &devices).expect("open");
    let step = run.train_step(&short.x, &short.labels).expect("step");
    let want = exact_run.train_step(&short.x, &short.labels).expect("step");
    assert_eq!(step.loss.to_bits(), want.loss.to_bits());
    let trained = run.model().expect("model");
    let mut exact_eval = trained
        .open(
            Job::Eval {
                batch: 5,
                seq_len: 2,
            },
            &devices,
        )
        .expect("open");
    let got = run.evaluate(&few.x, &few.labels).expect("evaluate");
    let want = exact_eval.evaluate(&few.x, &few.labels).expect("evaluate");
    assert_eq!(got.loss.to_bits(), want.loss.to_bits());
    assert_eq!(got.probs, want.probs);
}

#[test]
fn sequences_held_batch_first_predict_without_labels_as_the_time_major_batch_does() {
    let devices = DevicePolicy::only_cpu();
    let data = hot_first_step(3, 5);
    let all = data.all().expect("batch");
    let inputs: Vec<Vec<f32>> = (0..3)
        .map(|i| (0..5 * 152).map(|k| f32::from(k == i % 6)).collect())
        .collect();
    let job = Job::Eval {
        batch: 3,
        seq_len: 5,
    };
    let mut run = small().open(job, &devices).expect("open");
    let want = run.predict(&all.x).expect("predict");
    let got = run.predict_sequences(&inputs).expect("predict");
    assert_eq!(got.concat(), want.data, "[batch, classes] row by row");
    // A head on every step: each sequence's steps in turn, from [time, batch, classes].
    let lm =
        Model::new(tensorfit::ModelDescription::lstm_language_model(7, 8, 1), 3).expect("model");
    let mut run = lm.open(job, &devices).expect("open");
    let ids: Vec<Vec<f32>> = (0..3)
        .map(|i| (0..5).map(|t| ((i + t) % 7) as f32).collect())
        .collect();
    let mut x = vec![0.0; 15];
    for (i, seq) in ids.iter().enumerate() {
        for (t, &id) in seq.iter().enumerate() {
            x[t * 3 + i] = id;
        }
    }
    let x = tensorfit::HostTensor::new(tensorfit::core::Shape(vec![5, 3]), x).expect("x");
    let want = run.predict(&x).expect("predict");
    let got = run.predict_sequences(&ids).expect("predict");
    for (i, seq) in got.iter().enumerate() {
        for t in 0..5 {
            let at = (t * 3 + i) * 7;
            assert_eq!(
                seq[t * 7..(t + 1) * 7],
                want.data[at..at + 7],
                "sequence {i} step {t}"
            );
        }
    }
}
