//! Sequences of different lengths at the front door, and the library's training loop
//! (`Runner::train`): a padded batch gives each sequence what it gives alone, a run never
//! takes padded data without the lengths, early stopping, the best model kept, and a
//! resumed run that ends with the weights of one never stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use tensorfit::{
    Control, DevicePolicy, Error, Event, FitOptions, Job, Model, ModelDescription, OptimConfig,
    Sequences, Stopped, Training,
};

const FEATURES: usize = 3;

/// 40 sequences of 2 to 11 steps; the class is the sign of the first value.
fn data() -> Sequences {
    let inputs: Vec<Vec<f32>> = (0..40)
        .map(|i| {
            let steps = 2 + (i * 7) % 10;
            (0..steps * FEATURES)
                .map(|k| match k {
                    0 if i % 2 == 0 => 1.0,
                    0 => -1.0,
                    _ => ((i * 31 + k * 17) % 13) as f32 / 13.0 - 0.5,
                })
                .collect()
        })
        .collect();
    let labels = (0..40).map(|i| (i % 2) as f32).collect();
    Sequences::new(inputs, labels, FEATURES).unwrap()
}

fn model(lr: f32) -> Model {
    let training = Training {
        optim: OptimConfig::adam(lr),
        ..Training::default()
    };
    let description = ModelDescription::builder()
        .features(FEATURES)
        .gru(8, 2)
        .classify(2)
        .build()
        .unwrap();
    Model::new(description, 3).unwrap().with_training(training)
}

fn cpu() -> DevicePolicy {
    DevicePolicy::only_cpu()
}

/// A file in this process's scratch directory (emptied on first use, swept once the
/// process has ended: a resumed run must never find another run's checkpoint).
fn temp(name: &str) -> PathBuf {
    common::scratch("api_ragged").join(name)
}

#[test]
fn a_padded_batch_gives_each_sequence_what_it_gives_alone() {
    let data = data();
    assert!(data.is_ragged());
    let m = model(0.01);
    let inputs: Vec<Vec<f32>> = (0..data.len())
        .map(|i| {
            let b = data.batch(&[i]).unwrap();
            b.x.data
        })
        .collect();
    let mut padded = m.open(data.shapes(40), &cpu()).unwrap();
    let together = padded.predict_sequences(&inputs).unwrap();
    for (i, seq) in inputs.iter().enumerate() {
        let steps = seq.len() / FEATURES;
        let job = Job::Eval {
            batch: 1,
            seq_len: steps,
        };
        let alone = m
            .open(job, &cpu())
            .unwrap()
            .predict_sequences(std::slice::from_ref(seq))
            .unwrap();
        for (a, b) in together[i].iter().zip(&alone[0]) {
            assert!((a - b).abs() < 1e-5, "sequence {i}: {a} padded, {b} alone");
        }
    }
}

#[test]
fn a_padded_run_takes_no_tensor_without_lengths_and_an_unpadded_one_no_ragged_batch() {
    let data = data();
    let m = model(0.01);
    let mut padded = m.open(data.shapes(8), &cpu()).unwrap();
    assert!(padded.padded());
    let b = data.batch(&[0, 1, 2]).unwrap();
    for (r, method) in [
        (
            padded.evaluate(&b.x, &b.labels).map(|_| ()),
            "evaluate_batch",
        ),
        (
            padded.train_step(&b.x, &b.labels).map(|_| ()),
            "train_batch",
        ),
        (padded.predict(&b.x).map(|_| ()), "predict_sequences"),
    ] {
        match r {
            Err(Error::BadInput(e)) => assert!(e.message.contains(method), "{e}"),
            other => panic!("{other:?}"),
        }
    }
    let job = Job::Train {
        batch: 8,
        seq_len: data.steps(),
        eval: None,
    };
    let mut unpadded = m.open(job, &cpu()).unwrap();
    assert!(!unpadded.padded());
    match unpadded.train_batch(&b) {
        Err(Error::BadInput(e)) => assert!(e.message.contains("padded"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lengths_that_do_not_fit_the_batch_name_the_sequence() {
    let data = data();
    let mut run = model(0.01).open(data.shapes(8), &cpu()).unwrap();
    let mut b = data.batch(&[0, 1]).unwrap();
    let steps = b.x.shape.dims()[0];
    for (lengths, says) in [
        (vec![1], "1 lengths for a batch of 2"),
        (vec![1, 0], "sequence 1 of the batch has length 0"),
        (vec![steps + 1, 1], "sequence 0 of the batch has length"),
    ] {
        b.lengths = Some(lengths);
        match run.train_batch(&b) {
            Err(Error::BadInput(e)) => assert!(e.message.contains(says), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn early_stopping_ends_after_patience_validations_without_a_lower_loss() {
    let (train, val) = data().split(0.25, 1).unwrap();
    // Nothing learns at a learning rate of 1e-30 (no weight moves in f32): every
    // validation after the first is no better.
    let m = model(1e-30);
    let mut run = m.open(train.shapes(8).holding(&val, 8), &cpu()).unwrap();
    let options = FitOptions {
        epochs: 10,
        batch: 8,
        patience: Some(2),
        ..FitOptions::default()
    };
    let report = run
        .train(&train, Some(&val), &options, |_| Control::Continue)
        .unwrap();
    assert_eq!(report.stopped, Stopped::EarlyStopping);
    assert_eq!((report.epochs, report.history.len()), (3, 3));
    assert!(report.history[0].best && !report.history[1].best);
    assert_eq!(report.steps, 3 * 4, "30 sequences: 4 batches an epoch");
    // Early stopping needs something to watch.
    match run.train(&train, None, &options, |_| Control::Continue) {
        Err(Error::BadInput(e)) => assert!(e.message.contains("validation"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_best_model_is_written_and_restored_and_the_callback_can_stop() {
    let (train, val) = data().split(0.25, 1).unwrap();
    let m = model(0.05);
    let mut run = m.open(train.shapes(8).holding(&val, 8), &cpu()).unwrap();
    let best = temp("best.safetensors");
    let options = FitOptions {
        epochs: 6,
        batch: 8,
        best_checkpoint: Some(best.clone()),
        restore_best: true,
        ..FitOptions::default()
    };
    let mut seen = 0;
    let report = run
        .train(&train, Some(&val), &options, |e| {
            if let Event::Validated(_) = e {
                seen += 1;
            }
            match e {
                Event::EpochEnd { epoch: 5, .. } => Control::Stop,
                _ => Control::Continue,
            }
        })
        .unwrap();
    assert_eq!(
        (report.stopped, report.epochs, seen),
        (Stopped::Callback, 5, 5)
    );
    let (loss, _) = report.best.unwrap();
    let kept = Model::load(&best).unwrap();
    assert_eq!(
        run.model().unwrap().parameters(),
        kept.parameters(),
        "the run ends holding the best model, the one written"
    );
    let mut check = kept.open(val.shapes(8), &cpu()).unwrap();
    assert_eq!(check.evaluate_sequences(&val).unwrap().loss, loss);
}

#[test]
fn a_resumed_run_ends_with_the_weights_of_one_never_stopped() {
    let (train, val) = data().split(0.25, 1).unwrap();
    let m = model(0.02);
    let shapes = train.shapes(8).holding(&val, 8);
    let options = |checkpoint: PathBuf| FitOptions {
        epochs: 3,
        batch: 8,
        validate_every: Some(3),
        checkpoint: Some(checkpoint),
        resume: true,
        ..FitOptions::default()
    };
    let whole = options(temp("whole.safetensors"));
    let mut run = m.open(shapes, &cpu()).unwrap();
    let never_stopped = run
        .train(&train, Some(&val), &whole, |_| Control::Continue)
        .unwrap();

    // Stopped after step 6 (mid-epoch 2), then resumed by a new runner.
    let parts = options(temp("parts.safetensors"));
    let mut first = m.open(shapes, &cpu()).unwrap();
    let stop_at_6 = |e: &Event| match e {
        Event::Step { report, .. } if report.step == 6 => Control::Stop,
        _ => Control::Continue,
    };
    assert_eq!(
        first
            .train(&train, Some(&val), &parts, stop_at_6)
            .unwrap()
            .steps,
        6
    );
    let mut second = m.open(shapes, &cpu()).unwrap();
    let resumed = second
        .train(&train, Some(&val), &parts, |_| Control::Continue)
        .unwrap();

    assert_eq!((resumed.steps, resumed.epochs), (never_stopped.steps, 3));
    assert_eq!(resumed.best, never_stopped.best);
    assert_eq!(
        second.model().unwrap().parameters(),
        run.model().unwrap().parameters()
    );
    // Other settings would not continue that run: refused, naming the file.
    let other = FitOptions {
        seed: 9,
        ..options(temp("parts.safetensors"))
    };
    match m
        .open(shapes, &cpu())
        .unwrap()
        .train(&train, None, &other, |_| Control::Continue)
    {
        Err(Error::File { path, message }) => {
            assert!(
                path.ends_with("parts.safetensors") && message.contains("seed 9"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_validation_set_outside_the_bound_replans_once_and_says_so() {
    let train = data();
    let long = vec![vec![0.5; 20 * FEATURES], vec![0.1; 3 * FEATURES]];
    let val = Sequences::new(long, vec![0.0, 1.0], FEATURES).unwrap();
    let mut run = model(0.01).open(train.shapes(8), &cpu()).unwrap();
    let options = FitOptions {
        epochs: 2,
        batch: 8,
        ..FitOptions::default()
    };
    let mut told = Vec::new();
    run.train(&train, Some(&val), &options, |e| {
        if let Event::Replanned { message, .. } = e {
            told.push(message.to_string());
        }
        Control::Continue
    })
    .unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("20 steps"), "{}", told[0]);
    assert_eq!(run.replans(), told);
}
