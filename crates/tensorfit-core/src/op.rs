//! The op set: what a graph node computes, as data.
//!
//! Every backend matches on [`Op`] exhaustively, so adding a variant is a compile error in
//! each backend until its kernel exists. The set is deliberately small and coarse (a whole
//! LSTM sequence is one op): coarse ops are where speed comes from, and each one is a
//! kernel of the same name in every backend (`Op::name`).
//!
//! Conventions shared by all ops:
//! - tensors are row-major and contiguous, `f32`;
//! - sequences are time-major, `[T, B, F]` (PyTorch's `nn.LSTM` default), so that one time
//!   step is one contiguous `[B, F]` block;
//! - an op writes only its outputs. *Update ops* (`Adam`, `BatchNormStatsUpdate`, `Copy`)
//!   are the exception: their outputs are existing tensors (parameters, optimizer state,
//!   running statistics, carried state) which they read and overwrite in place. The
//!   schedule runs an update after every other reader of its targets.

use crate::shape::Shape;

/// Pointwise nonlinearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    Identity,
    Relu,
    Tanh,
    Sigmoid,
}

impl Activation {
    /// f(x).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => sigmoid(x),
        }
    }

    /// f'(x) written in terms of y = f(x), so backward needs only the output.
    pub fn derivative_from_output(self, y: f32) -> f32 {
        match self {
            Activation::Identity => 1.0,
            Activation::Relu => {
                if y > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Activation::Tanh => 1.0 - y * y,
            Activation::Sigmoid => y * (1.0 - y),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Identity => "identity",
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
        }
    }
}

/// The logistic function, written to stay finite for large |x|.
pub fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// Elementwise binary operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Mul,
}

impl BinaryOp {
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Mul => a * b,
        }
    }
}

/// What a node computes. Inputs and outputs are listed in order for each variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `c = op(a) · op(b)`. Inputs `a` `[M, K]` (`[K, M]` if `trans_a`), `b` `[K, N]`
    /// (`[N, K]` if `trans_b`). Output `c` `[M, N]`.
    MatMul { trans_a: bool, trans_b: bool },

    /// `out = a ∘ b` elementwise. Inputs `a`, `b` where `b`'s shape is a suffix of `a`'s
    /// (`b` is repeated over `a`'s leading dimensions: a bias row). Output has `a`'s shape.
    Binary(BinaryOp),

    /// `y = f(x)`. Input `x`, output `y` of the same shape.
    Activation(Activation),

    /// Inputs `y` (the forward output), `dy`; output `dx = dy · f'(x)`.
    ActivationBackward(Activation),

    /// Sums over leading dimensions. Input `x` whose shape ends with `shape`; output of
    /// `shape` with `out[j] = Σ_i x[i, j]`. The gradient of a broadcast `Binary` operand.
    SumToShape { shape: Shape },

    /// No inputs; output of `shape` with every element `value`.
    Fill { value: f32, shape: Shape },

    /// Input `x` `[T, B, F]`; output `x[t]` `[B, F]` (for example the last time step).
    SliceTime { t: usize },

    /// Input `x` `[B, F]`; output `[steps, B, F]`, zero except `out[t] = x`. The gradient
    /// of `SliceTime`.
    ScatterTime { t: usize, steps: usize },

    /// A whole LSTM layer over a sequence, with PyTorch's gate order (i, f, g, o):
    /// `gates_t = x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh`,
    /// `c_t = σ(f) c_{t-1} + σ(i) tanh(g)`, `h_t = σ(o) tanh(c_t)`.
    ///
    /// Inputs: `x` `[T, B, I]`, `h0` `[B, H]`, `c0` `[B, H]`, `w_ih` `[4H, I]`,
    /// `w_hh` `[4H, H]`, `b_ih` `[4H]`, `b_hh` `[4H]`.
    /// Outputs: `y` `[T, B, H]` (every `h_t`), `h_n` `[B, H]`, `c_n` `[B, H]`,
    /// `gates` `[T, B, 4H]` (activated: σ(i), σ(f), tanh(g), σ(o)), and, if
    /// `keep_for_backward`, `cells` `[T, B, H]` (every `c_t`).
    ///
    /// Kernels compute the input projection of all steps as one GEMM into `gates`, then per
    /// step one GEMM `h_{t-1} W_hhᵀ` accumulated into `gates[t]` and one fused pass for the
    /// nonlinearities and the cell update. Without `keep_for_backward`, `gates` is only
    /// that working space and dies at once: its contents afterwards are unspecified
    /// ([`Op::output_is_scratch`]), so a kernel may reuse a few steps of it instead of
    /// writing all of them (the CPU backend's fast path does: inference 4-5% faster).
    LstmForward { keep_for_backward: bool },

    /// Gradient of [`Op::LstmForward`] (with `keep_for_backward`).
    ///
    /// Inputs: `x`, `h0`, `c0`, `w_ih`, `w_hh`, `y`, `gates`, `cells` (as in the forward),
    /// `dy` `[T, B, H]`, `dh_n` `[B, H]`, `dc_n` `[B, H]`.
    /// Outputs: `dgates` `[T, B, 4H]` (pre-activation gate gradients; working space),
    /// `dh0`, `dc0` `[B, H]`, `dw_ih` `[4H, I]`, `dw_hh` `[4H, H]`, `db` `[4H]` (the
    /// gradient of both `b_ih` and `b_hh`), and, if `input_grad`, `dx` `[T, B, I]`.
    ///
    /// Kernels step backwards in time with one GEMM and one fused pass per step, then form
    /// the weight gradients over all steps with one GEMM each.
    LstmBackward { input_grad: bool },

    /// Batch normalisation over the batch of a `[B, C]` input.
    ///
    /// Training: inputs `x`, `gamma` `[C]`, `beta` `[C]`; outputs `y`, batch `mean` `[C]`
    /// and biased batch `var` `[C]`; `y = (x - mean) / sqrt(var + eps) · gamma + beta`.
    /// Inference: inputs `x`, `gamma`, `beta`, `running_mean`, `running_var`; output `y`
    /// normalised with the running statistics.
    BatchNorm { eps: f32, training: bool },

    /// Gradient of [`Op::BatchNorm`]. Inputs `x`, `gamma`, `mean`, `var` (batch statistics
    /// in training, running statistics in inference), `dy`. Outputs `dx`, `dgamma`, `dbeta`.
    BatchNormBackward { eps: f32, training: bool },

    /// Update op. Inputs batch `mean`, biased batch `var`; targets `running_mean`,
    /// `running_var`: `running = (1 - momentum) · running + momentum · stat`, with the
    /// variance unbiased by the factor `unbias = B / (B - 1)` first (as PyTorch does).
    BatchNormStatsUpdate { momentum: f32, unbias: f32 },

    /// Inputs `logits` `[B, K]`, `labels` `[B]` (class indices stored as f32). Outputs the
    /// mean cross-entropy `loss` `[1]` and `probs` `[B, K]` (softmax of the logits).
    SoftmaxCrossEntropy,

    /// Inputs `probs`, `labels`, `dloss` `[1]`; output
    /// `dlogits = (probs - onehot(labels)) · dloss / B`.
    SoftmaxCrossEntropyBackward,

    /// Update op: one Adam step with PyTorch's formula. Inputs `grad`, `scalars` `[2]` =
    /// (`lr / (1 - β1^t)`, `sqrt(1 - β2^t)`), written by the host each step; targets
    /// `param`, `m`, `v`:
    /// `g = grad + weight_decay · param`, `m = β1 m + (1-β1) g`, `v = β2 v + (1-β2) g²`,
    /// `param -= scalars[0] · m / (sqrt(v) / scalars[1] + eps)`.
    Adam(AdamParams),

    /// Update op: input `src`; target `dst` of the same shape gets a copy (carries an LSTM's
    /// final state into the next segment's initial state without a host round trip).
    Copy,
}

impl Op {
    /// The kernel name: the same function name in every backend.
    pub fn name(&self) -> &'static str {
        match self {
            Op::MatMul { .. } => "matmul",
            Op::Binary(_) => "binary",
            Op::Activation(_) => "activation_forward",
            Op::ActivationBackward(_) => "activation_backward",
            Op::SumToShape { .. } => "sum_to_shape",
            Op::Fill { .. } => "fill",
            Op::SliceTime { .. } => "slice_time",
            Op::ScatterTime { .. } => "scatter_time",
            Op::LstmForward { .. } => "lstm_forward",
            Op::LstmBackward { .. } => "lstm_backward",
            Op::BatchNorm { .. } => "batchnorm_forward",
            Op::BatchNormBackward { .. } => "batchnorm_backward",
            Op::BatchNormStatsUpdate { .. } => "batchnorm_stats_update",
            Op::SoftmaxCrossEntropy => "softmax_cross_entropy_forward",
            Op::SoftmaxCrossEntropyBackward => "softmax_cross_entropy_backward",
            Op::Adam(_) => "adam_update",
            Op::Copy => "copy",
        }
    }

    /// True when output `index` is working space whose contents after the op are
    /// unspecified (backends need not agree on them, and nothing may read them): the
    /// gates of an LSTM forward that keeps nothing for the backward.
    pub fn output_is_scratch(&self, index: usize) -> bool {
        matches!(
            (self, index),
            (
                Op::LstmForward {
                    keep_for_backward: false
                },
                3
            )
        )
    }

    /// Labels of the outputs, used to name the tensors a node creates (`node.label`).
    pub fn output_labels(&self) -> &'static [&'static str] {
        match self {
            Op::LstmForward { .. } => &["y", "h_n", "c_n", "gates", "cells"],
            Op::LstmBackward { .. } => &["dgates", "dh0", "dc0", "dw_ih", "dw_hh", "db", "dx"],
            Op::BatchNorm { .. } => &["y", "mean", "var"],
            Op::BatchNormBackward { .. } => &["dx", "dgamma", "dbeta"],
            Op::SoftmaxCrossEntropy => &["loss", "probs"],
            _ => &["out"],
        }
    }

    /// True for ops whose outputs are existing tensors, read and overwritten in place.
    pub fn is_update(&self) -> bool {
        matches!(
            self,
            Op::Adam(_) | Op::BatchNormStatsUpdate { .. } | Op::Copy
        )
    }

    /// Checks input shapes and returns the output shapes (for update ops: the shapes the
    /// targets must have). The message is wrapped with the node's name by the graph.
    pub fn infer_shapes(&self, inputs: &[&Shape]) -> Result<Vec<Shape>, String> {
        let n = inputs.len();
        let want = |k: usize| -> Result<(), String> {
            if n == k {
                Ok(())
            } else {
                Err(format!("expects {k} inputs, got {n}"))
            }
        };
        let rank = |i: usize, r: usize, what: &str| -> Result<(), String> {
            if inputs[i].rank() == r {
                Ok(())
            } else {
                Err(format!("{what} must have rank {r}, got {}", inputs[i]))
            }
        };
        let same = |i: usize, s: &Shape, what: &str| -> Result<(), String> {
            if inputs[i] == s {
                Ok(())
            } else {
                Err(format!("{what} must have shape {s}, got {}", inputs[i]))
            }
        };
        match self {
            Op::MatMul { trans_a, trans_b } => {
                want(2)?;
                rank(0, 2, "a")?;
                rank(1, 2, "b")?;
                let (m, ka) = if *trans_a {
                    (inputs[0].dim(1), inputs[0].dim(0))
                } else {
                    (inputs[0].dim(0), inputs[0].dim(1))
                };
                let (kb, nn) = if *trans_b {
                    (inputs[1].dim(1), inputs[1].dim(0))
                } else {
                    (inputs[1].dim(0), inputs[1].dim(1))
                };
                if ka != kb {
                    return Err(format!(
                        "inner dimensions differ: a {} (trans {trans_a}) · b {} (trans {trans_b})",
                        inputs[0], inputs[1]
                    ));
                }
                Ok(vec![Shape::from([m, nn])])
            }
            Op::Binary(_) => {
                want(2)?;
                if !inputs[0].ends_with(inputs[1]) {
                    return Err(format!(
                        "b {} must equal the trailing dimensions of a {}",
                        inputs[1], inputs[0]
                    ));
                }
                Ok(vec![inputs[0].clone()])
            }
            Op::Activation(_) => {
                want(1)?;
                Ok(vec![inputs[0].clone()])
            }
            Op::ActivationBackward(_) => {
                want(2)?;
                same(1, inputs[0], "dy")?;
                Ok(vec![inputs[0].clone()])
            }
            Op::SumToShape { shape } => {
                want(1)?;
                if !inputs[0].ends_with(shape) {
                    return Err(format!("input {} does not end with {shape}", inputs[0]));
                }
                Ok(vec![shape.clone()])
            }
            Op::Fill { shape, .. } => {
                want(0)?;
                Ok(vec![shape.clone()])
            }
            Op::SliceTime { t } => {
                want(1)?;
                rank(0, 3, "x")?;
                if *t >= inputs[0].dim(0) {
                    return Err(format!("time step {t} outside {}", inputs[0]));
                }
                Ok(vec![Shape::from([inputs[0].dim(1), inputs[0].dim(2)])])
            }
            Op::ScatterTime { t, steps } => {
                want(1)?;
                rank(0, 2, "x")?;
                if t >= steps {
                    return Err(format!("time step {t} outside {steps} steps"));
                }
                Ok(vec![Shape::from([
                    *steps,
                    inputs[0].dim(0),
                    inputs[0].dim(1),
                ])])
            }
            Op::LstmForward { keep_for_backward } => {
                want(7)?;
                let l = LstmDims::from_inputs(inputs)?;
                let mut out = vec![l.seq(l.hidden), l.state(), l.state(), l.seq(4 * l.hidden)];
                if *keep_for_backward {
                    out.push(l.seq(l.hidden));
                }
                Ok(out)
            }
            Op::LstmBackward { input_grad } => {
                want(11)?;
                // Backward has no biases: only x..w_hh are read for the dimensions.
                let l = LstmDims::from_inputs(&inputs[..5])?;
                same(5, &l.seq(l.hidden), "y")?;
                same(6, &l.seq(4 * l.hidden), "gates")?;
                same(7, &l.seq(l.hidden), "cells")?;
                same(8, &l.seq(l.hidden), "dy")?;
                same(9, &l.state(), "dh_n")?;
                same(10, &l.state(), "dc_n")?;
                let mut out = vec![
                    l.seq(4 * l.hidden),
                    l.state(),
                    l.state(),
                    Shape::from([4 * l.hidden, l.input]),
                    Shape::from([4 * l.hidden, l.hidden]),
                    Shape::from([4 * l.hidden]),
                ];
                if *input_grad {
                    out.push(l.seq(l.input));
                }
                Ok(out)
            }
            Op::BatchNorm { training, .. } => {
                want(if *training { 3 } else { 5 })?;
                rank(0, 2, "x")?;
                let c = Shape::from([inputs[0].dim(1)]);
                for i in 1..n {
                    same(i, &c, "gamma, beta and statistics")?;
                }
                if *training {
                    if inputs[0].dim(0) < 2 {
                        return Err("training needs a batch of at least 2".into());
                    }
                    Ok(vec![inputs[0].clone(), c.clone(), c])
                } else {
                    Ok(vec![inputs[0].clone()])
                }
            }
            Op::BatchNormBackward { .. } => {
                want(5)?;
                rank(0, 2, "x")?;
                let c = Shape::from([inputs[0].dim(1)]);
                for i in 1..4 {
                    same(i, &c, "gamma and statistics")?;
                }
                same(4, inputs[0], "dy")?;
                Ok(vec![inputs[0].clone(), c.clone(), c])
            }
            Op::BatchNormStatsUpdate { .. } => {
                want(2)?;
                rank(0, 1, "mean")?;
                same(1, inputs[0], "var")?;
                Ok(vec![inputs[0].clone(), inputs[0].clone()])
            }
            Op::SoftmaxCrossEntropy => {
                want(2)?;
                rank(0, 2, "logits")?;
                same(1, &Shape::from([inputs[0].dim(0)]), "labels")?;
                Ok(vec![Shape::from([1]), inputs[0].clone()])
            }
            Op::SoftmaxCrossEntropyBackward => {
                want(3)?;
                rank(0, 2, "probs")?;
                same(1, &Shape::from([inputs[0].dim(0)]), "labels")?;
                same(2, &Shape::from([1]), "dloss")?;
                Ok(vec![inputs[0].clone()])
            }
            Op::Adam(_) => {
                want(2)?;
                same(1, &Shape::from([2]), "scalars")?;
                Ok(vec![
                    inputs[0].clone(),
                    inputs[0].clone(),
                    inputs[0].clone(),
                ])
            }
            Op::Copy => {
                want(1)?;
                Ok(vec![inputs[0].clone()])
            }
        }
    }
}

/// The constant hyper-parameters of [`Op::Adam`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamParams {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
}

/// Sizes of an LSTM layer read off its inputs `x, h0, c0, w_ih, w_hh, ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LstmDims {
    pub steps: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
}

impl LstmDims {
    /// Reads and checks the dimensions from the first five (forward: seven) inputs.
    pub fn from_inputs(inputs: &[&Shape]) -> Result<Self, String> {
        let x = inputs[0];
        if x.rank() != 3 {
            return Err(format!("x must be [T, B, I], got {x}"));
        }
        let (steps, batch, input) = (x.dim(0), x.dim(1), x.dim(2));
        let w_hh = inputs[4];
        if w_hh.rank() != 2 || w_hh.dim(0) != 4 * w_hh.dim(1) {
            return Err(format!("w_hh must be [4H, H], got {w_hh}"));
        }
        let hidden = w_hh.dim(1);
        let d = LstmDims {
            steps,
            batch,
            input,
            hidden,
        };
        let checks: [(&str, Shape); 3] = [
            ("h0", d.state()),
            ("c0", d.state()),
            ("w_ih", Shape::from([4 * hidden, input])),
        ];
        for (i, (what, s)) in checks.iter().enumerate() {
            if inputs[i + 1] != s {
                return Err(format!("{what} must have shape {s}, got {}", inputs[i + 1]));
            }
        }
        if inputs.len() == 7 {
            let b = Shape::from([4 * hidden]);
            for (i, what) in [(5, "b_ih"), (6, "b_hh")] {
                if inputs[i] != &b {
                    return Err(format!("{what} must have shape {b}, got {}", inputs[i]));
                }
            }
        }
        Ok(d)
    }

    /// `[T, B, width]`.
    pub fn seq(&self, width: usize) -> Shape {
        Shape::from([self.steps, self.batch, width])
    }

    /// `[B, H]`.
    pub fn state(&self) -> Shape {
        Shape::from([self.batch, self.hidden])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_gates_of_an_lstm_that_keeps_nothing_are_scratch() {
        let forward = |keep_for_backward| Op::LstmForward { keep_for_backward };
        assert!(forward(false).output_is_scratch(3));
        assert!(!forward(true).output_is_scratch(3));
        assert!((0..5).all(|k| k == 3 || !forward(false).output_is_scratch(k)));
        assert!(!Op::Copy.output_is_scratch(0));
    }
}
