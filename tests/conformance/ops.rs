//! Every op on random inputs, on the device and on the CPU, compared output by output.
//!
//! Each case places its tensors in one arena buffer at offsets aligned to the device's
//! `alignment_bytes` (as the planner does), with a gap between tensors, pre-fills the
//! outputs with NaN (update ops: with their old values), runs the op and reads every
//! output back. [`variant`] matches `Op` exhaustively, so a new op does not compile here
//! until it has a case, and the test asserts that every variant ran.

use tensorfit::core::{
    Activation, AdamParams, Backend, BinaryOp, Error, HostTensor, Op, SgdParams, Shape, TensorView,
};

use tensorfit_testing::{Rng, TestRng};

use crate::{reference, Checks, OP_TOL};

#[path = "attention_cases.rs"]
mod attention_cases;
#[path = "bidir_cases.rs"]
mod bidir_cases;
#[path = "conv_cases.rs"]
mod conv_cases;
#[path = "dropout_cases.rs"]
mod dropout_cases;
#[path = "gru_cases.rs"]
mod gru_cases;
#[path = "mse_cases.rs"]
mod mse_cases;
#[path = "pool_cases.rs"]
mod pool_cases;
#[path = "positions_cases.rs"]
mod positions_cases;
#[path = "rows_cases.rs"]
mod rows_cases;

/// Test tensors drawn from the project's generator.
pub(crate) trait Tensors {
    fn tensor(&mut self, shape: &[usize], scale: f32) -> HostTensor;
    /// Values in (lo, hi).
    fn between(&mut self, shape: &[usize], lo: f32, hi: f32) -> HostTensor;
    fn labels(&mut self, rows: usize, classes: usize) -> HostTensor;
}

impl Tensors for Rng {
    fn tensor(&mut self, shape: &[usize], scale: f32) -> HostTensor {
        let n = shape.iter().product();
        let data = (0..n).map(|_| self.signed() * scale).collect();
        HostTensor::new(Shape::new(shape), data).unwrap()
    }

    fn between(&mut self, shape: &[usize], lo: f32, hi: f32) -> HostTensor {
        let mut t = self.tensor(shape, 1.0);
        t.data
            .iter_mut()
            .for_each(|v| *v = lo + (*v + 1.0) * 0.5 * (hi - lo));
        t
    }

    fn labels(&mut self, rows: usize, classes: usize) -> HostTensor {
        let data = (0..rows)
            .map(|_| self.range(0, classes - 1) as f32)
            .collect();
        HostTensor::new([rows], data).unwrap()
    }
}

/// One op call: its inputs, and for update ops the targets' values before the update.
pub(crate) struct Case {
    name: String,
    op: Op,
    inputs: Vec<HostTensor>,
    targets: Vec<HostTensor>,
}

pub(crate) fn case(name: impl Into<String>, op: Op, inputs: Vec<HostTensor>) -> Case {
    Case {
        name: name.into(),
        op,
        inputs,
        targets: Vec::new(),
    }
}

/// The index of the op's variant; exhaustive, so a new op needs a case here.
fn variant(op: &Op) -> usize {
    match op {
        Op::MatMul { .. } => 0,
        Op::Binary(_) => 1,
        Op::Activation(_) => 2,
        Op::ActivationBackward(_) => 3,
        Op::SumToShape { .. } => 4,
        Op::Fill { .. } => 5,
        Op::SliceTime { .. } => 6,
        Op::ScatterTime { .. } => 7,
        Op::LstmForward { .. } => 8,
        Op::LstmBackward { .. } => 9,
        Op::BatchNorm { .. } => 10,
        Op::BatchNormBackward { .. } => 11,
        Op::BatchNormStatsUpdate { .. } => 12,
        Op::SoftmaxCrossEntropy => 13,
        Op::SoftmaxCrossEntropyBackward => 14,
        Op::Adam(_) => 15,
        Op::Copy => 16,
        Op::Embedding => 17,
        Op::EmbeddingBackward { .. } => 18,
        Op::GruForward { .. } => 19,
        Op::GruBackward { .. } => 20,
        Op::Sgd(_) => 21,
        Op::SumSquares => 22,
        Op::ClipGrad { .. } => 23,
        Op::MseLoss => 24,
        Op::MseLossBackward => 25,
        Op::Dropout(_) => 26,
        Op::LayerNorm { .. } => 27,
        Op::LayerNormBackward => 28,
        Op::ReverseTime => 29,
        Op::ConcatFeatures => 30,
        Op::SliceFeatures { .. } => 31,
        Op::MeanTime => 32,
        Op::MeanTimeBackward { .. } => 33,
        Op::MaxTime => 34,
        Op::MaxTimeBackward { .. } => 35,
        Op::UnfoldTime { .. } => 36,
        Op::FoldTime { .. } => 37,
        Op::Reshape { .. } => 38,
        Op::AddTimeRows => 39,
        Op::SumBatchToRows { .. } => 40,
        Op::Sinusoids { .. } => 41,
        Op::AttentionScores { .. } => 42,
        Op::AttentionScoresBackward { .. } => 43,
        Op::AttentionMix { .. } => 44,
        Op::AttentionMixBackward { .. } => 45,
    }
}
const VARIANTS: usize = 46;

const ACTIVATIONS: [Activation; 5] = [
    Activation::Identity,
    Activation::Relu,
    Activation::Tanh,
    Activation::Sigmoid,
    Activation::Gelu,
];

fn cases() -> Vec<Case> {
    let mut r = Rng::new(2024);
    let mut v = Vec::new();
    // Matrix products, every transpose, small and several tiles large.
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        for (m, k, n) in [
            (r.range(1, 9), r.range(1, 40), r.range(1, 20)),
            (r.range(20, 70), r.range(1, 90), r.range(20, 70)),
            // Several tiles each way; with both operands transposed a shorter k keeps
            // the 1 KiB-binding variant's thousands of blocks to a second.
            (130, if ta && tb { 20 } else { 70 }, 150),
        ] {
            let a = if ta { [k, m] } else { [m, k] };
            let b = if tb { [n, k] } else { [k, n] };
            let op = Op::MatMul {
                trans_a: ta,
                trans_b: tb,
            };
            let inputs = vec![r.tensor(&a, 1.0), r.tensor(&b, 1.0)];
            v.push(case(format!("matmul {m}x{k}x{n} t({ta},{tb})"), op, inputs));
        }
    }
    // Elementwise, with a broadcast suffix.
    for bop in [BinaryOp::Add, BinaryOp::Mul] {
        for (a, b) in [
            (vec![4, 5, 6], vec![6]),
            (vec![4, 5, 6], vec![5, 6]),
            (vec![7, 3], vec![7, 3]),
            (vec![300, 1], vec![1]),
        ] {
            let inputs = vec![r.tensor(&a, 2.0), r.tensor(&b, 2.0)];
            v.push(case(
                format!("binary {bop:?} {a:?} {b:?}"),
                Op::Binary(bop),
                inputs,
            ));
        }
    }
    for f in ACTIVATIONS {
        let mut x = r.tensor(&[37, 29], 6.0);
        // Saturated tails: tanh and sigmoid must stay finite and exact there.
        x.data[..6].copy_from_slice(&[30.0, -30.0, 100.0, -100.0, 1e-4, -1e-4]);
        let y = HostTensor::new(
            x.shape.clone(),
            x.data.iter().map(|&t| f.apply(t)).collect(),
        )
        .unwrap();
        v.push(case(
            format!("activation {}", f.name()),
            Op::Activation(f),
            vec![x.clone()],
        ));
        let dy = r.tensor(&[37, 29], 1.0);
        let op = Op::ActivationBackward(f);
        // GELU's derivative reads x too.
        let mut inputs = vec![y, dy];
        inputs.extend(f.needs_input().then_some(x));
        v.push(case(
            format!("activation_backward {}", f.name()),
            op,
            inputs,
        ));
    }
    for (x, out) in [
        (vec![6, 7, 9], vec![9]),
        (vec![6, 7, 9], vec![7, 9]),
        (vec![300, 5], vec![5]),
        (vec![3, 4], vec![3, 4]),
    ] {
        let op = Op::SumToShape {
            shape: Shape::new(&out),
        };
        v.push(case(
            format!("sum_to_shape {x:?}"),
            op,
            vec![r.tensor(&x, 1.0)],
        ));
    }
    let fill = Op::Fill {
        value: 0.75,
        shape: Shape::from([33, 7]),
    };
    v.push(case("fill", fill, vec![]));
    for t in [0, 4] {
        let x = r.tensor(&[5, 4, 3], 1.0);
        v.push(case(
            format!("slice_time {t}"),
            Op::SliceTime { t },
            vec![x],
        ));
    }
    for (t, steps) in [(2, 5), (0, 1)] {
        let op = Op::ScatterTime { t, steps };
        v.push(case(
            format!("scatter_time {t}/{steps}"),
            op,
            vec![r.tensor(&[4, 3], 1.0)],
        ));
    }
    lstm_cases(&mut r, &mut v);
    gru_cases::gru_cases(&mut r, &mut v);
    mse_cases::mse_cases(&mut r, &mut v);
    rows_cases::rows_cases(&mut r, &mut v);
    dropout_cases::dropout_cases(&mut r, &mut v);
    batchnorm_cases(&mut r, &mut v);
    layernorm_cases(&mut r, &mut v);
    bidir_cases::bidir_cases(&mut r, &mut v);
    pool_cases::pool_cases(&mut r, &mut v);
    conv_cases::conv_cases(&mut r, &mut v);
    positions_cases::positions_cases(&mut r, &mut v);
    for (rows, k) in [(16, 6), (300, 5), (1, 2)] {
        let logits = r.tensor(&[rows, k], 3.0);
        let labels = r.labels(rows, k);
        let op = Op::SoftmaxCrossEntropy;
        v.push(case(
            format!("softmax {rows}x{k}"),
            op,
            vec![logits.clone(), labels.clone()],
        ));
        let probs = softmax(&logits, k);
        let dloss = HostTensor::new([1], vec![1.3]).unwrap();
        let op = Op::SoftmaxCrossEntropyBackward;
        v.push(case(
            format!("softmax_backward {rows}x{k}"),
            op,
            vec![probs, labels, dloss],
        ));
    }
    for (n, wd) in [(257, 0.01), (5, 0.0)] {
        let adam = tensorfit::nn::AdamConfig::default();
        // AdamW's decay factor 0.999 as the third scalar.
        let s = adam.scalars(3, 1e-2, 0.1);
        let op = Op::Adam(AdamParams {
            beta1: adam.beta1,
            beta2: adam.beta2,
            eps: adam.eps,
            weight_decay: wd,
        });
        let mut c = case(
            format!("adam {n}"),
            op,
            vec![
                r.tensor(&[n], 0.1),
                HostTensor::new([3], s.to_vec()).unwrap(),
            ],
        );
        c.targets = vec![
            r.tensor(&[n], 1.0),
            r.tensor(&[n], 0.01),
            r.between(&[n], 0.0, 1e-3),
        ];
        v.push(c);
    }
    optim_cases(&mut r, &mut v);
    let mut c = case("copy", Op::Copy, vec![r.tensor(&[19, 3], 1.0)]);
    c.targets = vec![r.tensor(&[19, 3], 1.0)];
    v.push(c);
    crate::tokens::token_cases(&mut r, &mut v);
    crate::lengths::length_cases(&mut r, &mut v);
    attention_cases::attention_cases(&mut r, &mut v);
    v
}

/// Random `x [T, B, I]`, `h0`, `c0 [B, H]`, `w_ih [4H, I]` and `w_hh [4H, H]` of an LSTM
/// layer (the first inputs of `Op::LstmForward`, in its order).
pub(crate) fn lstm_layer(
    r: &mut Rng,
    (t, b, i, h): (usize, usize, usize, usize),
) -> [HostTensor; 5] {
    [
        r.tensor(&[t, b, i], 1.0),
        r.tensor(&[b, h], 1.0),
        r.tensor(&[b, h], 1.0),
        r.tensor(&[4 * h, i], 0.5),
        r.tensor(&[4 * h, h], 0.5),
    ]
}

fn lstm_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // T = 37: an inference pass holds gates for LSTM_SCRATCH_STEPS steps and projects
    // its inputs in chunks of that many, the last one short.
    let mut dims = vec![(4, 20, 17, 33), (1, 1, 1, 1), (3, 5, 0, 4), (37, 3, 5, 7)];
    for _ in 0..3 {
        dims.push((r.range(1, 6), r.range(1, 5), r.range(1, 7), r.range(1, 9)));
    }
    for (t, b, i, h) in dims {
        let params = lstm_layer(r, (t, b, i, h));
        for keep in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend([r.tensor(&[4 * h], 0.5), r.tensor(&[4 * h], 0.5)]);
            let op = Op::LstmForward {
                keep_for_backward: keep,
            };
            v.push(case(
                format!("lstm_forward T{t} B{b} I{i} H{h} keep {keep}"),
                op,
                inputs,
            ));
        }
        for input_grad in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend(lstm_backward_rest(r, (t, b, h)));
            let op = Op::LstmBackward { input_grad };
            let name = format!("lstm_backward T{t} B{b} I{i} H{h} dx {input_grad}");
            v.push(case(name, op, inputs));
        }
    }
}

/// Random inputs of `lstm_backward` after the first five: the forward's `y`, `gates`
/// (activated, in (0, 1)) and `cells`, and the gradients `dy`, `dh_n`, `dc_n`.
pub(crate) fn lstm_backward_rest(r: &mut Rng, (t, b, h): (usize, usize, usize)) -> [HostTensor; 6] {
    [
        r.tensor(&[t, b, h], 1.0),
        r.between(&[t, b, 4 * h], 0.0, 1.0),
        r.tensor(&[t, b, h], 2.0),
        r.tensor(&[t, b, h], 1.0),
        r.tensor(&[b, h], 1.0),
        r.tensor(&[b, h], 1.0),
    ]
}

fn batchnorm_cases(r: &mut Rng, v: &mut Vec<Case>) {
    for (b, c) in [(16, 10), (3, 300), (100, 7)] {
        let x = r.tensor(&[b, c], 2.0);
        let (gamma, beta) = (r.tensor(&[c], 1.5), r.tensor(&[c], 1.0));
        let (mean, var) = (r.tensor(&[c], 0.5), r.between(&[c], 0.1, 2.0));
        let eps = 1e-5;
        for training in [true, false] {
            let mut inputs = vec![x.clone(), gamma.clone(), beta.clone()];
            if !training {
                inputs.extend([mean.clone(), var.clone()]);
            }
            let op = Op::BatchNorm { eps, training };
            v.push(case(
                format!("batchnorm {b}x{c} training {training}"),
                op,
                inputs,
            ));
            let inputs = vec![
                x.clone(),
                gamma.clone(),
                mean.clone(),
                var.clone(),
                r.tensor(&[b, c], 1.0),
            ];
            let op = Op::BatchNormBackward { eps, training };
            v.push(case(
                format!("batchnorm_backward {b}x{c} training {training}"),
                op,
                inputs,
            ));
        }
        let op = Op::BatchNormStatsUpdate {
            momentum: 0.1,
            unbias: b as f32 / (b as f32 - 1.0),
        };
        let mut u = case(format!("batchnorm_stats_update {c}"), op, vec![mean, var]);
        u.targets = vec![r.tensor(&[c], 1.0), r.between(&[c], 0.5, 1.5)];
        v.push(u);
    }
}

/// Rows of one to 300 features, more rows than a 1 KiB binding holds, and every step's
/// rows `[T, B, F]`.
fn layernorm_cases(r: &mut Rng, v: &mut Vec<Case>) {
    for dims in [&[16, 10][..], &[3, 200], &[100, 7], &[5, 4, 6], &[2, 1]] {
        let (f, rows) = (dims[dims.len() - 1], &dims[..dims.len() - 1]);
        let (gamma, beta) = (r.tensor(&[f], 1.5), r.tensor(&[f], 1.0));
        let x = r.tensor(dims, 2.0);
        let op = Op::LayerNorm { eps: 1e-5 };
        let inputs = vec![x.clone(), gamma.clone(), beta];
        v.push(case(format!("layernorm {dims:?}"), op, inputs));
        let (mean, rstd) = (r.tensor(rows, 0.5), r.between(rows, 0.5, 2.0));
        let inputs = vec![x, gamma, mean, rstd, r.tensor(dims, 1.0)];
        let name = format!("layernorm_backward {dims:?}");
        v.push(case(name, Op::LayerNormBackward, inputs));
    }
}

fn softmax(logits: &HostTensor, k: usize) -> HostTensor {
    let mut p = logits.clone();
    for row in p.data.chunks_mut(k) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        row.iter_mut().for_each(|v| *v = (*v - max).exp());
        let sum: f32 = row.iter().sum();
        row.iter_mut().for_each(|v| *v /= sum);
    }
    p
}

/// Runs one case on `backend`; returns every output (update ops: every target).
pub(crate) fn run(backend: &mut dyn Backend, c: &Case) -> Result<Vec<Vec<f32>>, Error> {
    let in_shapes: Vec<&Shape> = c.inputs.iter().map(|t| &t.shape).collect();
    let out_shapes = if c.op.is_update() {
        c.targets.iter().map(|t| t.shape.clone()).collect()
    } else {
        c.op.infer_shapes(&in_shapes).map_err(Error::input)?
    };
    let align = (backend.info().alignment_bytes / 4).max(1) as usize;
    let mut end = 0;
    let mut place = |len: usize| {
        let at = end;
        end = (at + len).div_ceil(align) * align + align;
        at
    };
    let in_at: Vec<usize> = c.inputs.iter().map(|t| place(t.numel())).collect();
    let out_at: Vec<usize> = out_shapes.iter().map(|s| place(s.numel())).collect();
    let arena = backend.allocate(end as u64 * 4)?;
    let view = |offset: usize, shape: &Shape| TensorView::at(arena, offset, shape.clone());
    let ins: Vec<TensorView> = c
        .inputs
        .iter()
        .zip(&in_at)
        .map(|(t, &o)| view(o, &t.shape))
        .collect();
    let outs: Vec<TensorView> = out_shapes
        .iter()
        .zip(&out_at)
        .map(|(s, &o)| view(o, s))
        .collect();
    for (v, t) in ins.iter().zip(&c.inputs) {
        backend.write(v, &t.data)?;
    }
    for (k, v) in outs.iter().enumerate() {
        match c.targets.get(k) {
            Some(t) => backend.write(v, &t.data)?,
            None => backend.write(v, &vec![f32::NAN; v.len()])?,
        }
    }
    backend.execute(&c.op, &ins, &outs)?;
    let mut results = Vec::new();
    for v in &outs {
        let mut out = vec![0.0; v.len()];
        backend.read(v, &mut out)?;
        results.push(out);
    }
    backend.free(arena)?;
    Ok(results)
}

/// Every case on `device` and on the CPU.
pub fn run_all(device: &mut dyn Backend, checks: &mut Checks) {
    let mut cpu = reference();
    let mut seen = [false; VARIANTS];
    for c in cases() {
        seen[variant(&c.op)] = true;
        let want = run(cpu.as_mut(), &c).unwrap_or_else(|e| panic!("{} on the CPU: {e}", c.name));
        let got = run(device, &c).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let labels = if c.op.is_update() {
            vec!["target"; want.len()]
        } else {
            c.op.output_labels().to_vec()
        };
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if c.op.output_is_scratch(k) {
                continue;
            }
            let label = labels.get(k).copied().unwrap_or("out");
            checks.close(&format!("{} {label}", c.name), g, w, OP_TOL);
        }
    }
    let missing: Vec<usize> = (0..VARIANTS).filter(|&i| !seen[i]).collect();
    assert!(
        missing.is_empty(),
        "op variants without a case: {missing:?}"
    );
}

/// SGD (plain, momentum with dampening's weight, Nesterov) and clipping (by norm, by
/// value, both), at sizes that split into several launches with 1 KiB bindings.
fn optim_cases(r: &mut Rng, v: &mut Vec<Case>) {
    for (n, momentum, nesterov, weight) in [
        (5, 0.0, false, 1.0),
        (1000, 0.9, false, 0.7),
        (257, 0.9, true, 1.0),
    ] {
        let op = Op::Sgd(SgdParams {
            momentum,
            nesterov,
            weight_decay: 0.01,
        });
        let scalars = HostTensor::new([2], vec![0.05, weight]).unwrap();
        let mut c = case(
            format!("sgd {n} m={momentum} nesterov={nesterov}"),
            op,
            vec![r.tensor(&[n], 0.1), scalars],
        );
        c.targets = vec![r.tensor(&[n], 1.0), r.tensor(&[n], 0.1)];
        v.push(c);
    }
    for shape in [vec![1], vec![37, 29], vec![3000]] {
        v.push(case(
            format!("sum_squares {shape:?}"),
            Op::SumSquares,
            vec![r.tensor(&shape, 1.0)],
        ));
    }
    for (max_norm, value, total) in [
        (1.0, f32::INFINITY, 40.0),
        (100.0, f32::INFINITY, 40.0),
        (f32::INFINITY, 0.3, 0.0),
        (2.0, 0.05, 9.0),
    ] {
        let inputs = vec![
            r.tensor(&[700], 1.0),
            HostTensor::new([1], vec![total]).unwrap(),
        ];
        v.push(case(
            format!("clip_grad norm {max_norm} value {value}"),
            Op::ClipGrad { max_norm, value },
            inputs,
        ));
    }
}
