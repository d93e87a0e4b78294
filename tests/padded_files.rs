//! Padded batches read from a file through the trainer: a batch of sequences of different
//! lengths (`examples/data/classify.safetensors`, lengths 4 to 9), padded to its longest
//! and run with its lengths, gives what its sequences give alone: the loss is their mean,
//! every gradient their mean, and one plain SGD step moves the weights by `lr` times that
//! mean, on a planned session whose measured peak is the plan's; an evaluation streamed in
//! chunks of any length (carried state, lengths cut per chunk, a sequence that ended in
//! an earlier chunk read from its carried state) gives each sequence its own
//! probabilities.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{assert_close, dense_head_model, request};
use tensorfit::core::{Backend, DeviceKind, HostTensor};
use tensorfit::cpu::CpuBackend;
use tensorfit::data::{open, Batch, BatchInputs, Batches, Opened, ReadSettings, Source, Values};
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{
    Job, ModelDescription, OptimConfig, Optimizer, ParamStore, SgdConfig, TrainOptions, Trainer,
};
use tensorfit::session::{decide, start};

const LR: f32 = 0.1;

fn source() -> Arc<dyn Source> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/classify.safetensors");
    match open(&path, &ReadSettings::default()).unwrap() {
        Opened::Sequences(s) => s,
        Opened::Corpus(_) => panic!("a tensor file is not a corpus"),
    }
}

/// The batch of sequences `ids`, as the reader pads it: (x [T, B, F], labels, lengths).
fn read(source: &Arc<dyn Source>, ids: &[usize]) -> (HostTensor, Vec<f32>, Vec<f32>) {
    let mut batches = Batches::in_order(source.clone(), vec![ids.to_vec()], 1).unwrap();
    let Batch {
        inputs,
        labels,
        lengths,
        ..
    } = batches.next().unwrap().unwrap();
    let BatchInputs::Dense(x) = inputs else {
        panic!("dense inputs expected")
    };
    let Values::Ids(labels) = labels else {
        panic!("class ids expected")
    };
    let labels = labels.into_iter().map(|l| l as f32).collect();
    (x, labels, lengths.into_iter().map(|l| l as f32).collect())
}

/// The model of these tests: an LSTM of 5 and a Dense head of 4 without BatchNorm.
fn model() -> ModelDescription {
    dense_head_model(5, 4)
}

fn sgd() -> OptimConfig {
    OptimConfig {
        optimizer: Optimizer::Sgd(SgdConfig {
            lr: LR,
            ..SgdConfig::default()
        }),
        ..OptimConfig::default()
    }
}

/// Four sequences of different lengths.
fn four_lengths(source: &Arc<dyn Source>) -> Vec<usize> {
    let lengths = source.lengths();
    let mut ids: Vec<usize> = Vec::new();
    for (i, l) in lengths.iter().enumerate() {
        if ids.iter().all(|&j| lengths[j] != *l) {
            ids.push(i);
        }
    }
    assert!(ids.len() >= 4, "the example file has lengths {lengths:?}");
    ids.truncate(4);
    ids
}

#[test]
fn a_padded_batch_from_a_file_trains_as_its_sequences_do_alone() {
    let source = source();
    let ids = four_lengths(&source);
    let (x, labels, lengths) = read(&source, &ids);
    let (steps, batch) = (x.shape.dims()[0], ids.len());
    assert!(lengths.iter().any(|&l| l < steps as f32), "{lengths:?}");
    let cfg = model();
    let init = ParamStore::init(&cfg, 5).unwrap();

    // The padded batch on a planned session (the padded programs, lengths input included,
    // planned on the CPU).
    let job = Job::Train {
        batch,
        seq_len: steps,
        eval: None,
    };
    let mut req = request(&cfg, job, steps, DeviceKind::Cpu, MemoryCaps::default());
    req.optim = sgd();
    req.padded = true;
    let decision = decide(&req).unwrap();
    let mut session = start(&req, &decision, &init).unwrap();
    let padded = session
        .with_recovery(|t| t.train_step_at(&x, &labels, Some(&lengths)))
        .unwrap();
    assert_eq!(
        session.measured_peak_bytes(),
        session.plan.peak_bytes(),
        "the padded step's memory: measured against planned"
    );
    let grads = session.trainer.gradients().unwrap();
    let after = session.trainer.parameters().unwrap();

    // Each sequence alone, unpadded, at its own length.
    let (f, n) = (3, batch as f64);
    let mut mean_loss = 0.0f64;
    let mut mean: Vec<(String, Vec<f64>)> = grads
        .iter()
        .map(|(name, g)| (name.to_string(), vec![0.0; g.data.len()]))
        .collect();
    for (r, &len) in lengths.iter().enumerate() {
        let t_r = len as usize;
        let rows: Vec<f32> = (0..t_r)
            .flat_map(|t| x.data[(t * batch + r) * f..(t * batch + r + 1) * f].to_vec())
            .collect();
        let alone = HostTensor::new([t_r, 1, f], rows).unwrap();
        let opts = TrainOptions {
            tbptt: t_r,
            chunk: t_r,
            optim: sgd(),
            ..TrainOptions::default()
        };
        let mut t = Trainer::new(Box::new(CpuBackend::new()), cfg.clone(), &init, opts).unwrap();
        let one = t.train_step(&alone, &labels[r..r + 1]).unwrap();
        mean_loss += one.loss as f64 / n;
        let g = t.gradients().unwrap();
        for (name, m) in &mut mean {
            let own = &g.get(name).unwrap().data;
            m.iter_mut().zip(own).for_each(|(m, &v)| *m += v as f64 / n);
        }
    }
    assert_close("loss", &[padded.loss], &[mean_loss as f32], 1e-6, 1e-5);
    for (name, m) in &mean {
        let want: Vec<f32> = m.iter().map(|&v| v as f32).collect();
        let got = &grads.get(name).unwrap().data;
        assert_close(&format!("gradient of {name}"), got, &want, 1e-6, 1e-4);
        let moved: Vec<f32> = (init.get(name).unwrap().data.iter())
            .zip(&want)
            .map(|(w, g)| w - LR * g)
            .collect();
        let got = &after.get(name).unwrap().data;
        assert_close(&format!("updated {name}"), got, &moved, 1e-6, 1e-4);
    }
}

#[test]
fn a_padded_batch_evaluated_in_chunks_gives_each_sequence_its_own_probabilities() {
    evaluated_in_chunks(|| Box::new(CpuBackend::new()));
}

#[test]
fn a_padded_batch_evaluated_in_chunks_on_wgpu_gives_each_sequence_its_own_probabilities() {
    if common::wgpu_present() {
        evaluated_in_chunks(|| Box::new(tensorfit_wgpu::WgpuBackend::new().unwrap()));
    }
}

/// The chunked evaluation of a padded batch on `backend`, against each sequence alone
/// on the CPU.
fn evaluated_in_chunks(backend: fn() -> Box<dyn Backend>) {
    let source = source();
    let ids = four_lengths(&source);
    let (x, labels, lengths) = read(&source, &ids);
    let (steps, batch) = (x.shape.dims()[0], ids.len());
    let cfg = model();
    let init = ParamStore::init(&cfg, 9).unwrap();
    let trainer = |padded: bool, chunk: usize| {
        let opts = TrainOptions {
            chunk,
            padded,
            ..TrainOptions::default()
        };
        let be = match padded {
            true => backend(),
            false => Box::new(CpuBackend::new()),
        };
        Trainer::new(be, cfg.clone(), &init, opts).unwrap()
    };
    // Every chunk length gives each sequence its own probabilities: a sequence that ends
    // in an earlier chunk carries its state through the later ones, and the head reads it.
    for chunk in 1..=steps {
        let probs = trainer(true, chunk)
            .evaluate_at(&x, &labels, Some(&lengths))
            .unwrap()
            .probs;
        for (r, &len) in lengths.iter().enumerate() {
            let t_r = len as usize;
            let rows: Vec<f32> = (0..t_r)
                .flat_map(|t| x.data[(t * batch + r) * 3..(t * batch + r + 1) * 3].to_vec())
                .collect();
            let alone = HostTensor::new([t_r, 1, 3], rows).unwrap();
            let want = trainer(false, t_r).predict(&alone).unwrap();
            let got = &probs.data[r * 3..(r + 1) * 3];
            assert_close(
                &format!("row {r} (length {len}) in chunks of {chunk}"),
                got,
                &want.data,
                1e-6,
                1e-5,
            );
        }
    }

    // An unpadded trainer refuses lengths shorter than the batch.
    let e = trainer(false, steps)
        .evaluate_at(&x, &labels, Some(&lengths))
        .unwrap_err()
        .to_string();
    assert!(e.contains("planned without lengths"), "{e}");
}
