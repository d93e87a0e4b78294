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

mod gradcheck_case;

use tensorfit_core::args::{
    ActivationInputs, BatchNormInputs, BinaryInputs, ConcatFeaturesInputs, DropoutInputs,
    EmbeddingInputs, FoldTimeInputs, LayerNormInputs, MatMulInputs, MaxTimeInputs, MeanTimeInputs,
    MeanVar, MseLossInputs, ReshapeInputs, ReverseTimeInputs, SliceFeaturesInputs, SliceTimeInputs,
    SoftmaxCrossEntropyInputs, UnfoldTimeInputs,
};
use tensorfit_core::dropout::{key_input, step_key};
use tensorfit_core::{Activation, BinaryOp, ConvTaps, DropoutParams, Op, Shape};
use tensorfit_testing::Rng;

use gradcheck_case::*;

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
        Activation::Gelu,
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

#[test]
fn reverse_time_whole_and_at_lengths_from_zero_to_all_steps() {
    let mut rng = Rng::new(15);
    for lengths in [None, Some(vec![3.0, 0.0, 1.0, 2.0])] {
        let mut c = Case::new("reverse_time");
        let x = c.random("x", &[3, 4, 3], &mut rng);
        let lengths = lengths.map(|l| c.leaf("lengths", &[4], l, false));
        let inputs = ReverseTimeInputs { x, lengths };
        let y = c.graph.apply("reversed", Op::ReverseTime, inputs);
        c.outputs.push(y.unwrap().y);
        c.run(&mut rng);
    }
}

#[test]
fn concat_features_of_two_sequences() {
    let mut rng = Rng::new(16);
    let mut c = Case::new("concat_features");
    let a = c.random("a", &[2, 3, 2], &mut rng);
    let b = c.random("b", &[2, 3, 3], &mut rng);
    let out = c
        .graph
        .apply("both", Op::ConcatFeatures, ConcatFeaturesInputs { a, b });
    c.outputs.push(out.unwrap().out);
    c.run(&mut rng);
}

#[test]
fn slice_features_at_the_start_middle_end_and_whole() {
    let mut rng = Rng::new(17);
    for (start, width) in [(0, 2), (1, 3), (3, 2), (0, 5)] {
        let mut c = Case::new("slice_features");
        let x = c.random("x", &[3, 2, 5], &mut rng);
        let op = Op::SliceFeatures { start, width };
        let out = c.graph.apply("part", op, SliceFeaturesInputs { x });
        c.outputs.push(out.unwrap().out);
        c.run(&mut rng);
    }
}

#[test]
fn mean_time_whole_and_at_lengths_from_zero_to_all_steps() {
    let mut rng = Rng::new(18);
    for lengths in [None, Some(vec![3.0, 0.0, 1.0, 2.0])] {
        let mut c = Case::new("mean_time");
        let x = c.random("x", &[3, 4, 3], &mut rng);
        let lengths = lengths.map(|l| c.leaf("lengths", &[4], l, false));
        let inputs = MeanTimeInputs { x, lengths };
        let out = c.graph.apply("mean", Op::MeanTime, inputs);
        c.outputs.push(out.unwrap().out);
        c.run(&mut rng);
    }
}

#[test]
fn max_time_at_lengths_from_zero_to_all_steps_without_ties() {
    // Along time each (row, feature) holds a permutation of the steps, spaced 0.2 apart,
    // plus noise of at most 0.03: no two values within the difference step of each other,
    // so every maximum stays where it is when one value moves by H.
    let mut rng = Rng::new(19);
    let (steps, batch, width) = (4, 4, 3);
    for lengths in [None, Some(vec![4.0, 0.0, 1.0, 3.0])] {
        let mut c = Case::new("max_time");
        let noise = rng.normals(steps * batch * width, 0.01);
        let mut values = Vec::new();
        for t in 0..steps {
            for b in 0..batch {
                for f in 0..width {
                    let rank = (t * 3 + b * 5 + f * 7) % steps;
                    let k = values.len();
                    values.push(0.2 * rank as f32 - 0.3 + noise[k].clamp(-0.03, 0.03));
                }
            }
        }
        let x = c.leaf("x", &[steps, batch, width], values, true);
        let lengths = lengths.map(|l| c.leaf("lengths", &[batch], l, false));
        let inputs = MaxTimeInputs { x, lengths };
        let out = c.graph.apply("max", Op::MaxTime, inputs);
        // `at` is an index: only `out` is seeded.
        c.outputs.push(out.unwrap().out);
        c.run(&mut rng);
    }
}

#[test]
fn unfold_and_fold_time_causal_same_and_dilated_at_lengths_from_zero_to_all_steps() {
    let mut rng = Rng::new(20);
    let taps = |kernel, dilation, left| ConvTaps {
        kernel,
        dilation,
        left,
    };
    for taps in [taps(3, 1, 2), taps(3, 2, 2), taps(2, 1, 0), taps(1, 1, 0)] {
        for lengths in [None, Some(vec![4.0, 0.0, 1.0, 3.0])] {
            let mut c = Case::new("unfold_time");
            let x = c.random("x", &[4, 4, 2], &mut rng);
            let lengths = lengths.map(|l| c.leaf("lengths", &[4], l, false));
            let inputs = UnfoldTimeInputs { x, lengths };
            let cols = c.graph.apply("cols", taps.unfold(), inputs).unwrap().cols;
            // A FoldTime beside it, differentiated by UnfoldTime with respect to dcols.
            let inputs = FoldTimeInputs {
                dcols: c.random("dcols", &[4, 4, 2 * taps.kernel], &mut rng),
                lengths,
            };
            let dx = c.graph.apply("folded", taps.fold(), inputs).unwrap().dx;
            c.outputs.extend([cols, dx]);
            c.run(&mut rng);
        }
    }
}

#[test]
fn a_convolution_over_time_from_unfold_reshape_matmul_and_a_bias() {
    // y = tanh(UnfoldTime(x) · Reshape(weight [Cout, Cin, K] → [Cout, Cin·K])ᵀ + bias), as
    // a Conv1d layer builds it: the gradients of x, the weight (through Reshape) and bias.
    let mut rng = Rng::new(21);
    let mut c = Case::new("conv1d");
    let x = c.random("x", &[5, 3, 2], &mut rng);
    let weight = c.random("weight", &[4, 2, 3], &mut rng);
    let bias = c.random("bias", &[4], &mut rng);
    let lengths = Some(c.leaf("lengths", &[3], vec![5.0, 2.0, 0.0], false));
    let taps = ConvTaps {
        kernel: 3,
        dilation: 2,
        left: 2,
    };
    let g = &mut c.graph;
    let cols = g.apply("cols", taps.unfold(), UnfoldTimeInputs { x, lengths });
    let shape = Shape::from([4, 6]);
    let w = g.apply("w", Op::Reshape { shape }, ReshapeInputs { x: weight });
    let op = Op::MatMul {
        trans_a: false,
        trans_b: true,
    };
    let inputs = MatMulInputs {
        a: cols.unwrap().cols,
        b: w.unwrap().out,
    };
    let z = g.apply("z", op, inputs).unwrap().c;
    let add = Op::Binary(BinaryOp::Add);
    let zb = g
        .apply("zb", add, BinaryInputs { a: z, b: bias })
        .unwrap()
        .out;
    let tanh = Op::Activation(Activation::Tanh);
    let y = g.apply("y", tanh, ActivationInputs { x: zb }).unwrap().y;
    c.outputs.push(y);
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
fn layernorm_over_every_step() {
    let mut rng = Rng::new(12);
    let mut c = Case::new("layernorm over [T, B, F]");
    let x = c.random("x", &[3, 2, 4], &mut rng);
    let gamma = c.leaf("gamma", &[4], vec![0.8, 1.2, -0.6, 1.5], true);
    let beta = c.random("beta", &[4], &mut rng);
    let inputs = LayerNormInputs { x, gamma, beta };
    let outs = c
        .graph
        .apply("ln", Op::LayerNorm { eps: 1e-5 }, inputs)
        .unwrap();
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
