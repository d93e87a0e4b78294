//! The layers beyond one recurrent stack, through the front door alone, off the
//! benchmark's shapes: a tagger with a residual block and a LayerNorm on every step, and
//! a bidirectional GRU tagger, and classifiers reading the mean or the maximum of each
//! sequence's steps, built with the facade's `ModelBuilder`, trained by
//! `Runner::train` on sequences of 1 to 37 steps (padded batches; a BatchNorm there is
//! refused), each sequence predicted in a padded batch as it is alone (the reverse
//! direction starts at each sequence's own end), and the unidirectional one streamed a
//! step at a time as it is whole (the bidirectional one is refused a stream and a
//! truncated BPTT shorter than its sequences, naming its layer); a TCN tagger (causal and
//! "same" convolutions) and a Transformer classifier (positions, an encoder masking each
//! sequence's padded keys) likewise, each refused a stream naming its first such layer;
//! learned positions refuse sequences longer than their table, naming `max_len`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit::{
    Activation, ConvPadding, DevicePolicy, FitOptions, Job, Model, ModelDescription,
    PositionEncoding, Sequences, Stopped, Training,
};

const FEATURES: usize = 2;
const HIDDEN: usize = 24;

/// 30 sequences of 1 to 37 steps.
fn inputs() -> Vec<Vec<f32>> {
    (0..30)
        .map(|i| {
            let steps = 1 + (i * 11) % 37;
            (0..steps * FEATURES)
                .map(|k| ((i * 29 + k * 13) % 17) as f32 / 8.5 - 1.0)
                .collect()
        })
        .collect()
}

/// [`inputs`], each step labelled by the sign of its first value.
fn data() -> Sequences {
    let inputs = inputs();
    let labels = inputs
        .iter()
        .map(|x| x.chunks(FEATURES).map(|s| f32::from(s[0] > 0.0)).collect())
        .collect();
    Sequences::with_step_labels(inputs, labels, FEATURES).unwrap()
}

/// [`inputs`], each sequence labelled by the sign of the sum of its first values.
fn sequence_data() -> Sequences {
    let inputs = inputs();
    let labels = inputs
        .iter()
        .map(|x| f32::from(x.chunks(FEATURES).map(|s| s[0]).sum::<f32>() > 0.0))
        .collect();
    Sequences::new(inputs, labels, FEATURES).unwrap()
}

fn tagger(norm_rows_alone: bool) -> ModelDescription {
    let b = ModelDescription::builder()
        .features(FEATURES)
        .lstm(HIDDEN, 1)
        .every_step()
        .dense(HIDDEN, Activation::Relu)
        .residual();
    let b = if norm_rows_alone {
        b.layer_norm()
    } else {
        b.batch_norm()
    };
    b.classify(2).build().unwrap()
}

/// A two-layer bidirectional GRU tagger (both directions' outputs, 2 · HIDDEN, per step).
fn bidirectional_tagger() -> ModelDescription {
    ModelDescription::builder()
        .features(FEATURES)
        .gru(HIDDEN / 2, 2)
        .bidirectional()
        .every_step()
        .dense(HIDDEN, Activation::Tanh)
        .classify(2)
        .build()
        .unwrap()
}

fn cpu() -> DevicePolicy {
    DevicePolicy::only_cpu()
}

#[test]
fn a_residual_layernorm_tagger_trains_on_ragged_data_and_predicts_each_sequence_as_alone() {
    trains_on_ragged_data_and_predicts_each_sequence_as_alone(tagger(true));
}

#[test]
fn a_bidirectional_tagger_trains_on_ragged_data_and_predicts_each_sequence_as_alone() {
    trains_on_ragged_data_and_predicts_each_sequence_as_alone(bidirectional_tagger());
}

#[test]
fn classifiers_pooling_each_sequences_steps_train_on_ragged_data_and_predict_as_alone() {
    let pooled = |max: bool| {
        let b = ModelDescription::builder()
            .features(FEATURES)
            .lstm(HIDDEN, 1);
        let b = if max { b.max_pool() } else { b.mean_pool() };
        b.dense(HIDDEN, Activation::Relu)
            .classify(2)
            .build()
            .unwrap()
    };
    for max in [false, true] {
        trains_and_predicts_as_alone(pooled(max), sequence_data());
    }
    // A pool needs every step of a sequence at once: no stream.
    let e = Model::new(pooled(false), 3).unwrap().stream(1, &cpu());
    let e = e.map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("layer `mean_pool` (mean_pool) reads each sequence whole"),
        "{e}"
    );
}

fn trains_on_ragged_data_and_predicts_each_sequence_as_alone(description: ModelDescription) {
    trains_and_predicts_as_alone(description, data());
}

/// Trains `description` on `data` (ragged) for three epochs in padded batches of 8, then
/// predicts each sequence in padded batches of 8 and alone: the same numbers.
fn trains_and_predicts_as_alone(description: ModelDescription, data: Sequences) {
    assert!(data.is_ragged());
    let model = Model::new(description, 7).unwrap();
    let mut run = model.open(data.shapes(8), &cpu()).unwrap();
    let options = FitOptions {
        epochs: 3,
        batch: 8,
        ..FitOptions::default()
    };
    let report = run.train(&data, None, &options, |_| tensorfit::Control::Continue);
    let report = report.unwrap();
    assert_eq!(report.stopped, Stopped::Finished);
    assert!(report.last_loss.is_finite(), "{}", report.last_loss);

    let trained = run.model().unwrap();
    let inputs: Vec<Vec<f32>> = (0..data.len())
        .map(|i| data.batch(&[i]).unwrap().x.data)
        .collect();
    // In padded batches of the planned 8.
    let together: Vec<Vec<f32>> = inputs
        .chunks(8)
        .flat_map(|batch| run.predict_sequences(batch).unwrap())
        .collect();
    for (i, seq) in inputs.iter().enumerate() {
        let steps = seq.len() / FEATURES;
        let job = Job::Eval {
            batch: 1,
            seq_len: steps,
        };
        let mut alone = trained.open(job, &cpu()).unwrap();
        let alone = alone.predict_sequences(std::slice::from_ref(seq)).unwrap();
        for (a, b) in together[i].iter().zip(&alone[0]) {
            assert!((a - b).abs() < 1e-5, "sequence {i}: {a} padded, {b} alone");
        }
    }
}

#[test]
fn a_tcn_tagger_and_a_transformer_classifier_train_on_ragged_data_and_predict_as_alone() {
    let tcn = ModelDescription::builder()
        .features(FEATURES)
        .conv1d(HIDDEN, 3, ConvPadding::Causal, Activation::Relu)
        .conv1d(HIDDEN, 3, ConvPadding::Same, Activation::Relu)
        .dilation(2)
        .residual()
        .every_step()
        .classify(2)
        .build()
        .unwrap();
    trains_on_ragged_data_and_predicts_each_sequence_as_alone(tcn.clone());
    let transformer = ModelDescription::builder()
        .features(FEATURES)
        .positions(PositionEncoding::Sinusoidal)
        .transformer_encoder(2, 2)
        .feedforward(HIDDEN)
        .mean_pool()
        .classify(2)
        .build()
        .unwrap();
    trains_and_predicts_as_alone(transformer.clone(), sequence_data());
    for (description, layer) in [
        (tcn, "layer `body.0` (conv1d)"),
        (transformer, "layer `body.0` (positions)"),
    ] {
        let e = Model::new(description, 3).unwrap().stream(1, &cpu());
        let e = e.map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{layer} reads each sequence whole")),
            "{e}"
        );
    }
}

#[test]
fn a_stream_of_the_tagger_gives_each_step_what_the_whole_sequence_gives() {
    let model = Model::new(tagger(true), 3).unwrap();
    let steps = 40;
    let x: Vec<f32> = (0..steps * FEATURES)
        .map(|k| (k % 9) as f32 / 4.5 - 1.0)
        .collect();
    let mut stream = model.stream(1, &cpu()).unwrap();
    let streamed: Vec<f32> = x
        .chunks(FEATURES)
        .flat_map(|step| stream.step(step).unwrap())
        .collect();
    let job = Job::Eval {
        batch: 1,
        seq_len: steps,
    };
    let mut run = model.open(job, &cpu()).unwrap();
    let whole = run
        .predict(&tensorfit::HostTensor::new([steps, 1, FEATURES], x).unwrap())
        .unwrap();
    assert_eq!(streamed.len(), whole.data.len());
    for (a, b) in streamed.iter().zip(&whole.data) {
        assert!((a - b).abs() < 1e-5, "{a} streamed, {b} whole");
    }
}

#[test]
fn a_bidirectional_stack_is_refused_a_stream_and_a_shorter_truncated_bptt_naming_it() {
    let model = Model::new(bidirectional_tagger(), 3).unwrap();
    let e = model.stream(1, &cpu()).map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("layer `gru` (gru) reads each sequence whole") && e.contains("stream"),
        "{e}"
    );
    let truncated = model.with_training(Training {
        tbptt: Some(5),
        ..Training::default()
    });
    let job = Job::Train {
        batch: 4,
        seq_len: 12,
        eval: None,
    };
    let e = truncated
        .plan(job, &cpu())
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layer `gru` (gru) reads each sequence whole"),
        "{e}"
    );
}

#[test]
fn learned_positions_refuse_sequences_longer_than_their_table_naming_max_len() {
    let description = ModelDescription::builder()
        .features(FEATURES)
        .positions(PositionEncoding::Learned { max_len: 16 })
        .transformer_encoder(1, 2)
        .feedforward(HIDDEN)
        .mean_pool()
        .classify(2)
        .build()
        .unwrap();
    // Sequences of up to 37 steps, a table of 16 rows: refused before any step runs.
    let data = sequence_data();
    let e = Model::new(description, 3)
        .unwrap()
        .open(data.shapes(8), &cpu());
    let e = e.map(|_| ()).unwrap_err().to_string();
    assert!(
        e.contains("layer `body.0` (positions) learned 16 positions (max_len = 16)")
            && e.contains("sequences of 37 steps"),
        "{e}"
    );
}

#[test]
fn a_batchnorm_in_its_place_is_refused_on_ragged_data_naming_it() {
    let data = data();
    let model = Model::new(tagger(false), 3).unwrap();
    let e = match model.open(data.shapes(8), &cpu()) {
        Ok(mut run) => run
            .train(&data, None, &FitOptions::default(), |_| {
                tensorfit::Control::Continue
            })
            .map(|_| ())
            .unwrap_err(),
        Err(e) => e,
    };
    let e = e.to_string();
    assert!(e.contains("(batchnorm) mixes the rows of its batch"), "{e}");
}

#[test]
fn the_layer_types_cross_threads() {
    fn send<T: Send>() {}
    send::<ModelDescription>();
    send::<tensorfit::ModelBuilder>();
    send::<tensorfit::nn::Network>();
}
