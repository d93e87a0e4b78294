//! A long text's state carried from one batch into the next (`Trainer::train_step_carrying`):
//! k batches of windows of L steps, row b of each continuing row b of the one before,
//! train exactly as one sequence of k·L steps under DL4J-style windowed truncated BPTT
//! (`TbpttMode::Windows`: an update per window, the state detached between windows, which
//! `windowed_tbptt.rs` pins to PyTorch's loop). Evaluation carries the same way: k batches
//! give the whole sequence's outputs. For an LSTM and a GRU language model, on the CPU and
//! on wgpu (skipped with a printed reason without an adapter, failing instead under
//! `TENSORFIT_REQUIRE=wgpu`).

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{train_options, wgpu_present};
use tensorfit::core::{DeviceKind, HostTensor, Rng};
use tensorfit::devices::{open, MemoryCaps};
use tensorfit::nn::{
    BodyLayer, CarriedState, Cell, DropoutRate, HeadOn, HeadSpec, InputSpec, LossSpec,
    ModelDescription, ParamStore, RecurrentSpec, TbpttMode, TrainOptions, Trainer,
};

const VOCAB: usize = 7;
const BATCH: usize = 3;
const WINDOW: usize = 5;
const WINDOWS: usize = 4;

fn language_model(cell: Cell) -> ModelDescription {
    ModelDescription {
        input: InputSpec::Tokens {
            vocab: VOCAB,
            // A GRU takes tokens through an embedding (one-hot ids are the LSTM's).
            embedding: (cell == Cell::Gru).then_some(4),
        },
        body: vec![BodyLayer::Recurrent(RecurrentSpec {
            cell,
            hidden: 6,
            layers: 2,
            dropout: DropoutRate::NONE,
            bidirectional: false,
        })],
        head: HeadSpec {
            on: HeadOn::EveryStep,
            layers: Vec::new(),
        },
        loss: LossSpec::SoftmaxCrossEntropy { classes: VOCAB },
    }
}

/// `BATCH` random texts of `WINDOWS · WINDOW + 1` characters: inputs `[T, B]` and the next
/// characters `[T, B]`, time-major.
fn texts() -> (HostTensor, Vec<f32>) {
    let steps = WINDOWS * WINDOW;
    let mut rng = Rng::new(17);
    let chars: Vec<Vec<f32>> = (0..BATCH)
        .map(|_| {
            (0..=steps)
                .map(|_| rng.int_inclusive(0, VOCAB - 1) as f32)
                .collect()
        })
        .collect();
    let at = |t: usize| (0..BATCH).map(move |b| (b, t));
    let x = (0..steps).flat_map(at).map(|(b, t)| chars[b][t]).collect();
    let labels = (0..steps)
        .flat_map(at)
        .map(|(b, t)| chars[b][t + 1])
        .collect();
    (HostTensor::new([steps, BATCH], x).unwrap(), labels)
}

/// Window `k` of `x` `[T, B]` (and of its labels).
fn window(x: &HostTensor, labels: &[f32], k: usize) -> (HostTensor, Vec<f32>) {
    let steps = k * WINDOW * BATCH..(k + 1) * WINDOW * BATCH;
    let w = HostTensor::new([WINDOW, BATCH], x.data[steps.clone()].to_vec()).unwrap();
    (w, labels[steps].to_vec())
}

fn trainer(cfg: &ModelDescription, opts: TrainOptions) -> Trainer {
    trainer_on(DeviceKind::Cpu, cfg, opts)
}

fn trainer_on(device: DeviceKind, cfg: &ModelDescription, opts: TrainOptions) -> Trainer {
    let init = ParamStore::init(cfg, 5).unwrap();
    let backend = open(device, &MemoryCaps::default()).unwrap();
    Trainer::new(backend, cfg.clone(), &init, opts).unwrap()
}

fn carrying_options() -> TrainOptions {
    TrainOptions {
        carry_across: true,
        ..train_options(WINDOW, 0.05)
    }
}

fn params(t: &mut Trainer) -> Vec<(String, Vec<f32>)> {
    let p = t.parameters().unwrap();
    p.iter()
        .map(|(n, v)| (n.to_string(), v.data.clone()))
        .collect()
}

/// Trains the windows of `texts()` one batch each, from the state the batch before left
/// (or from zeros with `reset`), validating between batches on `texts()`'s first window
/// with a state of its own; returns the trainer and each batch's loss.
fn train_in_batches(
    device: DeviceKind,
    cfg: &ModelDescription,
    reset: bool,
) -> (Trainer, Vec<f32>, CarriedState) {
    let (x, labels) = texts();
    let mut t = trainer_on(device, cfg, carrying_options());
    let mut state = CarriedState::new();
    let mut losses = Vec::new();
    for k in 0..WINDOWS {
        if reset {
            state.reset();
        }
        let (xk, lk) = window(&x, &labels, k);
        let report = t.train_step_carrying(&xk, &lk, None, &mut state).unwrap();
        losses.push(report.loss);
        // A validation pass between batches carries its own state and leaves training's.
        let (v, vl) = window(&x, &labels, 0);
        let mut val_state = CarriedState::new();
        t.evaluate_carrying(&v, &vl, None, &mut val_state).unwrap();
        assert!(
            !val_state.is_zero(),
            "validation keeps the state it ended in"
        );
    }
    (t, losses, state)
}

fn carried_batches_train_as_windowed_truncated_bptt(cell: Cell, device: DeviceKind) {
    let cfg = language_model(cell);
    let (x, labels) = texts();
    // Its last window leaves its final state too, to compare with the carried one.
    let windowed = TrainOptions {
        tbptt_mode: TbpttMode::Windows,
        ..carrying_options()
    };
    let mut reference = trainer_on(device, &cfg, windowed);
    let report = reference.train_step(&x, &labels).unwrap();
    assert_eq!(report.step, WINDOWS as u64, "an update per window");

    let (mut carried, losses, state) = train_in_batches(device, &cfg, false);
    assert_eq!(carried.step(), WINDOWS as u64);
    let mean = losses.iter().map(|&l| l as f64).sum::<f64>() / WINDOWS as f64;
    assert!(
        (mean as f32 - report.loss).abs() <= 1e-6,
        "{cell:?}: mean loss over the batches {mean} vs the windowed step's {}",
        report.loss
    );
    assert_eq!(
        params(&mut carried),
        params(&mut reference),
        "{cell:?}: parameters after {WINDOWS} carried batches equal windowed truncated BPTT's, bit for bit"
    );
    let (h, c) = state.tensors(&carried).unwrap().unwrap();
    let (want_h, want_c) = reference.carried_state(BATCH).unwrap();
    assert_eq!(h.shape.dims(), &[2, BATCH, 6]);
    assert_eq!(
        (h, c),
        (want_h, want_c),
        "{cell:?}: the state the last batch left"
    );

    // The same batches, each from zeros (what `train --data` did before): not the same run.
    let (mut zeroed, _, _) = train_in_batches(device, &cfg, true);
    assert_ne!(
        params(&mut zeroed),
        params(&mut reference),
        "{cell:?}: resetting the state between batches trains differently"
    );
}

#[test]
fn an_lstm_language_models_carried_batches_train_as_windowed_truncated_bptt_over_the_whole_text() {
    carried_batches_train_as_windowed_truncated_bptt(Cell::Lstm, DeviceKind::Cpu);
}

#[test]
fn carried_batches_train_as_windowed_truncated_bptt_on_wgpu_too() {
    if !wgpu_present() {
        return;
    }
    for cell in [Cell::Lstm, Cell::Gru] {
        carried_batches_train_as_windowed_truncated_bptt(cell, DeviceKind::Wgpu);
    }
}

#[test]
fn a_gru_language_models_carried_batches_train_as_windowed_truncated_bptt_over_the_whole_text() {
    carried_batches_train_as_windowed_truncated_bptt(Cell::Gru, DeviceKind::Cpu);
}

#[test]
fn carried_evaluation_batches_give_the_whole_texts_outputs_also_in_micro_batches() {
    for cell in [Cell::Lstm, Cell::Gru] {
        let cfg = language_model(cell);
        let (x, labels) = texts();
        let whole = trainer(&cfg, carrying_options())
            .evaluate(&x, &labels)
            .unwrap();
        for micro_batch in [None, Some(2)] {
            let opts = TrainOptions {
                micro_batch,
                ..carrying_options()
            };
            let mut t = trainer(&cfg, opts);
            let mut state = CarriedState::new();
            let mut probs = Vec::new();
            for k in 0..WINDOWS {
                let (xk, lk) = window(&x, &labels, k);
                let r = t.evaluate_carrying(&xk, &lk, None, &mut state).unwrap();
                probs.extend(r.probs.data);
            }
            assert_eq!(probs.len(), whole.probs.data.len());
            let worst = probs
                .iter()
                .zip(&whole.probs.data)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                worst <= 1e-6,
                "{cell:?}, micro-batches {micro_batch:?}: carried windows differ from the whole text by {worst}"
            );
        }
    }
}

#[test]
fn a_trainer_not_planned_to_carry_and_a_batch_of_another_size_are_refused_by_name() {
    let cfg = language_model(Cell::Lstm);
    let (x, labels) = texts();
    let (xk, lk) = window(&x, &labels, 0);
    let mut plain = trainer(&cfg, train_options(WINDOW, 0.05));
    let e = plain
        .train_step_carrying(&xk, &lk, None, &mut CarriedState::new())
        .unwrap_err();
    assert!(e.to_string().contains("carry_across"), "{e}");

    let mut t = trainer(&cfg, carrying_options());
    let mut state = CarriedState::new();
    t.train_step_carrying(&xk, &lk, None, &mut state).unwrap();
    let two = HostTensor::new([WINDOW, 2], xk.data[..WINDOW * 2].to_vec()).unwrap();
    let e = t
        .evaluate_carrying(&two, &lk[..WINDOW * 2], None, &mut state)
        .unwrap_err();
    assert!(
        e.to_string().contains("cannot continue a batch of 3"),
        "{e}"
    );
    state.reset();
    t.evaluate_carrying(&two, &lk[..WINDOW * 2], None, &mut state)
        .unwrap();
}
