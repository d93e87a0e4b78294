//! Finite-difference check of whole networks at a small size (the seed's shape, and heads
//! of other layers, a GRU stack, token input): the gradients that autodiff and the CPU
//! kernels compute for every parameter and for the initial recurrent state agree with
//! central differences of the loss.

// Test helpers outside #[test] functions are not covered by allow-unwrap-in-tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use tensorfit::core::args::FillInputs;
use tensorfit::core::{backward, Activation, Executable, Graph, Op, Shape, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::every_step::{loss_scale, IGNORE_LABEL};
use tensorfit::nn::model::{classifier, Mode};
use tensorfit::nn::{
    Cell, HeadLayer, HeadLayerKind, HeadOn, InputSpec, ModelDescription, ParamStore, Rng, SeedShape,
};

#[test]
fn seed_shaped_network_gradients_match_finite_differences() {
    let shape = SeedShape {
        features: 6,
        hidden: 5,
        layers: 3,
        dense: 4,
        classes: 3,
        activation: Activation::Tanh,
    };
    gradients_match_finite_differences(&shape.description());
}

/// The seed's shape with two recurrent layers, for the variants.
const TWO_LAYERS: SeedShape = SeedShape {
    features: 6,
    hidden: 5,
    layers: 2,
    dense: 4,
    classes: 3,
    activation: Activation::Tanh,
};

#[test]
fn a_head_of_other_layers_gets_gradients_that_match_finite_differences() {
    let dense = |name: &str, units, activation| HeadLayer {
        name: name.into(),
        kind: HeadLayerKind::Dense { units, activation },
        residual: false,
    };
    let mut cfg = TWO_LAYERS.description();
    cfg.head.layers = vec![
        dense("a", 7, Activation::Sigmoid),
        HeadLayer {
            name: "norm".into(),
            kind: HeadLayerKind::BatchNorm,
            residual: false,
        },
        dense("b", 4, Activation::Identity),
    ];
    gradients_match_finite_differences(&cfg);
    // No head layers at all: the output layer reads the top LSTM layer directly.
    cfg.head.layers.clear();
    gradients_match_finite_differences(&cfg);
}

#[test]
fn a_gru_stack_and_token_input_get_gradients_that_match_finite_differences() {
    let mut cfg = TWO_LAYERS.description();
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    gradients_match_finite_differences(&cfg);
    cfg.input = InputSpec::Tokens {
        vocab: 6,
        embedding: Some(3),
    };
    gradients_match_finite_differences(&cfg);
    cfg.recurrent_mut().unwrap().cell = Cell::Lstm;
    cfg.input = InputSpec::Tokens {
        vocab: 6,
        embedding: None,
    };
    gradients_match_finite_differences(&cfg);
}

#[test]
fn a_gru_on_token_ids_without_an_embedding_gets_gradients_that_match_finite_differences() {
    // The seed's head on the last step, then a language model (no head layers, every step).
    let mut cfg = TWO_LAYERS.description();
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    cfg.input = InputSpec::Tokens {
        vocab: 6,
        embedding: None,
    };
    gradients_match_finite_differences(&cfg);
    cfg.head.on = HeadOn::EveryStep;
    cfg.head.layers.clear();
    gradients_match_finite_differences(&cfg);
}

#[test]
fn a_head_on_every_step_with_ignored_steps_gets_gradients_that_match_finite_differences() {
    // The seed's head (BatchNorm, Dense, BatchNorm) over all T·B rows.
    let mut cfg = TWO_LAYERS.description();
    cfg.head.on = HeadOn::EveryStep;
    gradients_match_finite_differences(&cfg);
    // A language model: token ids, no head layers; then a GRU on embedded ids.
    cfg.head.layers.clear();
    cfg.input = InputSpec::Tokens {
        vocab: 6,
        embedding: None,
    };
    gradients_match_finite_differences(&cfg);
    cfg.recurrent_mut().unwrap().cell = Cell::Gru;
    cfg.input = InputSpec::Tokens {
        vocab: 6,
        embedding: Some(3),
    };
    gradients_match_finite_differences(&cfg);
}

/// Autodiff's gradient of every parameter and of the initial state of `cfg` at B=4,
/// T=5 against central differences of the loss (at least 100 coordinates).
fn gradients_match_finite_differences(cfg: &ModelDescription) {
    let features = cfg.input_features();
    let (batch, steps) = (4, 5);
    let mut g = Graph::new();
    let c = classifier(&mut g, cfg, batch, steps, Mode::Train).unwrap();
    let fill = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    let one = g.apply("seed", fill, FillInputs::default()).unwrap().out;
    let mut wrt: Vec<(String, TensorId)> = c.params.clone();
    for &(t, slot) in &c.stack.carried {
        wrt.push((slot.name(), t));
    }
    let ids: Vec<TensorId> = wrt.iter().map(|(_, t)| *t).collect();
    let grads = backward(&mut g, &[(c.loss, one)], &ids).unwrap();

    let mut backend = CpuBackend::new();
    let exe = Executable::new(g, &mut backend, HashMap::new()).unwrap();
    let mut rng = Rng::new(11);
    let init = ParamStore::init(cfg, 5).unwrap();
    let mut values: HashMap<TensorId, Vec<f32>> = HashMap::new();
    for (name, t) in &wrt {
        let v = match init.get(name) {
            Some(p) => p.data.clone(),
            None => (0..exe.graph().shape(*t).numel())
                .map(|_| 0.5 * rng.normal())
                .collect(),
        };
        exe.write(&mut backend, *t, &v).unwrap();
        values.insert(*t, v);
    }
    let x: Vec<f32> = match cfg.input {
        InputSpec::Dense { .. } => (0..steps * batch * features)
            .map(|_| rng.normal())
            .collect(),
        InputSpec::Tokens { vocab, .. } => (0..steps * batch)
            .map(|_| rng.int_inclusive(0, vocab - 1) as f32)
            .collect(),
    };
    exe.write(&mut backend, c.stack.x, &x).unwrap();
    let labels: Vec<f32> = match cfg.head.on {
        HeadOn::Sequence(_) => vec![0.0, 2.0, 1.0, 2.0],
        // Every step: some steps ignored, as past the end of a padded sequence.
        HeadOn::EveryStep => (0..steps * batch)
            .map(|i| {
                if i % 7 == 3 {
                    IGNORE_LABEL
                } else {
                    (i % 3) as f32
                }
            })
            .collect(),
    };
    exe.write(&mut backend, c.labels, &labels).unwrap();
    if let Some(s) = c.loss_scale {
        exe.write(&mut backend, s, &[loss_scale(&labels)]).unwrap();
    }
    exe.run(&mut backend).unwrap();

    let mut all_grads = Vec::new();
    for gr in &grads {
        let gr = gr.expect("every parameter gets a gradient");
        all_grads.push(exe.read(&mut backend, gr).unwrap());
    }
    let mut loss_at = |t: TensorId, i: usize, v: f32, values: &HashMap<TensorId, Vec<f32>>| {
        let mut w = values[&t].clone();
        w[i] = v;
        exe.write(&mut backend, t, &w).unwrap();
        exe.run(&mut backend).unwrap();
        let l = exe.read(&mut backend, c.loss).unwrap()[0];
        exe.write(&mut backend, t, &values[&t]).unwrap();
        l as f64
    };
    let h = 1e-2f32;
    let mut checked = 0;
    for ((name, t), g) in wrt.iter().zip(&all_grads) {
        let n = g.len();
        // Small tensors fully, large ones at 12 spread coordinates.
        let coords: Vec<usize> = if n <= 24 {
            (0..n).collect()
        } else {
            (0..12).map(|k| (k * 7919 + 3) % n).collect()
        };
        for i in coords {
            let v = values[t][i];
            let fd = (loss_at(*t, i, v + h, &values) - loss_at(*t, i, v - h, &values))
                / (2.0 * h as f64);
            let a = g[i] as f64;
            assert!(
                (a - fd).abs() <= 5e-4 + 3e-2 * fd.abs(),
                "{name}[{i}]: autodiff {a:.6e}, finite difference {fd:.6e}"
            );
            checked += 1;
        }
    }
    assert!(checked > 100, "checked {checked} coordinates");
}
