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
//! - an op writes only its outputs. *Update ops* (`Adam`, `Sgd`, `BatchNormStatsUpdate`, `Copy`)
//!   are the exception: their outputs are existing tensors (parameters, optimizer state,
//!   running statistics, carried state) which they read and overwrite in place. The
//!   schedule runs an update after every other reader of its targets.

use crate::args::*;
use crate::dropout::DropoutParams;
pub use crate::lstm_dims::LstmDims;
pub use crate::optim_op::{AdamParams, SgdParams};
pub use crate::recurrent_dims::{RecurrentDims, LSTM_SCRATCH_STEPS};
pub(crate) use crate::shape::same;
use crate::shape::Shape;

/// Pointwise nonlinearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activation {
    Identity,
    Relu,
    Tanh,
    Sigmoid,
    /// PyTorch's exact `nn.GELU()`: `x · Φ(x)` = `0.5 · x · (1 + erf(x / √2))`
    /// ([`crate::erf`]); its derivative `Φ(x) + x · φ(x)` needs `x` ([`Activation::needs_input`]).
    Gelu,
}

impl Activation {
    /// Every activation, in the order model files list them (what a reader of a
    /// model's `activation` accepts).
    pub const ALL: [Activation; 5] = [
        Activation::Identity,
        Activation::Relu,
        Activation::Tanh,
        Activation::Sigmoid,
        Activation::Gelu,
    ];

    /// f(x).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::Tanh => x.tanh(),
            Activation::Sigmoid => sigmoid(x),
            Activation::Gelu => crate::erf::gelu(x),
        }
    }

    /// Whether f' is computed from the forward input `x` rather than the output `y`: the
    /// gradient ([`Op::ActivationBackward`]) then takes `x` as well.
    pub fn needs_input(self) -> bool {
        matches!(self, Activation::Gelu)
    }

    /// f'(x) from `v`: the forward output `y = f(x)`, or the input `x` itself for an
    /// activation that [`needs_input`](Activation::needs_input).
    pub fn derivative(self, v: f32) -> f32 {
        match self {
            Activation::Identity => 1.0,
            Activation::Relu => {
                if v > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            Activation::Tanh => 1.0 - v * v,
            Activation::Sigmoid => v * (1.0 - v),
            Activation::Gelu => crate::erf::gelu_derivative(v),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Identity => "identity",
            Activation::Relu => "relu",
            Activation::Tanh => "tanh",
            Activation::Sigmoid => "sigmoid",
            Activation::Gelu => "gelu",
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

/// What a node computes. Each variant's inputs and outputs are the fields of its structs
/// in [`crate::args`] (`MatMul` → `MatMulInputs`, `MatMulOutputs`), in that order.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `c = op(a) · op(b)`. Inputs `a` `[M, K]` (`[K, M]` if `trans_a`), `b` `[K, N]`
    /// (`[N, K]` if `trans_b`). Output `c` `[M, N]`. Either operand may have more leading
    /// dimensions, read as rows ([`crate::rows`]): `a` `[T, B, K]` gives `c` `[T, B, N]`.
    MatMul { trans_a: bool, trans_b: bool },

    /// `out = a ∘ b` elementwise. Inputs `a`, `b` where `b`'s shape is a suffix of `a`'s
    /// (`b` is repeated over `a`'s leading dimensions: a bias row). Output has `a`'s shape.
    Binary(BinaryOp),

    /// `y = f(x)`. Input `x`, output `y` of the same shape.
    Activation(Activation),

    /// Inputs `y` (the forward output), `dy`, and for an activation whose derivative needs
    /// it ([`Activation::needs_input`]: GELU) the forward input `x`, which the others
    /// refuse; output `dx = dy · f'(x)`, f' computed from `x` where given, else from `y`.
    ActivationBackward(Activation),

    /// Sums over leading dimensions. Input `x` whose shape ends with `shape`; output of
    /// `shape` with `out[j] = Σ_i x[i, j]`. The gradient of a broadcast `Binary` operand.
    SumToShape { shape: Shape },

    /// No inputs; output of `shape` with every element `value`.
    Fill { value: f32, shape: Shape },

    /// Input `x` `[T, B, F]`; output `x[t]` `[B, F]` (for example the last time step).
    /// With `lengths` `[B]` ([`crate::seq_lengths`]), row `b` reads step `min(t, L_b - 1)`.
    SliceTime { t: usize },

    /// Input `x` `[B, F]`; output `[steps, B, F]`, zero except `out[t] = x`. The gradient
    /// of `SliceTime` (with `lengths`, each row at the step `SliceTime` reads it from).
    ScatterTime { t: usize, steps: usize },

    /// Each sequence reversed in time, as a bidirectional layer's reverse direction reads
    /// it. Input `x` `[T, B, F]` (or `[T, B]` token ids: F = 1, [`crate::time_dims`]) and
    /// optionally `lengths` `[B]` ([`crate::seq_lengths`]; without them every row has `T`
    /// steps); output `y` of `x`'s shape with
    /// `y[t, b] = x[L_b - 1 - t, b]` for `t < L_b`, and `y[t, b] = x[t, b]` after (the
    /// padding passes through), so each row starts at its own end, as PyTorch's packed
    /// sequences run backwards. A permutation that is its own inverse and its own adjoint:
    /// its gradient is `ReverseTime` of `dy` at the same lengths.
    ReverseTime,

    /// `out = [a, b]` along the last dimension (`torch.cat(dim=-1)`). Inputs `a` `[.., Fa]`
    /// and `b` `[.., Fb]` with the same leading dimensions; output `out` `[.., Fa + Fb]`,
    /// each row `a`'s features then `b`'s. Its gradient is two [`Op::SliceFeatures`].
    ConcatFeatures,

    /// Features `start..start + width` of every row: input `x` `[.., F]`, output `out`
    /// `[.., width]`, `out[.., j] = x[.., start + j]` (`width ≥ 1`, `start + width ≤ F`).
    /// Its gradient places `dout` at those features and zeros elsewhere ([`Op::Fill`] and
    /// [`Op::ConcatFeatures`]).
    SliceFeatures { start: usize, width: usize },

    /// Each sequence's mean over its own steps (Keras's `GlobalAveragePooling1D`). Input
    /// `x` `[T, B, F]` and optionally `lengths` `[B]` ([`crate::seq_lengths`]; without them
    /// every row has `T` steps); output `out` `[B, F]`,
    /// `out[b] = (1 / L_b) Σ_{t < L_b} x[t, b]`, summed in step order; 0 for `L_b = 0`.
    /// Its gradient is [`Op::MeanTimeBackward`] at the same lengths.
    MeanTime,

    /// Gradient of [`Op::MeanTime`]. Inputs `dout` `[B, F]` and the forward's `lengths`
    /// if it had them; output `dx` `[steps, B, F]` (`steps ≥ 1`, the forward's `T`),
    /// `dx[t, b] = dout[b] / L_b` for `t < L_b`, else 0.
    MeanTimeBackward { steps: usize },

    /// Each sequence's maximum over its own steps (Keras's `GlobalMaxPooling1D`). Inputs
    /// as [`Op::MeanTime`]'s; outputs `out` `[B, F]`, `out[b, f] = max_{t < L_b} x[t, b, f]`,
    /// and `at` `[B, F]`, the first step holding that maximum (a whole number as `f32`;
    /// no gradient flows through it); for `L_b = 0`, `out` 0 and `at` -1. A NaN is the
    /// maximum, as in `torch.max`: the first NaN step of a feature wins. Its gradient is
    /// [`Op::MaxTimeBackward`] at `at`.
    MaxTime,

    /// Gradient of [`Op::MaxTime`]. Inputs `dout` and the forward's `at`, `[B, F]` each;
    /// output `dx` `[steps, B, F]` (`steps ≥ 1`), zero but `dx[at[b, f], b, f] =
    /// dout[b, f]`, nothing where `at` is -1. The CPU refuses an `at` that is not a whole
    /// number in `-1..steps`; GPU kernels skip one outside `0..steps`.
    MaxTimeBackward { steps: usize },

    /// The columns of a 1-D convolution over time (PyTorch's `nn.Conv1d` over each
    /// sequence alone, zero-padded; [`crate::ConvTaps`]): the layer is
    /// `cols · Reshape(weight [Cout, Cin, K] → [Cout, Cin·K])ᵀ + bias`. Input `x`
    /// `[T, B, C]` and optionally `lengths` `[B]` ([`crate::seq_lengths`]; without them every
    /// row has `T` steps); output `cols` `[T, B, C·K]` (K = `kernel`),
    /// `cols[t, b, c·K + k] = x[t - left + k·dilation, b, c]` where that step lies in
    /// `0..L_b`, else 0, and every row `t ≥ L_b` zero. `kernel ≥ 1`, `dilation ≥ 1`,
    /// `left ≤ (kernel - 1)·dilation`: `(kernel - 1)·dilation` is a causal convolution,
    /// half of it (rounded down) PyTorch's `padding='same'`. GPU kernels read a length
    /// outside `1..=T` as an empty row. Its gradient is [`Op::FoldTime`] at the same lengths.
    UnfoldTime {
        kernel: usize,
        dilation: usize,
        left: usize,
    },

    /// Gradient (the adjoint) of [`Op::UnfoldTime`] with the same attributes. Inputs
    /// `dcols` `[T, B, C·K]` and optionally `lengths`; output `dx` `[T, B, C]`,
    /// `dx[s, b, c] = Σ_k dcols[t, b, c·K + k]` over the taps `k` whose step
    /// `t = s + left - k·dilation` lies in `0..L_b` (summed in tap order), 0 for `s ≥ L_b`.
    /// Its gradient is [`Op::UnfoldTime`].
    FoldTime {
        kernel: usize,
        dilation: usize,
        left: usize,
    },

    /// A copy of `x`'s elements in row-major order as a tensor of `shape` (the same count):
    /// input `x`, output `out`. A copy, not a view (the planner counts it); for small
    /// tensors such as a convolution's weight. Its gradient is `Reshape` back.
    Reshape { shape: Shape },
    /// A table of positions added to each step (a learned positional embedding, as
    /// `x + pos[:T]` over a `[T, B, D]` sequence): inputs `x` `[T, B, D]` and `table`
    /// `[N, D]` with `N >= T`; output `out` `[T, B, D]`, `out[t, b] = x[t, b] + table[t]`.
    /// Rows `T..N` of the table are not read. Its gradient: `x` gets `dout` itself,
    /// `table` gets [`Op::SumBatchToRows`] of `dout`.
    AddTimeRows,

    /// Gradient of [`Op::AddTimeRows`] at its table: input `dout` `[T, B, D]`, output
    /// `dtable` `[rows, D]` (`rows >= T`, the table's `N`), `dtable[t] = Σ_b dout[t, b]`
    /// summed in `b` order for `t < T`, zeros for rows `T..rows`.
    SumBatchToRows { rows: usize },

    /// The sinusoidal positions of "Attention is all you need" (the PyTorch tutorial's
    /// `PositionalEncoding`): no inputs (as [`Op::Fill`]); output `table` `[steps, dim]`,
    /// `table[p, 2i] = sin(p · w_i)`, `table[p, 2i + 1] = cos(p · w_i)`,
    /// `w_i = 10000^(-2i / dim)` (an odd `dim`'s last column is a sine). Computed in f32
    /// the same way on every backend, `w_i` from exactly rounded factors
    /// ([`crate::positions_ops::sinusoid_frequency`]), so backends agree to ~2e-7; how far
    /// that is from a float64 table is written there. Nothing to differentiate.
    Sinusoids { steps: usize, dim: usize },

    /// The weights of multi-head scaled dot-product self-attention (PyTorch's
    /// `nn.MultiheadAttention`; sizes and mask in [`crate::AttentionDims`]). Inputs `q`, `k`
    /// `[T, B, D]` (`D = heads·Dh`, head `h` owning features `h·Dh..(h+1)·Dh`) and optionally
    /// `lengths` `[B]` ([`crate::seq_lengths`]); output `probs` `[B, heads, T, T]`,
    /// `probs[b, h, i, j]` = softmax over `j` of `q_i · k_j / sqrt(Dh)` (head `h` of row `b`,
    /// the row maximum subtracted, summed in key order), key `j` masked (exactly 0) where
    /// `j ≥ L_b` (PyTorch's `key_padding_mask`) or, if `causal`, `j > i` (`is_causal`).
    /// Query rows `i ≥ L_b` attend to the valid keys as PyTorch's do; a row with every key
    /// masked (`L_b = 0`) is all zeros, where PyTorch gives NaN. GPU kernels read a length
    /// outside `0..=T` as 0. Its gradient is [`Op::AttentionScoresBackward`].
    AttentionScores { heads: usize, causal: bool },

    /// Gradient of [`Op::AttentionScores`]. Inputs the forward's `q`, `k` `[T, B, D]`,
    /// `probs` and their gradient `dprobs` `[B, heads, T, T]` (the zeros of `probs` carry
    /// the mask); outputs `dq`, `dk` `[T, B, D]`: per head of each row,
    /// `ds = p ∘ (dp − rowsum(p ∘ dp))`, `dq = ds·k / sqrt(Dh)`, `dk = dsᵀ·q / sqrt(Dh)`.
    AttentionScoresBackward { heads: usize, causal: bool },

    /// Attention weights applied to the values: inputs `probs` `[B, heads, T, T]` and `v`
    /// `[T, B, D]`; output `out` `[T, B, D]`,
    /// `out[i, b, head h] = Σ_j probs[b, h, i, j] · v[j, b, head h]`. Its gradient is
    /// [`Op::AttentionMixBackward`].
    AttentionMix { heads: usize },

    /// Gradient of [`Op::AttentionMix`]. Inputs its `probs`, `v` and `out`'s gradient `dout`
    /// `[T, B, D]`; outputs `dprobs` `[B, heads, T, T]` (`dout·vᵀ` per head of each row) and
    /// `dv` `[T, B, D]` (`probsᵀ·dout`).
    AttentionMixBackward { heads: usize },

    /// A whole LSTM layer over a sequence, with PyTorch's gate order (i, f, g, o):
    /// `gates_t = x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh`,
    /// `c_t = σ(f) c_{t-1} + σ(i) tanh(g)`, `h_t = σ(o) tanh(c_t)`.
    ///
    /// Inputs: `x` `[T, B, I]`, `h0` `[B, H]`, `c0` `[B, H]`, `w_ih` `[4H, I]`,
    /// `w_hh` `[4H, H]`, `b_ih` `[4H]`, `b_hh` `[4H]`.
    ///
    /// **Token input**: `x` may instead be `[T, B]` token ids (f32 holding whole numbers,
    /// see [`crate::tokens`]) with `w_ih` `[4H, V]` over a vocabulary of `V`: the exact
    /// result of the one-hot input, which is never materialised: the input projection is
    /// the gather `gates[t, b, :] = w_ih[:, x[t, b]]`. The kind is read off `x`'s rank
    /// ([`LstmDims::tokens`]) rather than kept as an attribute, so it cannot disagree
    /// with the shapes.
    /// **Lengths**: optional `lengths` `[B]`, each row stopping at its own: [`crate::seq_lengths`].
    /// Outputs: `y` `[T, B, H]` (every `h_t`), `h_n` `[B, H]`, `c_n` `[B, H]`,
    /// `gates` `[T, B, 4H]` (activated: σ(i), σ(f), tanh(g), σ(o)), and, if
    /// `keep_for_backward`, `cells` `[T, B, H]` (every `c_t`).
    ///
    /// Kernels project the inputs of a chunk of steps with one GEMM into `gates`, then per
    /// step one GEMM `h_{t-1} W_hhᵀ` accumulated into the step's gates and one fused pass
    /// for the nonlinearities and the cell update. With `keep_for_backward` the chunk is
    /// the whole sequence and `gates` is `[T, B, 4H]`. Without it, `gates` is only that
    /// working space and dies at once ([`Op::output_is_scratch`]): it holds
    /// [`RecurrentDims::gate_steps`] steps (at most [`LSTM_SCRATCH_STEPS`]), step `t` in slot
    /// `t mod` that count, so an inference pass does not hold a `[T, B, 4H]` tensor it
    /// only needs a few steps of.
    LstmForward { keep_for_backward: bool },

    /// Gradient of [`Op::LstmForward`] (with `keep_for_backward`).
    ///
    /// Inputs: `x`, `h0`, `c0`, `w_ih`, `w_hh`, `y`, `gates`, `cells` (as in the forward),
    /// `dy` `[T, B, H]`, `dh_n`, `dc_n` `[B, H]`, and the forward's `lengths` if it had them.
    /// Outputs: `dgates` `[T, B, 4H]` (pre-activation gate gradients; working space),
    /// `dh0`, `dc0` `[B, H]`, `dw_ih` `[4H, I]`, `dw_hh` `[4H, H]`, `db` `[4H]` (the
    /// gradient of both `b_ih` and `b_hh`), and, if `input_grad`, `dx` `[T, B, I]`.
    /// With token input, `dw_ih` is the scatter-add of the gate gradients into the columns
    /// of the ids seen, and there is no `dx` (`input_grad` is an error).
    ///
    /// Kernels step backwards in time with one GEMM and one fused pass per step, then form
    /// the weight gradients over all steps with one GEMM each.
    LstmBackward { input_grad: bool },

    /// A whole GRU layer over a sequence, as PyTorch's `nn.GRU` (gates r, z, n; `b_hn`
    /// inside the reset product). Inputs `x` `[T, B, I]` (or `[T, B]` token ids with `w_ih`
    /// `[3H, V]`, as the LSTM's), `h0` `[B, H]`, `w_ih` `[3H, I]`,
    /// `w_hh` `[3H, H]`, `b_ih`, `b_hh` `[3H]`, optional `lengths` `[B]` (as the LSTM's).
    /// Outputs `y` `[T, B, H]`, `h_n` `[B, H]`, `gates` (activated r, z, n) and `hidden`
    /// (`h_{t-1} W_hhᵀ + b_hh`), `[T, B, 3H]`, or a few steps of working space without
    /// `keep_for_backward` ([`Op::output_is_scratch`]). Equations, kernels: [`crate::gru`].
    GruForward { keep_for_backward: bool },

    /// Gradient of [`Op::GruForward`] (with `keep_for_backward`). Inputs `x`, `h0`, `w_ih`,
    /// `w_hh`, `y`, `gates`, `hidden`, `dy` `[T, B, H]`, `dh_n` `[B, H]`, `lengths`. `dgates`,
    /// `dhidden` `[T, B, 3H]` (gradients at both projections; working space), `dh0`,
    /// `dw_ih`, `dw_hh`, `db_ih`, `db_hh` (the two biases apart), and, if `input_grad`, `dx`
    /// (with token input, `dw_ih` a scatter-add and no `dx`, as the LSTM's).
    GruBackward { input_grad: bool },

    /// `nn.Embedding`: rows of a table picked by token ids. Inputs `table` `[V, E]`, `ids`
    /// of any shape `[..]` (f32 holding whole numbers, see [`crate::tokens`]; `[T, B]` for a
    /// sequence); output `out` `[.., E]`, `out[n] = table[ids[n]]` for every id `n` in
    /// order.
    Embedding,

    /// Gradient of [`Op::Embedding`]. Inputs `ids` `[..]`, `dout` `[.., E]`; output
    /// `dtable` `[vocab, E]`, the scatter-add `dtable[v] = Σ_{n: ids[n] = v} dout[n]`,
    /// summed in the order of `n` on every backend (deterministic).
    EmbeddingBackward { vocab: usize },

    /// Batch normalisation over the batch of a `[B, C]` input (or of every row of
    /// `[T, B, C]`, [`crate::rows`]).
    ///
    /// Training: inputs `x`, `gamma` `[C]`, `beta` `[C]`; outputs `y`, batch `mean` `[C]`
    /// and biased batch `var` `[C]`; `y = (x - mean) / sqrt(var + eps) · gamma + beta`.
    /// Inference: inputs `x`, `gamma`, `beta`, `running_mean`, `running_var`; output `y`
    /// normalised with the running statistics.
    BatchNorm { eps: f32, training: bool },

    /// Gradient of [`Op::BatchNorm`]. Inputs `x`, `gamma`, `mean`, `var` (batch statistics
    /// in training, running statistics in inference), `dy`. Outputs `dx`, `dgamma`, `dbeta`.
    BatchNormBackward { eps: f32, training: bool },

    /// Layer normalisation over the features of each row of `x` `[.., F]` (PyTorch's
    /// `nn.LayerNorm(F)`). Inputs `x`, `gamma` `[F]`, `beta` `[F]`; outputs `y` `[.., F]`,
    /// each row's `mean` and `rstd` = 1/sqrt(biased var + eps) (shape `x`'s without its
    /// last dimension); `y = (x - mean) · rstd · gamma + beta`. The same in training and
    /// inference (no running statistics).
    LayerNorm { eps: f32 },

    /// Gradient of [`Op::LayerNorm`]. Inputs `x`, `gamma`, the forward's `mean` and
    /// `rstd`, `dy`. Outputs `dx`, `dgamma`, `dbeta` (summed over the rows).
    LayerNormBackward,

    /// Update op. Inputs batch `mean`, biased batch `var`; targets `running_mean`,
    /// `running_var`: `running = (1 - momentum) · running + momentum · stat`, with the
    /// variance unbiased by the factor `unbias = B / (B - 1)` first (as PyTorch does).
    BatchNormStatsUpdate { momentum: f32, unbias: f32 },

    /// Inputs `logits` `[B, K]`, `labels` `[B]` (class indices stored as f32; or
    /// `[T, B, K]` and `[T, B]`, [`crate::rows`]). Outputs the mean cross-entropy `loss`
    /// `[1]` and `probs` `[B, K]` (softmax of the logits). A row labelled
    /// [`crate::rows::IGNORE_LABEL`] adds nothing to the sum (still divided by all rows).
    SoftmaxCrossEntropy,

    /// Inputs `probs`, `labels`, `dloss` `[1]`; output
    /// `dlogits = (probs - onehot(labels)) · dloss / B`; zero on ignored rows.
    SoftmaxCrossEntropyBackward,

    /// Inputs `pred`, `target` of one shape (`[B, K]`, or `[T, B, K]` per step); output
    /// the mean squared error over all their elements, `loss` `[1]` (`nn.MSELoss()`).
    MseLoss,

    /// Inputs `pred`, `target`, `dloss` `[1]`; output
    /// `dpred = 2 (pred - target) · dloss / numel`.
    MseLossBackward,

    /// Update op: one Adam step with PyTorch's formula. Inputs `grad`, `scalars` `[3]` =
    /// (`lr / (1 - β1^t)`, `sqrt(1 - β2^t)`, `1 - lr · decoupled decay`), written by the
    /// host each step; targets `param`, `m`, `v`:
    /// `g = grad + weight_decay · param`, `param *= scalars[2]` (AdamW's decay; 1 for
    /// Adam), `m = β1 m + (1-β1) g`, `v = β2 v + (1-β2) g²`,
    /// `param -= scalars[0] · m / (sqrt(v) / scalars[1] + eps)`.
    Adam(AdamParams),

    /// Update op: one SGD step with PyTorch's formula. Inputs `grad`, `scalars` `[2]` =
    /// (`lr`, the gradient's weight in the buffer: 1 on the first step or without
    /// momentum, `1 - dampening` after), written by the host each step; targets `param`,
    /// `buf`: `g = grad + weight_decay · param`, `buf = momentum · buf + scalars[1] · g`,
    /// `d = g + momentum · buf` if `nesterov` else `buf`, `param -= scalars[0] · d`.
    Sgd(SgdParams),

    /// Input `x` of any shape; output `total` `[1]` = `Σ x²` (one gradient's share of
    /// the global norm that [`Op::ClipGrad`] clips by).
    SumSquares,

    /// Inputs `x`, `total_sq` `[1]` (the squared global norm); output `y` =
    /// `clamp(x · min(1, max_norm / (sqrt(total_sq) + 1e-6)), -value, value)`:
    /// PyTorch's `clip_grad_norm_` then `clip_grad_value_`; `+inf` turns either off.
    ClipGrad { max_norm: f32, value: f32 },

    /// Inverted dropout: `y = x · m`, `m` = `1 / (1 - p)` where the mask of [`crate::dropout`]
    /// (from the host-written `key` `[2]`) keeps an element, else 0. Its own gradient.
    Dropout(DropoutParams),

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
            Op::ReverseTime => "reverse_time",
            Op::ConcatFeatures => "concat_features",
            Op::SliceFeatures { .. } => "slice_features",
            Op::MeanTime => "mean_time",
            Op::MeanTimeBackward { .. } => "mean_time_backward",
            Op::MaxTime => "max_time",
            Op::MaxTimeBackward { .. } => "max_time_backward",
            Op::UnfoldTime { .. } => "unfold_time",
            Op::FoldTime { .. } => "fold_time",
            Op::Reshape { .. } => "reshape",
            Op::AddTimeRows => "add_time_rows",
            Op::SumBatchToRows { .. } => "sum_batch_to_rows",
            Op::Sinusoids { .. } => "sinusoids",
            Op::AttentionScores { .. } => "attention_scores",
            Op::AttentionScoresBackward { .. } => "attention_scores_backward",
            Op::AttentionMix { .. } => "attention_mix",
            Op::AttentionMixBackward { .. } => "attention_mix_backward",
            Op::LstmForward { .. } => "lstm_forward",
            Op::LstmBackward { .. } => "lstm_backward",
            Op::GruForward { .. } => "gru_forward",
            Op::GruBackward { .. } => "gru_backward",
            Op::Embedding => "embedding",
            Op::EmbeddingBackward { .. } => "embedding_backward",
            Op::BatchNorm { .. } => "batchnorm_forward",
            Op::BatchNormBackward { .. } => "batchnorm_backward",
            Op::BatchNormStatsUpdate { .. } => "batchnorm_stats_update",
            Op::LayerNorm { .. } => "layernorm_forward",
            Op::LayerNormBackward => "layernorm_backward",
            Op::SoftmaxCrossEntropy => "softmax_cross_entropy_forward",
            Op::SoftmaxCrossEntropyBackward => "softmax_cross_entropy_backward",
            Op::MseLoss => "mse_loss_forward",
            Op::MseLossBackward => "mse_loss_backward",
            Op::Adam(_) => "adam_update",
            Op::Sgd(_) => "sgd_update",
            Op::SumSquares => "sum_squares",
            Op::ClipGrad { .. } => "clip_grad",
            Op::Dropout(_) => "dropout",
            Op::Copy => "copy",
        }
    }

    /// True when output `index` is working space whose contents after the op are
    /// unspecified (backends need not agree on them, and nothing may read them): the
    /// gates of an LSTM forward, and the gates and hidden projections of a GRU forward,
    /// that keep nothing for the backward.
    pub fn output_is_scratch(&self, index: usize) -> bool {
        let label = self.output_labels().get(index);
        match self {
            Op::LstmForward {
                keep_for_backward: false,
            } => label == Some(&"gates"),
            Op::GruForward {
                keep_for_backward: false,
            } => matches!(label, Some(&"gates" | &"hidden")),
            _ => false,
        }
    }

    /// Names of the outputs (targets of update ops) in order, as the op's outputs struct
    /// names its fields; used to name the tensors a node creates (`node.label`).
    pub fn output_labels(&self) -> &'static [&'static str] {
        match self {
            Op::MatMul { .. } => MatMulOutputs::<()>::NAMES,
            Op::Binary(_) => BinaryOutputs::<()>::NAMES,
            Op::Activation(_) => ActivationOutputs::<()>::NAMES,
            Op::ActivationBackward(_) => ActivationBackwardOutputs::<()>::NAMES,
            Op::SumToShape { .. } => SumToShapeOutputs::<()>::NAMES,
            Op::Fill { .. } => FillOutputs::<()>::NAMES,
            Op::SliceTime { .. } => SliceTimeOutputs::<()>::NAMES,
            Op::ScatterTime { .. } => ScatterTimeOutputs::<()>::NAMES,
            Op::ReverseTime => ReverseTimeOutputs::<()>::NAMES,
            Op::ConcatFeatures => ConcatFeaturesOutputs::<()>::NAMES,
            Op::SliceFeatures { .. } => SliceFeaturesOutputs::<()>::NAMES,
            Op::MeanTime => MeanTimeOutputs::<()>::NAMES,
            Op::MeanTimeBackward { .. } => MeanTimeBackwardOutputs::<()>::NAMES,
            Op::MaxTime => MaxTimeOutputs::<()>::NAMES,
            Op::MaxTimeBackward { .. } => MaxTimeBackwardOutputs::<()>::NAMES,
            Op::UnfoldTime { .. } => UnfoldTimeOutputs::<()>::NAMES,
            Op::FoldTime { .. } => FoldTimeOutputs::<()>::NAMES,
            Op::Reshape { .. } => ReshapeOutputs::<()>::NAMES,
            Op::AddTimeRows => AddTimeRowsOutputs::<()>::NAMES,
            Op::SumBatchToRows { .. } => SumBatchToRowsOutputs::<()>::NAMES,
            Op::Sinusoids { .. } => SinusoidsOutputs::<()>::NAMES,
            Op::AttentionScores { .. } => AttentionScoresOutputs::<()>::NAMES,
            Op::AttentionScoresBackward { .. } => AttentionScoresBackwardOutputs::<()>::NAMES,
            Op::AttentionMix { .. } => AttentionMixOutputs::<()>::NAMES,
            Op::AttentionMixBackward { .. } => AttentionMixBackwardOutputs::<()>::NAMES,
            Op::LstmForward { .. } => LstmForwardOutputs::<()>::NAMES,
            Op::LstmBackward { .. } => LstmBackwardOutputs::<()>::NAMES,
            Op::GruForward { .. } => GruForwardOutputs::<()>::NAMES,
            Op::GruBackward { .. } => GruBackwardOutputs::<()>::NAMES,
            Op::Embedding => EmbeddingOutputs::<()>::NAMES,
            Op::EmbeddingBackward { .. } => EmbeddingBackwardOutputs::<()>::NAMES,
            Op::BatchNorm { .. } => BatchNormOutputs::<()>::NAMES,
            Op::BatchNormBackward { .. } => BatchNormBackwardOutputs::<()>::NAMES,
            Op::BatchNormStatsUpdate { .. } => StatsUpdateTargets::<()>::NAMES,
            Op::LayerNorm { .. } => LayerNormOutputs::<()>::NAMES,
            Op::LayerNormBackward => LayerNormBackwardOutputs::<()>::NAMES,
            Op::SoftmaxCrossEntropy => SoftmaxCrossEntropyOutputs::<()>::NAMES,
            Op::SoftmaxCrossEntropyBackward => SoftmaxCrossEntropyBackwardOutputs::<()>::NAMES,
            Op::MseLoss => MseLossOutputs::<()>::NAMES,
            Op::MseLossBackward => MseLossBackwardOutputs::<()>::NAMES,
            Op::Adam(_) => AdamTargets::<()>::NAMES,
            Op::Sgd(_) => SgdTargets::<()>::NAMES,
            Op::SumSquares => SumSquaresOutputs::<()>::NAMES,
            Op::ClipGrad { .. } => ClipGradOutputs::<()>::NAMES,
            Op::Dropout(_) => DropoutOutputs::<()>::NAMES,
            Op::Copy => CopyTargets::<()>::NAMES,
        }
    }

    /// True for ops whose outputs are existing tensors, read and overwritten in place.
    pub fn is_update(&self) -> bool {
        matches!(
            self,
            Op::Adam(_) | Op::Sgd(_) | Op::BatchNormStatsUpdate { .. } | Op::Copy
        )
    }

    /// "targets" for update ops, else "outputs": what the second list of a call holds.
    pub fn outputs_are(&self) -> &'static str {
        if self.is_update() {
            "targets"
        } else {
            "outputs"
        }
    }
}
