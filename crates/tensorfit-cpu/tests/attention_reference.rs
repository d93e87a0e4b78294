//! Agreement with PyTorch on multi-head scaled dot-product self-attention: the weights
//! (`Op::AttentionScores`), the output (`Op::AttentionMix`) and the gradients autodiff
//! wires for them, on a `CpuBackend`, against `tests/data/attention_reference.safetensors`
//! (made by `tools/attention_reference.py` with `F.scaled_dot_product_attention`; this
//! test needs no PyTorch): whole sequences, a padded batch (key padding mask) and a causal
//! one at lengths, within |a − b| ≤ 1e-5 + 1e-5·|b|.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, HashMap};

use tensorfit_core::args::{AttentionMixInputs, AttentionScoresInputs};
use tensorfit_core::safetensors::SafeTensors;
use tensorfit_core::{backward, Executable, Graph, Op, Shape};
use tensorfit_cpu::CpuBackend;
use tensorfit_testing::{assert_close, repo_file};

const FILE: &str = "tests/data/attention_reference.safetensors";

/// Tensors by name: each one's shape and f32 values.
type Tensors = BTreeMap<String, (Shape, Vec<f32>)>;

/// Every tensor of the file as f32 values with its shape, and the metadata.
fn load() -> (Tensors, BTreeMap<String, String>) {
    let bytes = std::fs::read(repo_file(FILE)).unwrap();
    let file = SafeTensors::parse(&bytes).unwrap();
    let tensors = file
        .tensors()
        .map(|(name, t)| {
            assert_eq!(t.dtype.name(), "F32", "{name}");
            let values = t
                .data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (name.to_string(), (Shape::from(t.shape), values))
        })
        .collect();
    (tensors, file.header().metadata().clone())
}

#[test]
fn attention_weights_output_and_gradients_match_pytorch() {
    let (tensors, meta) = load();
    let heads: usize = meta["heads"].parse().unwrap();
    let cases: Vec<&str> = meta["cases"].split(',').collect();
    let causal: Vec<bool> = meta["causal"].split(',').map(|c| c == "true").collect();
    assert_eq!(cases, ["whole", "padded", "causal"]);
    for (case, causal) in cases.into_iter().zip(causal) {
        let get = |name: &str| &tensors[&format!("{case}.{name}")];
        let mut g = Graph::new();
        let input = |g: &mut Graph, name: &str| g.input(name, get(name).0.clone());
        let (q, k, v) = (input(&mut g, "q"), input(&mut g, "k"), input(&mut g, "v"));
        let (w, lengths) = (input(&mut g, "w"), input(&mut g, "lengths"));
        // The whole case runs without lengths: every row has all T steps.
        let lengths = (case != "whole").then_some(lengths);
        let op = Op::AttentionScores { heads, causal };
        let scores = g.apply("scores", op, AttentionScoresInputs { q, k, lengths });
        let probs = scores.unwrap().probs;
        let mix = Op::AttentionMix { heads };
        let out = g
            .apply("mix", mix, AttentionMixInputs { probs, v })
            .unwrap()
            .out;
        let grads = backward(&mut g, &[(out, w)], &[q, k, v]).unwrap();
        let mut be = CpuBackend::new();
        let exe = Executable::new(g, &mut be, HashMap::new()).unwrap();
        for (t, name) in [(q, "q"), (k, "k"), (v, "v"), (w, "w")] {
            exe.write(&mut be, t, &get(name).1).unwrap();
        }
        if let Some(l) = lengths {
            exe.write(&mut be, l, &get("lengths").1).unwrap();
        }
        exe.run(&mut be).unwrap();
        let got = [
            ("probs", probs),
            ("out", out),
            ("dq", grads[0].unwrap()),
            ("dk", grads[1].unwrap()),
            ("dv", grads[2].unwrap()),
        ];
        for (name, t) in got {
            let values = exe.read(&mut be, t).unwrap();
            assert_close(&format!("{case} {name}"), &values, &get(name).1, 1e-5, 1e-5);
        }
    }
}
