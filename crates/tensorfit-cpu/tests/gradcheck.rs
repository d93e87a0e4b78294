//! Finite-difference gradient checks of every differentiable forward op, run through the
//! whole stack: a `Graph` is built, `tensorfit_core::backward` appends its gradient
//! nodes, an `Executable` runs both on a `CpuBackend`.
//!
//! Why through the stack and not kernel by kernel: it checks the backward kernels, the
//! autodiff rules that wire them (operand order, transposes, broadcast reductions, the
//! shared LSTM bias gradient) and the backend's dispatch at once, against the only
//! independent truth there is, the derivative of the forward computation itself.
//!
//! Method: every forward output `out_k` gets a random upstream gradient `R_k` (an input
//! tensor used as the backward seed), so the analytic gradients are those of the scalar
//! `f = Σ_k Σ R_k ⊙ out_k`, which the test evaluates on the host in f64 after each run.
//! Each checked coordinate is compared with a central difference of step `H`, with
//! `|analytic - numeric| <= ATOL + RTOL·|numeric|`. Inputs are small (about N(0, 0.5)) so
//! the functions are well conditioned at that step.

// why: the helpers below panic on failure like the tests that call them; clippy's
// allow-unwrap-in-tests covers only the #[test] functions themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use tensorfit_core::args::{
    ActivationInputs, BatchNormInputs, BinaryInputs, DropoutInputs, EmbeddingInputs,
    GruForwardInputs, GruForwardOutputs, LstmForwardInputs, LstmForwardOutputs, MatMulInputs,
    MeanVar, MseLossInputs, SliceTimeInputs, SoftmaxCrossEntropyInputs,
};
use tensorfit_core::dropout::{key_input, step_key};
use tensorfit_core::{
    backward, Activation, BinaryOp, DropoutParams, Executable, Graph, Op, Shape, TensorId,
};
use tensorfit_cpu::CpuBackend;
use tensorfit_testing::{Rng, TestRng};

const H: f32 = 1e-2;
const ATOL: f64 = 2e-3;
const RTOL: f64 = 2e-2;
/// Tensors up to this size are checked at every coordinate, larger ones at a sample.
const CHECK_ALL_UP_TO: usize = 40;
const SAMPLE: usize = 16;

/// Normal test values: N(0, std²) by Box-Muller on two draws in (0, 1).
trait Normals {
    fn normals(&mut self, n: usize, std: f32) -> Vec<f32>;
}

impl Normals for Rng {
    fn normals(&mut self, n: usize, std: f32) -> Vec<f32> {
        let mut normal = || {
            let (u, v) = (self.open_unit(), self.open_unit());
            ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32 * std
        };
        (0..n).map(|_| normal()).collect()
    }
}

/// One gradient check: a forward graph, the value of every leaf, the outputs to seed and
/// the tensors to differentiate with respect to.
struct Case {
    name: &'static str,
    graph: Graph,
    values: Vec<(TensorId, Vec<f32>)>,
    outputs: Vec<TensorId>,
    wrt: Vec<(&'static str, TensorId)>,
}

impl Case {
    fn new(name: &'static str) -> Self {
        Case {
            name,
            graph: Graph::new(),
            values: Vec::new(),
            outputs: Vec::new(),
            wrt: Vec::new(),
        }
    }

    /// A leaf input with the given values, to differentiate against if `grad`.
    fn leaf(
        &mut self,
        name: &'static str,
        shape: &[usize],
        values: Vec<f32>,
        grad: bool,
    ) -> TensorId {
        assert_eq!(Shape::from(shape).numel(), values.len(), "{name}");
        let t = self.graph.input(name, shape);
        self.values.push((t, values));
        if grad {
            self.wrt.push((name, t));
        }
        t
    }

    /// A leaf of N(0, 0.5²) values that gradients are checked against.
    fn random(&mut self, name: &'static str, shape: &[usize], rng: &mut Rng) -> TensorId {
        let values = rng.normals(Shape::from(shape).numel(), 0.5);
        self.leaf(name, shape, values, true)
    }

    fn run(mut self, rng: &mut Rng) {
        let name = self.name;
        // Upstream gradients R_k, one per seeded output.
        let mut seeds = Vec::new();
        let mut upstream = Vec::new();
        for (k, &out) in self.outputs.iter().enumerate() {
            let shape = self.graph.shape(out).clone();
            let r = self.graph.input(&format!("upstream{k}"), shape.clone());
            let values = rng.normals(shape.numel(), 1.0);
            self.values.push((r, values.clone()));
            seeds.push((out, r));
            upstream.push((out, values));
        }
        let wrt_ids: Vec<TensorId> = self.wrt.iter().map(|&(_, t)| t).collect();
        let grads = backward(&mut self.graph, &seeds, &wrt_ids).unwrap();

        let mut be = CpuBackend::new();
        let exe = Executable::new(self.graph, &mut be, HashMap::new()).unwrap();
        for (t, v) in &self.values {
            exe.write(&mut be, *t, v).unwrap();
        }
        exe.run(&mut be).unwrap();

        // f = Σ_k Σ R_k ⊙ out_k, after a run with the current values.
        let objective = |be: &mut CpuBackend| -> f64 {
            exe.run(be).unwrap();
            upstream
                .iter()
                .map(|(out, r)| {
                    let o = exe.read(be, *out).unwrap();
                    o.iter()
                        .zip(r)
                        .map(|(&o, &r)| o as f64 * r as f64)
                        .sum::<f64>()
                })
                .sum()
        };

        // Every analytic gradient is read before any input is perturbed.
        let analytic: Vec<Vec<f32>> = self
            .wrt
            .iter()
            .zip(&grads)
            .map(|(&(wname, _), grad)| {
                let grad = grad.unwrap_or_else(|| panic!("{name}: no gradient for `{wname}`"));
                exe.read(&mut be, grad).unwrap()
            })
            .collect();

        let mut checked = 0;
        for (&(wname, t), analytic) in self.wrt.iter().zip(&analytic) {
            let mut x = self
                .values
                .iter()
                .find(|(id, _)| *id == t)
                .map(|(_, v)| v.clone())
                .unwrap();
            assert_eq!(
                analytic.len(),
                x.len(),
                "{name}: gradient of `{wname}` has the wrong size"
            );
            let coords: Vec<usize> = if x.len() <= CHECK_ALL_UP_TO {
                (0..x.len()).collect()
            } else {
                let mut c = vec![0, x.len() - 1];
                c.extend((0..SAMPLE).map(|_| (rng.next_u64() % x.len() as u64) as usize));
                c
            };
            for k in coords {
                let orig = x[k];
                x[k] = orig + H;
                exe.write(&mut be, t, &x).unwrap();
                let plus = objective(&mut be);
                x[k] = orig - H;
                exe.write(&mut be, t, &x).unwrap();
                let minus = objective(&mut be);
                x[k] = orig;
                exe.write(&mut be, t, &x).unwrap();
                let numeric = (plus - minus) / (2.0 * H as f64);
                let a = analytic[k] as f64;
                assert!(
                    (a - numeric).abs() <= ATOL + RTOL * numeric.abs(),
                    "{name}: d f / d {wname}[{k}]: analytic {a:.6}, numeric {numeric:.6}"
                );
                checked += 1;
            }
        }
        assert!(checked > 0, "{name}: nothing checked");
        exe.release(&mut be).unwrap();
        assert_eq!(be_allocated(&be), 0, "{name}: buffers left allocated");
    }
}

fn be_allocated(be: &CpuBackend) -> u64 {
    use tensorfit_core::Backend;
    be.memory().allocated
}

#[test]
fn matmul_all_transpose_combinations() {
    let mut rng = Rng::new(1);
    let (m, k, n) = (3, 4, 5);
    for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut c = Case::new("matmul");
        let a_shape = if trans_a { [k, m] } else { [m, k] };
        let b_shape = if trans_b { [n, k] } else { [k, n] };
        let a = c.random("a", &a_shape, &mut rng);
        let b = c.random("b", &b_shape, &mut rng);
        let op = Op::MatMul { trans_a, trans_b };
        let out = c.graph.apply("c", op, MatMulInputs { a, b }).unwrap();
        c.outputs.push(out.c);
        c.run(&mut rng);
    }
}

#[test]
fn binary_add_and_mul_with_and_without_broadcasting() {
    let mut rng = Rng::new(2);
    for bop in [BinaryOp::Add, BinaryOp::Mul] {
        for b_shape in [&[2, 3, 4][..], &[3, 4], &[4]] {
            let mut c = Case::new(if bop == BinaryOp::Add { "add" } else { "mul" });
            let a = c.random("a", &[2, 3, 4], &mut rng);
            let b = c.random("b", b_shape, &mut rng);
            let out = c.graph.apply("out", Op::Binary(bop), BinaryInputs { a, b });
            c.outputs.push(out.unwrap().out);
            c.run(&mut rng);
        }
    }
}

#[test]
fn binary_mul_of_a_tensor_with_itself() {
    // The same view passed twice, and two gradient contributions summed.
    let mut rng = Rng::new(3);
    let mut c = Case::new("square");
    let x = c.random("x", &[3, 4], &mut rng);
    let square = BinaryInputs { a: x, b: x };
    let out = c.graph.apply("x2", Op::Binary(BinaryOp::Mul), square);
    c.outputs.push(out.unwrap().out);
    c.run(&mut rng);
}

#[test]
fn every_activation() {
    let mut rng = Rng::new(4);
    for f in [
        Activation::Identity,
        Activation::Relu,
        Activation::Tanh,
        Activation::Sigmoid,
    ] {
        let mut c = Case::new(f.name());
        // Keep inputs away from ReLU's kink, where the difference quotient is not the
        // derivative.
        let values: Vec<f32> = rng
            .normals(12, 0.8)
            .into_iter()
            .map(|v| v.signum() * (v.abs() + 5.0 * H))
            .collect();
        let x = c.leaf("x", &[3, 4], values, true);
        let y = c
            .graph
            .apply("y", Op::Activation(f), ActivationInputs { x });
        c.outputs.push(y.unwrap().y);
        c.run(&mut rng);
    }
}

#[test]
fn slice_time() {
    let mut rng = Rng::new(5);
    for t in [0, 2, 3] {
        let mut c = Case::new("slice_time");
        let x = c.random("x", &[4, 2, 3], &mut rng);
        let out = c.graph.apply(
            "step",
            Op::SliceTime { t },
            SliceTimeInputs { x, lengths: None },
        );
        c.outputs.push(out.unwrap().out);
        c.run(&mut rng);
    }
}

/// An LSTM layer with T=3, B=2, I=3, H=4; returns the case and its forward outputs.
fn lstm_case(rng: &mut Rng, x_grad: bool) -> (Case, LstmForwardOutputs<TensorId>) {
    let (t, b, i, h) = (3, 2, 3, 4);
    let mut c = Case::new("lstm");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), x_grad);
    let out = lstm_on(&mut c, x, (b, i, h), None, rng);
    (c, out)
}

/// An LSTM layer of `h` units over `x` (`i` features, or token ids over a vocabulary of
/// `i`) for a batch of `b`, with random state and weights to check against.
fn lstm_on(
    c: &mut Case,
    x: TensorId,
    (b, i, h): (usize, usize, usize),
    lengths: Option<TensorId>,
    rng: &mut Rng,
) -> LstmForwardOutputs<TensorId> {
    let h0 = c.random("h0", &[b, h], rng);
    let c0 = c.random("c0", &[b, h], rng);
    let w_ih = c.random("w_ih", &[4 * h, i], rng);
    let w_hh = c.random("w_hh", &[4 * h, h], rng);
    let b_ih = c.random("b_ih", &[4 * h], rng);
    let b_hh = c.random("b_hh", &[4 * h], rng);
    let inputs = LstmForwardInputs {
        x,
        h0,
        c0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        lengths,
    };
    let op = Op::LstmForward {
        keep_for_backward: true,
    };
    c.graph.apply("lstm", op, inputs).unwrap()
}

#[test]
fn lstm_over_a_padded_batch_with_lengths_from_zero_to_all_steps() {
    // Sequences of 3, 0, 1 and 2 of T = 3 steps: the padding carries the state, gets no
    // gradient, and h_n, c_n are each row's own last state.
    let mut rng = Rng::new(21);
    let (t, b, i, h) = (3, 4, 3, 4);
    let mut c = Case::new("lstm_lengths");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), true);
    let lengths = c.leaf("lengths", &[b], vec![3.0, 0.0, 1.0, 2.0], false);
    let out = lstm_on(&mut c, x, (b, i, h), Some(lengths), &mut rng);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}

#[test]
fn lstm_last_steps_of_a_padded_batch_through_slice_time_at_lengths() {
    // The classifier's use on a padded batch: each row's own last step.
    let mut rng = Rng::new(22);
    let (t, b, i, h) = (3, 4, 3, 4);
    let mut c = Case::new("lstm_last_steps");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), true);
    let lengths = c.leaf("lengths", &[b], vec![2.0, 3.0, 0.0, 1.0], false);
    let out = lstm_on(&mut c, x, (b, i, h), Some(lengths), &mut rng);
    let x = SliceTimeInputs {
        x: out.y,
        lengths: Some(lengths),
    };
    let last = c.graph.apply("last", Op::SliceTime { t: t - 1 }, x);
    c.outputs.push(last.unwrap().out);
    c.run(&mut rng);
}

#[test]
fn lstm_forward_all_inputs_all_outputs() {
    let mut rng = Rng::new(6);
    let (mut c, out) = lstm_case(&mut rng, true);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}

#[test]
fn lstm_forward_without_input_gradient_and_one_output() {
    // x is not differentiated (LstmBackward { input_grad: false }) and only c_n is
    // seeded, so y's and h_n's gradients are Fill zeros.
    let mut rng = Rng::new(7);
    let (mut c, out) = lstm_case(&mut rng, false);
    c.outputs.push(out.c_n);
    c.run(&mut rng);
}

#[test]
fn lstm_last_step_through_slice_time() {
    // The classifier's use: only the last time step of y is read.
    let mut rng = Rng::new(8);
    let (mut c, out) = lstm_case(&mut rng, true);
    let x = SliceTimeInputs {
        x: out.y,
        lengths: None,
    };
    let last = c.graph.apply("last", Op::SliceTime { t: 2 }, x);
    c.outputs.push(last.unwrap().out);
    c.run(&mut rng);
}

/// A GRU layer with T=3, B=2 (or B = the number of `lengths`, which pads the batch),
/// I=3, H=4; returns the case and its forward outputs.
fn gru_case(
    rng: &mut Rng,
    x_grad: bool,
    lengths: Option<&[f32]>,
) -> (Case, GruForwardOutputs<TensorId>) {
    let (t, b, i, h) = (3, lengths.map_or(2, <[f32]>::len), 3, 4);
    let mut c = Case::new("gru");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), x_grad);
    let lengths = lengths.map(|l| c.leaf("lengths", &[b], l.to_vec(), false));
    let inputs = GruForwardInputs {
        x,
        h0: c.random("h0", &[b, h], rng),
        w_ih: c.random("w_ih", &[3 * h, i], rng),
        w_hh: c.random("w_hh", &[3 * h, h], rng),
        b_ih: c.random("b_ih", &[3 * h], rng),
        b_hh: c.random("b_hh", &[3 * h], rng),
        lengths,
    };
    let op = Op::GruForward {
        keep_for_backward: true,
    };
    let outs = c.graph.apply("gru", op, inputs).unwrap();
    (c, outs)
}

#[test]
fn gru_forward_all_inputs_both_outputs_and_both_biases_apart() {
    let mut rng = Rng::new(16);
    let (mut c, out) = gru_case(&mut rng, true, None);
    c.outputs.extend([out.y, out.h_n]);
    c.run(&mut rng);
}

#[test]
fn gru_over_a_padded_batch_with_lengths_from_zero_to_all_steps() {
    let mut rng = Rng::new(18);
    let (mut c, out) = gru_case(&mut rng, true, Some(&[3.0, 0.0, 1.0, 2.0]));
    c.outputs.extend([out.y, out.h_n]);
    c.run(&mut rng);
}

#[test]
fn gru_forward_without_input_gradient_and_only_the_final_state() {
    // x is not differentiated (GruBackward { input_grad: false }) and only h_n is seeded,
    // so y's gradient is Fill zeros.
    let mut rng = Rng::new(17);
    let (mut c, out) = gru_case(&mut rng, false, None);
    c.outputs.push(out.h_n);
    c.run(&mut rng);
}

#[test]
fn batchnorm_training() {
    let mut rng = Rng::new(9);
    let mut c = Case::new("batchnorm training");
    let x = c.random("x", &[5, 3], &mut rng);
    let gamma = c.leaf("gamma", &[3], vec![0.8, 1.2, -0.6], true);
    let beta = c.random("beta", &[3], &mut rng);
    let inputs = BatchNormInputs {
        x,
        gamma,
        beta,
        running: None,
    };
    let op = Op::BatchNorm {
        eps: 1e-5,
        training: true,
    };
    let outs = c.graph.apply("bn", op, inputs).unwrap();
    c.outputs.push(outs.y);
    c.run(&mut rng);
}

#[test]
fn batchnorm_inference() {
    let mut rng = Rng::new(10);
    let mut c = Case::new("batchnorm inference");
    let x = c.random("x", &[5, 3], &mut rng);
    let gamma = c.random("gamma", &[3], &mut rng);
    let beta = c.random("beta", &[3], &mut rng);
    let mean = c.leaf("running_mean", &[3], rng.normals(3, 0.5), false);
    let var = c.leaf("running_var", &[3], vec![0.3, 1.0, 2.5], false);
    let inputs = BatchNormInputs {
        x,
        gamma,
        beta,
        running: Some(MeanVar { mean, var }),
    };
    let op = Op::BatchNorm {
        eps: 1e-5,
        training: false,
    };
    let y = c.graph.apply("bn", op, inputs).unwrap();
    c.outputs.push(y.y);
    c.run(&mut rng);
}

#[test]
fn softmax_cross_entropy() {
    let mut rng = Rng::new(11);
    let mut c = Case::new("softmax cross-entropy");
    let logits = c.random("logits", &[4, 5], &mut rng);
    let labels = c.leaf("labels", &[4], vec![0.0, 4.0, 2.0, 2.0], false);
    let inputs = SoftmaxCrossEntropyInputs { logits, labels };
    let outs = c
        .graph
        .apply("ce", Op::SoftmaxCrossEntropy, inputs)
        .unwrap();
    c.outputs.push(outs.loss);
    c.run(&mut rng);
}

#[test]
fn mean_squared_error_over_every_step() {
    // [T, B, K] predictions, as a head on every step gives them.
    let mut rng = Rng::new(13);
    let mut c = Case::new("mse");
    let pred = c.random("pred", &[3, 2, 4], &mut rng);
    let target = rng.normals(24, 1.0);
    let target = c.leaf("target", &[3, 2, 4], target, false);
    let inputs = MseLossInputs { pred, target };
    let outs = c.graph.apply("mse", Op::MseLoss, inputs).unwrap();
    c.outputs.push(outs.loss);
    c.run(&mut rng);
}

#[test]
fn a_small_classifier_end_to_end() {
    // LSTM -> last step -> dense with a broadcast bias -> tanh -> softmax cross-entropy:
    // the composition the seed network uses, with its gradient sums and reductions.
    let mut rng = Rng::new(12);
    let (mut c, out) = lstm_case(&mut rng, true);
    let g = &mut c.graph;
    let last = g.apply(
        "last",
        Op::SliceTime { t: 2 },
        SliceTimeInputs {
            x: out.y,
            lengths: None,
        },
    );
    let last = last.unwrap().out;
    let w = c.random("w", &[4, 3], &mut rng);
    let bias = c.random("bias", &[3], &mut rng);
    let g = &mut c.graph;
    let op = Op::MatMul {
        trans_a: false,
        trans_b: false,
    };
    let z = g.apply("z", op, MatMulInputs { a: last, b: w }).unwrap().c;
    let add = Op::Binary(BinaryOp::Add);
    let zb = g
        .apply("zb", add, BinaryInputs { a: z, b: bias })
        .unwrap()
        .out;
    let tanh = Op::Activation(Activation::Tanh);
    let a = g.apply("a", tanh, ActivationInputs { x: zb }).unwrap().y;
    let labels = c.leaf("labels", &[2], vec![1.0, 0.0], false);
    let inputs = SoftmaxCrossEntropyInputs { logits: a, labels };
    let loss = c
        .graph
        .apply("ce", Op::SoftmaxCrossEntropy, inputs)
        .unwrap();
    c.outputs.push(loss.loss);
    c.run(&mut rng);
}

#[test]
fn embedding_with_repeated_ids() {
    // Ids 1 and 3 repeat: their rows' gradients are sums (the scatter-add).
    let mut rng = Rng::new(14);
    let mut c = Case::new("embedding");
    let table = c.random("table", &[5, 3], &mut rng);
    let ids = c.leaf("ids", &[6], vec![1.0, 3.0, 1.0, 0.0, 3.0, 1.0], false);
    let inputs = EmbeddingInputs { table, ids };
    let out = c.graph.apply("emb", Op::Embedding, inputs).unwrap();
    c.outputs.push(out.out);
    c.run(&mut rng);
}

#[test]
fn lstm_on_token_ids_all_outputs() {
    // x holds ids [T, B] = [3, 2] over a vocabulary of 4, one repeated: w_ih's gradient
    // is the scatter-add of the gate gradients into the columns of the ids seen.
    let mut rng = Rng::new(15);
    let (t, b, v, h) = (3, 2, 4, 3);
    let mut c = Case::new("lstm on tokens");
    let x = c.leaf("x", &[t, b], vec![2.0, 0.0, 2.0, 3.0, 0.0, 2.0], false);
    let out = lstm_on(&mut c, x, (b, v, h), None, &mut rng);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}

#[test]
fn dropout_with_a_fixed_key_at_two_sites_then_tanh() {
    let mut rng = Rng::new(12);
    let mut c = Case::new("dropout");
    let x = c.random("x", &[5, 2, 3], &mut rng);
    let key = c.leaf("key", &[2], key_input(step_key(3, 9)).to_vec(), false);
    for (site, offset) in [(0, 0), (1, 30)] {
        let p = DropoutParams {
            p: 0.4,
            site,
            offset,
        };
        let y = c
            .graph
            .apply("drop", Op::Dropout(p), DropoutInputs { x, key });
        let act = Op::Activation(Activation::Tanh);
        let t = c
            .graph
            .apply("tanh", act, ActivationInputs { x: y.unwrap().y });
        c.outputs.push(t.unwrap().y);
    }
    c.run(&mut rng);
}
