//! Models with a GRU stack or token input run end to end: their tensors are PyTorch's,
//! their batches are checked on the host, their carried state is the cell's, and a
//! checkpoint of one resumes the same steps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    Cell, Checkpoint, InputSpec, ModelDescription, ParamStore, TemporalOrder, Trainer,
};

use common::{assert_close, task_model, train_options};

/// The four wirings: a GRU on features, an LSTM reading ids directly, a GRU on embedded
/// ids, a GRU reading ids directly.
fn models() -> Vec<ModelDescription> {
    let vocab = TemporalOrder::FEATURES;
    let mut gru = task_model(8, 2, 6);
    gru.recurrent_mut().unwrap().cell = Cell::Gru;
    let mut lstm_ids = task_model(8, 2, 6);
    lstm_ids.input = InputSpec::Tokens {
        vocab,
        embedding: None,
    };
    let mut gru_embedded = gru.clone();
    gru_embedded.input = InputSpec::Tokens {
        vocab,
        embedding: Some(5),
    };
    let mut gru_ids = gru.clone();
    gru_ids.input = InputSpec::Tokens {
        vocab,
        embedding: None,
    };
    vec![gru, lstm_ids, gru_embedded, gru_ids]
}

fn trainer(cfg: &ModelDescription, params: &ParamStore) -> Trainer {
    let backend = Box::new(CpuBackend::new());
    Trainer::new(backend, cfg.clone(), params, train_options(6, 1e-2)).unwrap()
}

#[test]
fn the_tensors_are_named_as_pytorchs_modules_name_them() {
    let names = |cfg: &ModelDescription| -> Vec<String> {
        cfg.param_specs()
            .unwrap()
            .into_iter()
            .map(|s| format!("{}{}", s.name, s.shape))
            .take(5)
            .collect()
    };
    let [gru, lstm_ids, gru_embedded, gru_ids] = <[_; 4]>::try_from(models()).unwrap();
    assert_eq!(
        names(&gru)[..4],
        [
            "gru.weight_ih_l0[24, 152]",
            "gru.weight_hh_l0[24, 8]",
            "gru.bias_ih_l0[24]",
            "gru.bias_hh_l0[24]"
        ]
    );
    assert_eq!(names(&lstm_ids)[0], "lstm.weight_ih_l0[32, 152]");
    assert_eq!(
        names(&gru_embedded)[..2],
        ["embedding.weight[152, 5]", "gru.weight_ih_l0[24, 5]"]
    );
    assert_eq!(names(&gru_ids)[0], "gru.weight_ih_l0[24, 152]");
}

#[test]
fn a_checkpoint_of_each_wiring_resumes_the_same_steps() {
    for cfg in models() {
        let params = ParamStore::init(&cfg, 7).unwrap();
        let mut data = TemporalOrder::new(3);
        let mut a = trainer(&cfg, &params);
        for _ in 0..2 {
            let b = data.batch_for(&cfg, 4, 10).unwrap();
            a.train_step(&b.x, &b.labels).unwrap();
        }
        let ck = Checkpoint::from_bytes(&a.checkpoint().unwrap().to_bytes().unwrap()).unwrap();
        assert_eq!(ck.config, cfg);
        let mut b = trainer(&ck.config, &ck.params);
        b.restore_optimizer(&ck.optimizer, ck.step).unwrap();
        let next = data.batch_for(&cfg, 4, 10).unwrap();
        let (ra, rb) = (
            a.train_step(&next.x, &next.labels).unwrap(),
            b.train_step(&next.x, &next.labels).unwrap(),
        );
        assert_eq!((ra.step, rb.step), (3, 3));
        assert_close(&format!("{cfg}: loss"), &[rb.loss], &[ra.loss], 1e-6, 1e-5);
        let (pa, pb) = (a.parameters().unwrap(), b.parameters().unwrap());
        for (name, t) in pa.iter() {
            assert_close(
                &format!("{cfg}: {name}"),
                &pb.get(name).unwrap().data,
                &t.data,
                1e-6,
                1e-5,
            );
        }
    }
}

#[test]
fn a_token_id_outside_the_vocabulary_is_refused_naming_its_place() {
    for cfg in &models()[1..] {
        token_outside_the_vocabulary_is_refused(cfg);
    }
}

fn token_outside_the_vocabulary_is_refused(cfg: &ModelDescription) {
    let mut t = trainer(cfg, &ParamStore::init(cfg, 1).unwrap());
    let mut b = TemporalOrder::new(1).batch_for(cfg, 3, 8).unwrap();
    b.x.data[2 * 3 + 1] = TemporalOrder::FEATURES as f32;
    let e = t.train_step(&b.x, &b.labels).unwrap_err().to_string();
    assert!(
        e.contains("step 2, batch row 1") && e.contains("152"),
        "{e}"
    );
    let one_hot = TemporalOrder::new(1).batch(3, 8).unwrap();
    let e = t
        .evaluate(&one_hot.x, &one_hot.labels)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[time, batch] token ids"), "{e}");
}

#[test]
fn a_gru_carries_h_only_and_an_lstm_h_and_c() {
    for (cfg, c_layers) in models().into_iter().zip([0, 2, 0, 0]) {
        let mut t = trainer(&cfg, &ParamStore::init(&cfg, 1).unwrap());
        let b = TemporalOrder::new(1).batch_for(&cfg, 3, 12).unwrap();
        t.train_step(&b.x, &b.labels).unwrap();
        let (h, c) = t.carried_state(3).unwrap();
        assert_eq!(h.shape.dims(), [2, 3, 8], "{cfg}");
        assert_eq!(c.shape.dims(), [c_layers, 3, 8], "{cfg}");
        // 12 steps with a BPTT window of 6: the first 6 advanced the state.
        assert!(h.data.iter().any(|&v| v != 0.0), "{cfg}");
    }
}

#[test]
fn the_gru_classifier_example_loads_and_fits_a_fixed_batch() {
    // `tensorfit train --model` is another helper's; the file is trained here through
    // the library on one fixed batch of its shape, which it must come to fit.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/models/gru_classifier.toml");
    let cfg = ModelDescription::load(&path).unwrap();
    assert_eq!(cfg.recurrent().unwrap().cell, Cell::Gru);
    let (batch, steps, features) = (16, 10, cfg.input_features());
    let classes = cfg.loss.outputs();
    let mut rng = tensorfit::nn::Rng::new(5);
    let data = (0..steps * batch * features)
        .map(|_| rng.normal())
        .collect();
    let x = tensorfit::core::HostTensor::new([steps, batch, features], data).unwrap();
    let labels: Vec<f32> = (0..batch).map(|b| (b % classes) as f32).collect();
    let mut t = trainer(&cfg, &ParamStore::init(&cfg, 2).unwrap());
    let first = t.train_step(&x, &labels).unwrap().loss;
    for _ in 0..40 {
        t.train_step(&x, &labels).unwrap();
    }
    let e = t.evaluate(&x, &labels).unwrap();
    println!(
        "{cfg}: first loss {first}, then evaluated {} (accuracy {:?})",
        e.loss, e.accuracy
    );
    assert!(
        e.loss < first / 4.0 && e.accuracy == Some(1.0),
        "{first} → {e:?}"
    );
}
