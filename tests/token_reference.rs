//! Token inputs against PyTorch (`tests/data/token_lstm_reference.safetensors`, made by
//! `tools/make_reference.py`): `nn.Embedding(11, 5)` → `nn.LSTM(5, 7, num_layers=2)`, and
//! `nn.LSTM(11, 7)` on `one_hot(ids)` computed here on the ids themselves
//! (`CellInput::Tokens`); ids `[T=6, B=3]`, zero initial state. Compared: `y`, `h_n`,
//! `c_n`, and every parameter's gradient of `sum(y · dy)` for the file's `dy`. Built from
//! the layers (`Embedding::forward`, `Lstm::layer`) and run on the CPU backend.
//! Tolerance: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference tensor| (as
//! `pytorch_agreement.rs`), and 3e-5 of the scale for gradients, which sum over all steps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{assert_close, max_abs};
use tensorfit::core::{backward, Executable, Graph, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::{CellInput, Embedding, Lstm};
use tensorfit::nn::ParamStore;

const FILE: &str = "tests/data/token_lstm_reference.safetensors";

/// Runs the case of `prefix` and compares everything the file holds for it.
fn agrees_with_pytorch(prefix: &str, embedding: bool) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    let (r, meta) = ParamStore::load(&path, prefix).expect("reference file loads");
    let size = |k: &str| -> usize { meta[k].parse().unwrap() };
    let (vocab, hidden, steps, batch) =
        (size("vocab"), size("hidden"), size("steps"), size("batch"));
    let emb = Embedding {
        vocab,
        dim: size("embedding"),
    };
    let lstm = if embedding {
        Lstm {
            input: emb.dim,
            hidden,
            layers: size("emb_layers"),
            input_kind: CellInput::Features,
            bidirectional: false,
        }
    } else {
        Lstm {
            input: vocab,
            hidden,
            layers: size("onehot_layers"),
            input_kind: CellInput::Tokens,
            bidirectional: false,
        }
    };

    let mut g = Graph::new();
    let mut params: Vec<(String, TensorId)> = Vec::new();
    let mut leaf = |g: &mut Graph, spec: &tensorfit::nn::ParamSpec| {
        let id = spec.leaf(g);
        params.push((spec.name.clone(), id));
        id
    };
    let ids = g.input("ids", [steps, batch]);
    let mut x = ids;
    if embedding {
        let w = emb.specs().map(|s| leaf(&mut g, s));
        x = Embedding::forward(&mut g, "embedding", ids, &w).unwrap();
    }
    let weights: Vec<_> = lstm
        .specs()
        .iter()
        .map(|s| s.map(|p| leaf(&mut g, p)))
        .collect();
    let (mut states, mut finals) = (Vec::new(), Vec::new());
    for (k, w) in weights.iter().enumerate() {
        let state = lstm.state_leaves(&mut g, k, batch);
        let outs = Lstm::layer(&mut g, &format!("lstm_l{k}"), x, state, w, true).unwrap();
        states.extend([state.0, state.1]);
        finals.push((outs.h_n, outs.c_n));
        x = outs.y;
    }
    let y = x;
    let dy = g.input("dy", [steps, batch, hidden]);
    let wrt: Vec<TensorId> = params.iter().map(|&(_, t)| t).collect();
    let grads = backward(&mut g, &[(y, dy)], &wrt).unwrap();

    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new()).unwrap();
    exe.write(&mut be, ids, &r.require("ids").unwrap().data)
        .unwrap();
    exe.write(&mut be, dy, &r.require("dy").unwrap().data)
        .unwrap();
    for (name, t) in &params {
        let init = r.require(&format!("init.{name}")).unwrap();
        exe.write(&mut be, *t, &init.data).unwrap();
    }
    for s in states {
        exe.write(&mut be, s, &vec![0.0; batch * hidden]).unwrap();
    }
    exe.run(&mut be).unwrap();

    let check = |what: &str, got: &[f32], want: &[f32], rel_scale: f32| {
        let what = format!("{prefix}{what}");
        assert_close(&what, got, want, rel_scale * max_abs(want), 1e-5);
    };
    check(
        "y",
        &exe.read(&mut be, y).unwrap(),
        &r.require("y").unwrap().data,
        1e-5,
    );
    let (mut h_n, mut c_n) = (Vec::new(), Vec::new());
    for (h, c) in finals {
        h_n.extend(exe.read(&mut be, h).unwrap());
        c_n.extend(exe.read(&mut be, c).unwrap());
    }
    check("h_n", &h_n, &r.require("h_n").unwrap().data, 1e-5);
    check("c_n", &c_n, &r.require("c_n").unwrap().data, 1e-5);
    for ((name, _), grad) in params.iter().zip(grads) {
        let got = exe
            .read(&mut be, grad.expect("every parameter has a gradient"))
            .unwrap();
        let want = &r.require(&format!("grad.{name}")).unwrap().data;
        check(&format!("grad.{name}"), &got, want, 3e-5);
    }
    assert_eq!(params.len(), if embedding { 9 } else { 4 });
}

#[test]
fn embedding_into_a_two_layer_lstm_matches_pytorch() {
    agrees_with_pytorch("emb.", true);
}

#[test]
fn an_lstm_on_token_ids_matches_pytorchs_lstm_on_their_one_hot_vectors() {
    agrees_with_pytorch("onehot.", false);
}
