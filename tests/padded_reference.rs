//! A padded batch against PyTorch (`tests/data/padded_lstm_reference.safetensors`, made
//! by `tools/padded_reference.py`): `pack_padded_sequence` → `nn.LSTM(4, 5,
//! num_layers=2)` → `pad_packed_sequence`, the seed head (BatchNorm, Linear + tanh,
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
use tensorfit::nn::{ParamStore, SeedShape};

const FILE: &str = "tests/data/padded_lstm_reference.safetensors";

#[test]
fn a_padded_batch_matches_pytorchs_packed_sequence() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    let (r, meta) = ParamStore::load(&path, "").expect("reference file loads");
    let size = |k: &str| -> usize { meta[k].parse().unwrap() };
    let (batch, steps, hidden, layers) =
        (size("batch"), size("steps"), size("hidden"), size("layers"));
    let cfg = SeedShape {
        features: size("input"),
        hidden,
        layers,
        dense: size("dense"),
        classes: size("classes"),
        activation: Activation::Tanh,
    }
    .description();
    let data = |name: &str| r.require(name).unwrap().data.clone();

    let mut g = Graph::new();
    let c = classifier_at_lengths(&mut g, &cfg, (batch, steps), Mode::Train, true).unwrap();
    let fill = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    let one = g.apply("seed", fill, FillInputs::default()).unwrap().out;
    let mut wrt: Vec<TensorId> = c.params.iter().map(|(_, t)| *t).collect();
    let (h0s, c0s) = (c.stack.initial(StatePart::H), c.stack.initial(StatePart::C));
    wrt.extend(h0s.iter().chain(&c0s));
    let grads = backward(&mut g, &[(c.loss, one)], &wrt).unwrap();
    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new()).unwrap();
    for (name, t) in &c.params {
        exe.write(&mut be, *t, &data(&format!("init.{name}")))
            .unwrap();
    }
    let state = batch * hidden;
    let (h0, c0) = (data("h0"), data("c0"));
    for k in 0..layers {
        let layer = k * state..(k + 1) * state;
        exe.write(&mut be, h0s[k], &h0[layer.clone()]).unwrap();
        exe.write(&mut be, c0s[k], &c0[layer]).unwrap();
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
    check(
        "h_n",
        &finals(&c.stack.last(StatePart::H), &mut be),
        &data("h_n"),
        1e-5,
    );
    check(
        "c_n",
        &finals(&c.stack.last(StatePart::C), &mut be),
        &data("c_n"),
        1e-5,
    );
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
    let (dh0, dc0) = state_grads.split_at(layers);
    check("grad.h0", &dh0.concat(), &data("grad.h0"), 3e-5);
    check("grad.c0", &dc0.concat(), &data("grad.c0"), 3e-5);
}
