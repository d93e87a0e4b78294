//! Graph builders for the stacked-LSTM classifier.
//!
//! Each function adds nodes to a [`Graph`] and returns the ids a caller needs. The same
//! builders serve training, evaluation and the finite-difference tests, so what is
//! checked is what runs. Sequences are time-major (`[T, B, F]`), as in PyTorch's
//! `nn.LSTM`.

use tensorfit_core::args::{
    ActivationInputs, BatchNormInputs, BinaryInputs, CopyInputs, CopyTargets, LstmForwardInputs,
    LstmForwardOutputs, MatMulInputs, MeanVar, SliceTimeInputs, SoftmaxCrossEntropyInputs,
};
use tensorfit_core::{Activation, BinaryOp, Error, Graph, Op, Result, Shape, TensorId};

use crate::config::{ModelConfig, ParamKind};

/// Tensors by name (PyTorch's parameter names).
pub type Named = Vec<(String, TensorId)>;

/// Training (batch statistics, activations kept for backward) or inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Train,
    Infer,
}

/// BatchNorm's epsilon and momentum, as PyTorch's defaults.
pub const BN_EPS: f32 = 1e-5;
pub const BN_MOMENTUM: f32 = 0.1;

/// The LSTM layers: inputs, per-layer state and outputs.
#[derive(Debug, Clone)]
pub struct LstmStack {
    /// `[T, B, input]`, written by the host.
    pub x: TensorId,
    /// Initial state of each layer (`state.h_l{k}`, `state.c_l{k}`), persistent.
    pub h0: Vec<TensorId>,
    pub c0: Vec<TensorId>,
    /// Final state of each layer.
    pub h_n: Vec<TensorId>,
    pub c_n: Vec<TensorId>,
    /// Output sequence of the top layer, `[T, B, H]`.
    pub y: TensorId,
}

/// The whole classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    pub stack: LstmStack,
    /// `[B]`, class indices as f32.
    pub labels: TensorId,
    /// Mean cross-entropy, `[1]`.
    pub loss: TensorId,
    /// Softmax probabilities, `[B, classes]`.
    pub probs: TensorId,
    /// Every trainable parameter, by PyTorch name.
    pub params: Named,
    /// Running statistics (`bn1.running_mean`, ...), persistent state.
    pub running: Named,
    /// In training: (BatchNorm name, batch mean, batch variance).
    pub batch_stats: Vec<(String, TensorId, TensorId)>,
}

/// Adds the model's parameter and running-statistic leaves, in `param_specs` order.
pub(crate) fn leaves(g: &mut Graph, cfg: &ModelConfig) -> (Named, Named) {
    let mut params = Vec::new();
    let mut running = Vec::new();
    for spec in cfg.param_specs() {
        match spec.kind {
            ParamKind::Trainable => {
                params.push((spec.name.clone(), g.parameter(&spec.name, spec.shape)))
            }
            ParamKind::RunningStat => {
                running.push((spec.name.clone(), g.state(&spec.name, spec.shape)))
            }
        }
    }
    (params, running)
}

pub(crate) fn find(list: &[(String, TensorId)], name: &str) -> TensorId {
    // Only called with names that `leaves` created from the same config.
    list.iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| *t)
        .unwrap_or(TensorId(usize::MAX))
}

/// Adds `layers` LSTM layers over a `[steps, batch, input]` sequence. With `keep` the
/// layers keep what backward needs.
pub fn lstm_stack(
    g: &mut Graph,
    cfg: &ModelConfig,
    params: &[(String, TensorId)],
    batch: usize,
    steps: usize,
    keep: bool,
) -> Result<LstmStack> {
    let x = g.input("x", input_shape(cfg, batch, steps));
    let mut stack = LstmStack {
        x,
        h0: Vec::new(),
        c0: Vec::new(),
        h_n: Vec::new(),
        c_n: Vec::new(),
        y: x,
    };
    for k in 0..cfg.layers {
        let h0 = g.state(&format!("state.h_l{k}"), [batch, cfg.hidden]);
        let c0 = g.state(&format!("state.c_l{k}"), [batch, cfg.hidden]);
        let outs = lstm_layer(g, &format!("lstm_l{k}"), stack.y, h0, c0, params, k, keep)?;
        stack.h0.push(h0);
        stack.c0.push(c0);
        stack.y = outs.y;
        stack.h_n.push(outs.h_n);
        stack.c_n.push(outs.c_n);
    }
    Ok(stack)
}

/// LSTM layer `k` over `x` from state (`h0`, `c0`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_layer(
    g: &mut Graph,
    name: &str,
    x: TensorId,
    h0: TensorId,
    c0: TensorId,
    params: &[(String, TensorId)],
    k: usize,
    keep: bool,
) -> Result<LstmForwardOutputs<TensorId>> {
    let w = |n: &str| find(params, &format!("lstm.{n}_l{k}"));
    let inputs = LstmForwardInputs {
        x,
        h0,
        c0,
        w_ih: w("weight_ih"),
        w_hh: w("weight_hh"),
        b_ih: w("bias_ih"),
        b_hh: w("bias_hh"),
    };
    let op = Op::LstmForward {
        keep_for_backward: keep,
    };
    g.apply(name, op, inputs)
}

/// A graph that only advances the LSTM state over a chunk of the sequence: the layers
/// in inference form, then a copy of each final state into the persistent initial state,
/// so the next chunk continues where this one stopped.
pub fn carry_graph(cfg: &ModelConfig, batch: usize, steps: usize) -> Result<(Graph, LstmStack)> {
    let mut g = Graph::new();
    let (params, _) = leaves(&mut g, cfg);
    let stack = lstm_stack(&mut g, cfg, &params, batch, steps, false)?;
    for k in 0..cfg.layers {
        for (what, src, dst) in [
            ("h", stack.h_n[k], stack.h0[k]),
            ("c", stack.c_n[k], stack.c0[k]),
        ] {
            let name = format!("carry_{what}_l{k}");
            g.update(&name, Op::Copy, CopyInputs { src }, CopyTargets { dst })?;
        }
    }
    Ok((g, stack))
}

fn batchnorm(
    g: &mut Graph,
    name: &str,
    x: TensorId,
    params: &[(String, TensorId)],
    running: &[(String, TensorId)],
    mode: Mode,
    batch_stats: &mut Vec<(String, TensorId, TensorId)>,
) -> Result<TensorId> {
    let gamma = find(params, &format!("{name}.weight"));
    let beta = find(params, &format!("{name}.bias"));
    let training = mode == Mode::Train;
    let running = (!training).then(|| MeanVar {
        mean: find(running, &format!("{name}.running_mean")),
        var: find(running, &format!("{name}.running_var")),
    });
    let inputs = BatchNormInputs {
        x,
        gamma,
        beta,
        running,
    };
    let op = Op::BatchNorm {
        eps: BN_EPS,
        training,
    };
    let outs = g.apply(name, op, inputs)?;
    if training {
        let stats = outs
            .batch
            .ok_or_else(|| Error::Graph(format!("{name}: no batch statistics")))?;
        batch_stats.push((name.to_string(), stats.mean, stats.var));
    }
    Ok(outs.y)
}

/// `x · Wᵀ + b` (PyTorch's `nn.Linear`).
fn linear(
    g: &mut Graph,
    name: &str,
    x: TensorId,
    params: &[(String, TensorId)],
) -> Result<TensorId> {
    let w = find(params, &format!("{name}.weight"));
    let b = find(params, &format!("{name}.bias"));
    let matmul = Op::MatMul {
        trans_a: false,
        trans_b: true,
    };
    let xw = g.apply(
        &format!("{name}.matmul"),
        matmul,
        MatMulInputs { a: x, b: w },
    )?;
    let add = Op::Binary(BinaryOp::Add);
    let out = g.apply(
        &format!("{name}.bias_add"),
        add,
        BinaryInputs { a: xw.c, b },
    )?;
    Ok(out.out)
}

/// The whole classifier over a `[steps, batch, input]` chunk: LSTM stack, last step,
/// BatchNorm, Dense + activation, BatchNorm, output layer, softmax cross-entropy.
pub fn classifier(
    g: &mut Graph,
    cfg: &ModelConfig,
    batch: usize,
    steps: usize,
    mode: Mode,
) -> Result<Classifier> {
    cfg.validate()?;
    let (params, running) = leaves(g, cfg);
    let stack = lstm_stack(g, cfg, &params, batch, steps, mode == Mode::Train)?;
    let last = g.apply(
        "last_step",
        Op::SliceTime { t: steps - 1 },
        SliceTimeInputs { x: stack.y },
    )?;
    let h = head(g, cfg, last.out, batch, &params, &running, mode)?;
    Ok(Classifier {
        stack,
        labels: h.labels,
        loss: h.loss,
        probs: h.probs,
        params,
        running,
        batch_stats: h.batch_stats,
    })
}

/// The classifier's head and loss.
#[derive(Debug)]
pub(crate) struct Head {
    pub labels: TensorId,
    pub loss: TensorId,
    pub probs: TensorId,
    pub batch_stats: Vec<(String, TensorId, TensorId)>,
}

/// BatchNorm, Dense + activation, BatchNorm, output layer and softmax cross-entropy over
/// the top layer's last step `last` `[B, H]`.
pub(crate) fn head(
    g: &mut Graph,
    cfg: &ModelConfig,
    last: TensorId,
    batch: usize,
    params: &[(String, TensorId)],
    running: &[(String, TensorId)],
    mode: Mode,
) -> Result<Head> {
    let labels = g.input("labels", [batch]);
    let mut batch_stats = Vec::new();
    let h = batchnorm(g, "bn1", last, params, running, mode, &mut batch_stats)?;
    let h = linear(g, "dense", h, params)?;
    let h = match cfg.dense_activation {
        Activation::Identity => h,
        f => {
            let y = g.apply(
                "dense.activation",
                Op::Activation(f),
                ActivationInputs { x: h },
            )?;
            y.y
        }
    };
    let h = batchnorm(g, "bn2", h, params, running, mode, &mut batch_stats)?;
    let logits = linear(g, "out", h, params)?;
    let inputs = SoftmaxCrossEntropyInputs { logits, labels };
    let outs = g.apply("loss", Op::SoftmaxCrossEntropy, inputs)?;
    Ok(Head {
        labels,
        loss: outs.loss,
        probs: outs.probs,
        batch_stats,
    })
}

/// The shape of one minibatch's input for a chunk of `steps` time steps.
pub fn input_shape(cfg: &ModelConfig, batch: usize, steps: usize) -> Shape {
    Shape::from([steps, batch, cfg.input])
}
