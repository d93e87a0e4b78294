//! Agreement with PyTorch's `nn.GRU` on a small 2-layer stack (I=5, H=7, T=6, B=3, from a
//! random initial state): the outputs y and h_n, and the gradients of
//! `sum(y·dy) + sum(h_n·dh_n)` with respect to x, h0 and every weight (the two bias
//! vectors apart: `b_hn` sits inside the reset product). And the same stack over a
//! vocabulary of 11 on token ids (`CellInput::Tokens`) against `nn.GRU` on their one-hot
//! vectors (`tests/data/token_gru_reference.safetensors`; no input gradient).
//!
//! The reference files are made by `tools/make_reference.py` (its GRU part,
//! `tools/gru_reference.py`) with PyTorch on the CPU; this test needs no PyTorch. The stack
//! is built by the layer (`layers::Gru::stack`) and differentiated by autodiff, on the CPU
//! backend. Outputs: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference|. Gradients are compared
//! with the exact (float64) values the file also holds, allowing 1e-5 of the tensor's
//! scale plus three times PyTorch's own float32 error, as `pytorch_agreement.rs` does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::{assert_close, max_abs};
use tensorfit::core::{backward, Executable, Graph, HostTensor, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::{
    CellInput, Gru, GruWeights, Recurrent, RecurrentWeights, StatePart, Tensors,
};
use tensorfit::nn::ParamStore;

fn load(file: &str) -> (ParamStore, HashMap<String, String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    ParamStore::load(&path, "").expect("reference file loads")
}

fn meta_usize(meta: &HashMap<String, String>, k: &str) -> usize {
    meta[k].parse().unwrap()
}

/// Layer `k`'s `[B, H]` block of a `[layers, B, H]` state tensor.
fn layer_block(t: &HostTensor, k: usize) -> &[f32] {
    let n = t.numel() / t.shape.dim(0);
    &t.data[k * n..(k + 1) * n]
}

#[test]
fn a_two_layer_gru_matches_pytorch_forward_and_backward() {
    agrees_with_pytorch(
        "tests/data/gru_small_reference.safetensors",
        CellInput::Features,
    );
}

#[test]
fn a_two_layer_gru_on_token_ids_matches_pytorchs_gru_on_their_one_hot_vectors() {
    agrees_with_pytorch(
        "tests/data/token_gru_reference.safetensors",
        CellInput::Tokens,
    );
}

/// Runs the case of `file` (its input `x` features, or `ids` by `input_kind`) and
/// compares everything the file holds.
fn agrees_with_pytorch(file: &str, input_kind: CellInput) {
    let (r, meta) = load(file);
    let gru = Gru {
        input: meta_usize(&meta, "input"),
        hidden: meta_usize(&meta, "hidden"),
        layers: meta_usize(&meta, "layers"),
        input_kind,
        bidirectional: false,
    };
    // Token ids have no gradient.
    let (x_name, x_grad) = match input_kind {
        CellInput::Features => ("x", true),
        CellInput::Tokens => ("ids", false),
    };
    let (batch, steps) = (meta_usize(&meta, "batch"), meta_usize(&meta, "steps"));
    let tensor = |name: &str| r.require(name).unwrap();

    let mut g = Graph::new();
    let specs = gru.specs();
    let weights: Vec<GruWeights<TensorId>> = specs
        .iter()
        .map(|w| w.map(|s| g.input(&s.name, s.shape.clone())))
        .collect();
    let all = RecurrentWeights::Gru(weights.clone());
    let stack = Recurrent::Gru(gru)
        .stack(&mut g, &all, (batch, steps), (true, false))
        .unwrap();
    let (h0, h_n) = (stack.initial(StatePart::H), stack.last(StatePart::H));
    let dy = g.input("dy", g.shape(stack.y).clone());
    let dh_n: Vec<TensorId> = (0..gru.layers)
        .map(|k| g.input(&format!("dh_n{k}"), gru.state_shape(batch)))
        .collect();
    let mut seeds = vec![(stack.y, dy)];
    seeds.extend(h_n.iter().copied().zip(dh_n.iter().copied()));
    // Gradients of x (features), each layer's h0, then every weight in table order.
    let mut wrt: Vec<(String, TensorId)> = Vec::new();
    if x_grad {
        wrt.push(("x".into(), stack.x));
    }
    wrt.extend(h0.iter().enumerate().map(|(k, &h)| (format!("h0 l{k}"), h)));
    for (spec, ids) in specs.iter().zip(&weights) {
        let names = spec.map(|s| s.name.clone());
        wrt.extend([
            (names.w_ih, ids.w_ih),
            (names.w_hh, ids.w_hh),
            (names.b_ih, ids.b_ih),
            (names.b_hh, ids.b_hh),
        ]);
    }
    let wrt_ids: Vec<TensorId> = wrt.iter().map(|&(_, t)| t).collect();
    let grads = backward(&mut g, &seeds, &wrt_ids).unwrap();

    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new()).unwrap();
    for (spec, ids) in specs.iter().zip(&weights) {
        for (s, &id) in spec
            .map(|s| s.name.clone())
            .items()
            .into_iter()
            .zip(ids.items())
        {
            exe.write(&mut be, id, &tensor(&format!("init.{s}")).data)
                .unwrap();
        }
    }
    exe.write(&mut be, stack.x, &tensor(x_name).data).unwrap();
    exe.write(&mut be, dy, &tensor("dy").data).unwrap();
    for (k, (&h0, &dh)) in h0.iter().zip(&dh_n).enumerate() {
        exe.write(&mut be, h0, layer_block(tensor("h0"), k))
            .unwrap();
        exe.write(&mut be, dh, layer_block(tensor("dh_n"), k))
            .unwrap();
    }
    exe.run(&mut be).unwrap();

    let check = |what: &str, got: &[f32], want: &[f32]| {
        assert_close(what, got, want, 1e-5 * max_abs(want), 1e-5);
    };
    check("y", &exe.read(&mut be, stack.y).unwrap(), &tensor("y").data);
    assert_eq!(h_n.len(), gru.layers);
    for (k, &h) in h_n.iter().enumerate() {
        let got = exe.read(&mut be, h).unwrap();
        check(&format!("h_n l{k}"), &got, layer_block(tensor("h_n"), k));
    }

    // The file's name of each gradient, and the block of it that is ours.
    let reference = |name: &str, prefix: &str| -> Vec<f32> {
        match name.strip_prefix("h0 l") {
            Some(k) => layer_block(tensor(&format!("{prefix}.h0")), k.parse().unwrap()).to_vec(),
            None => tensor(&format!("{prefix}.{name}")).data.clone(),
        }
    };
    for ((name, _), grad) in wrt.iter().zip(&grads) {
        let got = exe
            .read(&mut be, grad.expect("every input has a gradient"))
            .unwrap();
        let (torch32, exact) = (reference(name, "grad"), reference(name, "grad64"));
        let scale = max_abs(&exact);
        let err =
            |v: &[f32]| max_abs(&v.iter().zip(&exact).map(|(a, b)| a - b).collect::<Vec<_>>());
        let (ours, theirs) = (err(&got), err(&torch32));
        println!(
            "grad {name:20} error vs exact: tensorfit {:.1e}, PyTorch {:.1e} (of scale {scale:.2e})",
            ours / scale,
            theirs / scale
        );
        assert_close(
            &format!("grad {name}"),
            &got,
            &exact,
            1e-5 * scale + 3.0 * theirs,
            0.0,
        );
    }
    assert_eq!(
        grads.len(),
        usize::from(x_grad) + 5 * gru.layers,
        "x, each h0 and every weight"
    );
    exe.release(&mut be).unwrap();
}
