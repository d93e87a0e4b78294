//! A padded batch against PyTorch (`tests/data/padded_{lstm,gru}_reference.safetensors`,
//! made by `tools/padded_reference.py`): `pack_padded_sequence` → `nn.LSTM(4, 5,
//! num_layers=2)` (or `nn.GRU`) → `pad_packed_sequence`, the seed head (BatchNorm, Linear + tanh,
//! BatchNorm, Linear) on each sequence's own last step, cross-entropy; B=4, T=6, lengths
//! 6, 3, 1, 4, random initial state. Here: `classifier_at_lengths` in training mode on the
//! CPU backend. Compared: the padded output `y` and the final state of each layer, the
//! probabilities, the loss, and the gradient of every parameter and of the initial state.
//! Tolerance as `pytorch_agreement.rs`: 1e-5 of the tensor's scale plus 1e-5 relative
//! (3e-5 of the scale for gradients, which sum over steps).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{assert_close, max_abs};
use tensorfit::core::args::FillInputs;
use tensorfit::core::{backward, Activation, Executable, Graph, Op, Shape, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::StatePart;
use tensorfit::nn::model::{classifier_at_lengths, Mode};
use tensorfit::nn::{Cell, ParamStore, SeedShape};

#[test]
fn a_padded_batch_matches_pytorchs_packed_sequence() {
    matches_pytorch("tests/data/padded_lstm_reference.safetensors");
}

#[test]
fn a_padded_batch_of_a_gru_matches_pytorchs_packed_sequence() {
    matches_pytorch("tests/data/padded_gru_reference.safetensors");
}

/// The reference `file`'s run, here; the cell is the file's `cell` (absent: LSTM, whose
/// state has a `c` part too).
fn matches_pytorch(file: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let (r, meta) = ParamStore::load(&path, "").expect("reference file loads");
    let size = |k: &str| -> usize { meta[k].parse().unwrap() };
    let (batch, steps, hidden, layers) =
        (size("batch"), size("steps"), size("hidden"), size("layers"));
    let lstm = meta.get("cell").is_none_or(|c| c != "gru");
    let mut cfg = SeedShape {
        features: size("input"),
        hidden,
        layers,
        dense: size("dense"),
        classes: size("classes"),
        activation: Activation::Tanh,
    }
    .description();
    cfg.recurrent_mut().unwrap().cell = if lstm { Cell::Lstm } else { Cell::Gru };
    let data = |name: &str| r.require(name).unwrap().data.clone();
    // The parts of the carried state: h, and c for an LSTM.
    let parts: &[(StatePart, &str)] = if lstm {
        &[(StatePart::H, "h"), (StatePart::C, "c")]
    } else {
        &[(StatePart::H, "h")]
    };

    let mut g = Graph::new();
    let c = classifier_at_lengths(&mut g, &cfg, (batch, steps), Mode::Train, true).unwrap();
    let fill = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    let one = g.apply("seed", fill, FillInputs::default()).unwrap().out;
    let mut wrt: Vec<TensorId> = c.params.iter().map(|(_, t)| *t).collect();
    let initial: Vec<Vec<TensorId>> = parts.iter().map(|&(p, _)| c.stack.initial(p)).collect();
    wrt.extend(initial.concat());
    let grads = backward(&mut g, &[(c.loss, one)], &wrt).unwrap();
    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new()).unwrap();
    for (name, t) in &c.params {
        exe.write(&mut be, *t, &data(&format!("init.{name}")))
            .unwrap();
    }
    let state = batch * hidden;
    for (leaves, (_, part)) in initial.iter().zip(parts) {
        let values = data(&format!("{part}0"));
        for (k, leaf) in leaves.iter().enumerate() {
            exe.write(&mut be, *leaf, &values[k * state..(k + 1) * state])
                .unwrap();
        }
    }
    exe.write(&mut be, c.stack.x, &data("x")).unwrap();
    exe.write(&mut be, c.labels, &data("labels")).unwrap();
    exe.write(&mut be, c.stack.lengths.unwrap(), &data("lengths"))
        .unwrap();
    exe.run(&mut be).unwrap();

    let read = |t: TensorId, be: &mut CpuBackend| exe.read(be, t).unwrap();
    let check = |what: &str, got: &[f32], want: &[f32], scale: f32| {
        assert_close(what, got, want, scale * max_abs(want), 1e-5);
    };
    check("y", &read(c.stack.y, &mut be), &data("y"), 1e-5);
    let finals = |ids: &[TensorId], be: &mut CpuBackend| -> Vec<f32> {
        ids.iter().flat_map(|&t| read(t, be)).collect()
    };
    for &(p, part) in parts {
        let what = format!("{part}_n");
        check(
            &what,
            &finals(&c.stack.last(p), &mut be),
            &data(&what),
            1e-5,
        );
    }
    check("probs", &read(c.probs, &mut be), &data("probs"), 1e-5);
    check("loss", &read(c.loss, &mut be), &data("loss"), 1e-5);
    let grads: Vec<Vec<f32>> = grads
        .into_iter()
        .map(|g| read(g.expect("every tensor gets a gradient"), &mut be))
        .collect();
    let (params, state_grads) = grads.split_at(c.params.len());
    for ((name, _), got) in c.params.iter().zip(params) {
        check(
            &format!("grad.{name}"),
            got,
            &data(&format!("grad.{name}")),
            3e-5,
        );
    }
    for (got, (_, part)) in state_grads.chunks(layers).zip(parts) {
        let what = format!("grad.{part}0");
        check(&what, &got.concat(), &data(&what), 3e-5);
    }
}
