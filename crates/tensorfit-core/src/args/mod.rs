//! Every op's inputs and outputs by name: the one place an op's argument order is written.
//!
//! For each [`Op`](crate::Op) there is an inputs struct and an outputs struct (for update ops the
//! outputs are the *targets*, read and overwritten), generic over the handle `T` of one
//! tensor:
//! - in graph builders `T` is a [`crate::TensorId`]: `Graph::apply(name, op,
//!   LstmForwardInputs { x, h0, .. })` returns `LstmForwardOutputs { y, h_n, .. }`;
//! - in backends `T` is what the backend holds per tensor (a host slice, a buffer region, a
//!   device address), and `&Shape` for the shapes: see [`crate::kernels`].
//!
//! A node stores its tensors as two lists in the order the fields are declared here;
//! [`Args::from_vec`] and [`Args::into_vec`] convert, and are the only code that knows
//! that order. An optional last field (`cells`, `dx`) is present when the list has it.

use std::marker::PhantomData;

/// A struct of named tensors of one op, convertible to and from the node's list.
pub trait Args<T>: Sized {
    /// The field names in list order; an optional last field is named too.
    const NAMES: &'static [&'static str];

    /// The items of one kind (`what`: "inputs", "outputs" or "targets") by name; a wrong
    /// count is an error (callers add the op's or node's name).
    fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String>;

    /// The items in list order.
    fn into_vec(self) -> Vec<T>;
}

/// An op's inputs struct, naming the struct of its outputs (or targets).
pub trait OpInputs<T>: Args<T> {
    type Outputs: Args<T>;
}

/// The items as a fixed-size array.
fn arity<T, const N: usize>(what: &str, items: Vec<T>) -> Result<[T; N], String> {
    let n = items.len();
    items
        .try_into()
        .map_err(|_| format!("expected {N} {what}, got {n}"))
}

/// `N` required items and one optional last item.
fn arity_optional<T, const N: usize>(
    what: &str,
    mut items: Vec<T>,
) -> Result<([T; N], Option<T>), String> {
    if items.len() > N + 1 {
        let n = items.len();
        return Err(format!("expected at most {} {what}, got {n}", N + 1));
    }
    let last = if items.len() > N { items.pop() } else { None };
    Ok((arity(what, items)?, last))
}

/// Declares one struct of named tensors (with an optional last field after `;`).
macro_rules! args_struct {
    ($(#[$m:meta])* $name:ident { $($f:ident),+ }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            $(pub $f: T,)+
        }

        impl<T> Args<T> for $name<T> {
            const NAMES: &'static [&'static str] = &[$(stringify!($f)),+];

            fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
                let [$($f),+] = arity(what, items)?;
                Ok($name { $($f),+ })
            }

            fn into_vec(self) -> Vec<T> {
                vec![$(self.$f),+]
            }
        }
    };
    ($(#[$m:meta])* $name:ident { $($f:ident),+ ; $opt:ident }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            $(pub $f: T,)+
            pub $opt: Option<T>,
        }

        impl<T> Args<T> for $name<T> {
            const NAMES: &'static [&'static str] = &[$(stringify!($f)),+, stringify!($opt)];

            fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
                let ([$($f),+], $opt) = arity_optional(what, items)?;
                Ok($name { $($f),+, $opt })
            }

            fn into_vec(self) -> Vec<T> {
                let mut v = vec![$(self.$f),+];
                v.extend(self.$opt);
                v
            }
        }
    };
}

/// Declares an op's inputs struct and outputs struct, and ties them together.
macro_rules! signature {
    (
        $(#[$im:meta])* $inputs:ident { $($i:tt)+ }
        $(#[$om:meta])* -> $outputs:ident { $($o:tt)+ }
    ) => {
        args_struct!($(#[$im])* $inputs { $($i)+ });
        args_struct!($(#[$om])* $outputs { $($o)+ });
        impl<T> OpInputs<T> for $inputs<T> {
            type Outputs = $outputs<T>;
        }
    };
}

// Each family's signatures in its own file (after the macros, which they use).
mod sequence;
pub use sequence::*;
mod conv;
pub use conv::*;
mod positions;
pub use positions::*;
mod attention;
pub use attention::*;

signature! {
    /// [`Op::MatMul`](crate::Op::MatMul): `a` `[M, K]` (`[K, M]` if `trans_a`), `b` `[K, N]` (`[N, K]` if `trans_b`).
    MatMulInputs { a, b }
    /// [`Op::MatMul`](crate::Op::MatMul): `c` `[M, N]`.
    -> MatMulOutputs { c }
}

signature! {
    /// [`Op::Binary`](crate::Op::Binary): `a`, and `b` whose shape is a suffix of `a`'s.
    BinaryInputs { a, b }
    /// [`Op::Binary`](crate::Op::Binary): `out`, of `a`'s shape.
    -> BinaryOutputs { out }
}

signature! {
    /// [`Op::Activation`](crate::Op::Activation): `x`.
    ActivationInputs { x }
    /// [`Op::Activation`](crate::Op::Activation): `y = f(x)`.
    -> ActivationOutputs { y }
}

signature! {
    /// [`Op::ActivationBackward`](crate::Op::ActivationBackward): the forward output `y`, the gradient `dy` at it,
    /// and the forward input `x` for an activation whose derivative needs it (GELU).
    ActivationBackwardInputs { y, dy; x }
    /// [`Op::ActivationBackward`](crate::Op::ActivationBackward): `dx`.
    -> ActivationBackwardOutputs { dx }
}

signature! {
    /// [`Op::SumToShape`](crate::Op::SumToShape): `x`, whose shape ends with the op's `shape`.
    SumToShapeInputs { x }
    /// [`Op::SumToShape`](crate::Op::SumToShape): `out` of the op's `shape`.
    -> SumToShapeOutputs { out }
}

signature! {
    /// [`Op::LstmForward`](crate::Op::LstmForward): `x` `[T, B, I]`, `h0`, `c0` `[B, H]`, `w_ih` `[4H, I]`,
    /// `w_hh` `[4H, H]`, `b_ih`, `b_hh` `[4H]`, and optionally each sequence's length
    /// `lengths` `[B]` (f32 holding whole numbers in `0..=T`).
    LstmForwardInputs { x, h0, c0, w_ih, w_hh, b_ih, b_hh; lengths }
    /// [`Op::LstmForward`](crate::Op::LstmForward): `y` `[T, B, H]`, `h_n`, `c_n` `[B, H]`, `gates` `[T, B, 4H]`
    /// (activated), and `cells` `[T, B, H]` when kept for backward.
    -> LstmForwardOutputs { y, h_n, c_n, gates; cells }
}

signature! {
    /// [`Op::LstmBackward`](crate::Op::LstmBackward): the forward's `x`, `h0`, `c0`, `w_ih`, `w_hh`, its outputs `y`,
    /// `gates`, `cells`, the gradients arriving at `y`, `h_n` and `c_n`, and the forward's
    /// `lengths` if it had them.
    LstmBackwardInputs { x, h0, c0, w_ih, w_hh, y, gates, cells, dy, dh_n, dc_n; lengths }
    /// [`Op::LstmBackward`](crate::Op::LstmBackward): `dgates` `[T, B, 4H]` (pre-activation), `dh0`, `dc0` `[B, H]`,
    /// `dw_ih` `[4H, I]`, `dw_hh` `[4H, H]`, `db` `[4H]`, and `dx` `[T, B, I]` when the
    /// input gradient is wanted.
    -> LstmBackwardOutputs { dgates, dh0, dc0, dw_ih, dw_hh, db; dx }
}

signature! {
    /// [`Op::GruForward`](crate::Op::GruForward): `x` `[T, B, I]`, `h0` `[B, H]`, `w_ih` `[3H, I]`, `w_hh` `[3H, H]`,
    /// `b_ih`, `b_hh` `[3H]`, and optionally each sequence's length `lengths` `[B]` (as the
    /// LSTM's).
    GruForwardInputs { x, h0, w_ih, w_hh, b_ih, b_hh; lengths }
    /// [`Op::GruForward`](crate::Op::GruForward): `y` `[T, B, H]`, `h_n` `[B, H]`, `gates` `[T, B, 3H]` (activated
    /// r, z, n) and `hidden` `[T, B, 3H]` (`h_{t-1} · w_hhᵀ + b_hh`).
    -> GruForwardOutputs { y, h_n, gates, hidden }
}

signature! {
    /// [`Op::GruBackward`](crate::Op::GruBackward): the forward's `x`, `h0`, `w_ih`, `w_hh`, its outputs `y`, `gates`,
    /// `hidden`, the gradients arriving at `y` and `h_n`, and the forward's `lengths` if it
    /// had them.
    GruBackwardInputs { x, h0, w_ih, w_hh, y, gates, hidden, dy, dh_n; lengths }
    /// [`Op::GruBackward`](crate::Op::GruBackward): `dgates` and `dhidden` `[T, B, 3H]` (the gradients at the input
    /// and the hidden pre-activations; working space), `dh0` `[B, H]`, `dw_ih` `[3H, I]`,
    /// `dw_hh` `[3H, H]`, `db_ih`, `db_hh` `[3H]`, and `dx` `[T, B, I]` when the input
    /// gradient is wanted.
    -> GruBackwardOutputs { dgates, dhidden, dh0, dw_ih, dw_hh, db_ih, db_hh; dx }
}

signature! {
    /// [`Op::Embedding`](crate::Op::Embedding): `table` `[V, E]`, `ids` `[N]`.
    EmbeddingInputs { table, ids }
    /// [`Op::Embedding`](crate::Op::Embedding): `out` `[N, E]`.
    -> EmbeddingOutputs { out }
}

signature! {
    /// [`Op::EmbeddingBackward`](crate::Op::EmbeddingBackward): `ids` `[N]`, `dout` `[N, E]`.
    EmbeddingBackwardInputs { ids, dout }
    /// [`Op::EmbeddingBackward`](crate::Op::EmbeddingBackward): `dtable` `[V, E]`.
    -> EmbeddingBackwardOutputs { dtable }
}

signature! {
    /// [`Op::BatchNormBackward`](crate::Op::BatchNormBackward): `x` `[B, C]`, `gamma`, the `mean` and `var` `[C]` the
    /// forward used, and `dy` `[B, C]`.
    BatchNormBackwardInputs { x, gamma, mean, var, dy }
    /// [`Op::BatchNormBackward`](crate::Op::BatchNormBackward): `dx` `[B, C]`, `dgamma`, `dbeta` `[C]`.
    -> BatchNormBackwardOutputs { dx, dgamma, dbeta }
}

signature! {
    /// [`Op::LayerNorm`](crate::Op::LayerNorm): `x` `[.., F]`, `gamma`, `beta` `[F]`.
    LayerNormInputs { x, gamma, beta }
    /// [`Op::LayerNorm`](crate::Op::LayerNorm): `y` `[.., F]`, each row's `mean` and `rstd` `[..]`.
    -> LayerNormOutputs { y, mean, rstd }
}

signature! {
    /// [`Op::LayerNormBackward`](crate::Op::LayerNormBackward): `x` `[.., F]`, `gamma` `[F]`, the
    /// forward's `mean` and `rstd` `[..]`, and `dy` `[.., F]`.
    LayerNormBackwardInputs { x, gamma, mean, rstd, dy }
    /// [`Op::LayerNormBackward`](crate::Op::LayerNormBackward): `dx` `[.., F]`, `dgamma`, `dbeta` `[F]`.
    -> LayerNormBackwardOutputs { dx, dgamma, dbeta }
}

signature! {
    /// [`Op::BatchNormStatsUpdate`](crate::Op::BatchNormStatsUpdate): the batch `mean` and biased batch `var` `[C]`.
    StatsUpdateInputs { mean, var }
    /// [`Op::BatchNormStatsUpdate`](crate::Op::BatchNormStatsUpdate) targets: `running_mean`, `running_var` `[C]`.
    -> StatsUpdateTargets { running_mean, running_var }
}

signature! {
    /// [`Op::SoftmaxCrossEntropy`](crate::Op::SoftmaxCrossEntropy): `logits` `[B, K]`, `labels` `[B]`.
    SoftmaxCrossEntropyInputs { logits, labels }
    /// [`Op::SoftmaxCrossEntropy`](crate::Op::SoftmaxCrossEntropy): the mean `loss` `[1]` and `probs` `[B, K]`.
    -> SoftmaxCrossEntropyOutputs { loss, probs }
}

signature! {
    /// [`Op::SoftmaxCrossEntropyBackward`](crate::Op::SoftmaxCrossEntropyBackward): `probs`, `labels`, `dloss` `[1]`.
    SoftmaxCrossEntropyBackwardInputs { probs, labels, dloss }
    /// [`Op::SoftmaxCrossEntropyBackward`](crate::Op::SoftmaxCrossEntropyBackward): `dlogits` `[B, K]`.
    -> SoftmaxCrossEntropyBackwardOutputs { dlogits }
}

signature! {
    /// [`Op::MseLoss`](crate::Op::MseLoss): `pred` and `target` of one shape.
    MseLossInputs { pred, target }
    /// [`Op::MseLoss`](crate::Op::MseLoss): the mean `loss` `[1]`.
    -> MseLossOutputs { loss }
}

signature! {
    /// [`Op::MseLossBackward`](crate::Op::MseLossBackward): `pred`, `target`, `dloss` `[1]`.
    MseLossBackwardInputs { pred, target, dloss }
    /// [`Op::MseLossBackward`](crate::Op::MseLossBackward): `dpred`, of `pred`'s shape.
    -> MseLossBackwardOutputs { dpred }
}

signature! {
    /// [`Op::Adam`](crate::Op::Adam): the gradient `grad` and the host-written `scalars` `[2]`.
    AdamInputs { grad, scalars }
    /// [`Op::Adam`](crate::Op::Adam) targets: `param` and its moments `m`, `v`.
    -> AdamTargets { param, m, v }
}

signature! {
    /// [`Op::Sgd`](crate::Op::Sgd): the gradient `grad` and the host-written `scalars` `[2]`.
    SgdInputs { grad, scalars }
    /// [`Op::Sgd`](crate::Op::Sgd) targets: `param` and its momentum buffer `buf`.
    -> SgdTargets { param, buf }
}

signature! {
    /// [`Op::SumSquares`](crate::Op::SumSquares): `x` of any shape.
    SumSquaresInputs { x }
    /// [`Op::SumSquares`](crate::Op::SumSquares): `total` `[1]`.
    -> SumSquaresOutputs { total }
}

signature! {
    /// [`Op::ClipGrad`](crate::Op::ClipGrad): `x` and the squared global norm `total_sq` `[1]`.
    ClipGradInputs { x, total_sq }
    /// [`Op::ClipGrad`](crate::Op::ClipGrad): `y` of `x`'s shape.
    -> ClipGradOutputs { y }
}

signature! {
    /// [`Op::Dropout`](crate::Op::Dropout): `x` of any shape and the step's `key` `[2]`.
    DropoutInputs { x, key }
    /// [`Op::Dropout`](crate::Op::Dropout): `y` of `x`'s shape.
    -> DropoutOutputs { y }
}

signature! {
    /// [`Op::Copy`](crate::Op::Copy): `src`.
    CopyInputs { src }
    /// [`Op::Copy`](crate::Op::Copy) target: `dst`, of `src`'s shape.
    -> CopyTargets { dst }
}

/// [`Op::Fill`](crate::Op::Fill) has no inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillInputs<T>(pub PhantomData<T>);

impl<T> Default for FillInputs<T> {
    fn default() -> Self {
        FillInputs(PhantomData)
    }
}

impl<T> Args<T> for FillInputs<T> {
    const NAMES: &'static [&'static str] = &[];

    fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
        let [] = arity(what, items)?;
        Ok(FillInputs(PhantomData))
    }

    fn into_vec(self) -> Vec<T> {
        Vec::new()
    }
}

args_struct! {
    /// [`Op::Fill`](crate::Op::Fill): `out` of the op's `shape`.
    FillOutputs { out }
}

impl<T> OpInputs<T> for FillInputs<T> {
    type Outputs = FillOutputs<T>;
}

/// A mean and a variance `[C]` (BatchNorm's statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeanVar<T> {
    pub mean: T,
    pub var: T,
}

/// [`Op::BatchNorm`](crate::Op::BatchNorm): `x` `[B, C]`, `gamma`, `beta` `[C]`, and in inference the `running`
/// statistics to normalise with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchNormInputs<T> {
    pub x: T,
    pub gamma: T,
    pub beta: T,
    pub running: Option<MeanVar<T>>,
}

/// [`Op::BatchNorm`](crate::Op::BatchNorm): `y` `[B, C]`, and in training the `batch` statistics (mean and
/// biased variance) it computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchNormOutputs<T> {
    pub y: T,
    pub batch: Option<MeanVar<T>>,
}

impl<T> Args<T> for BatchNormInputs<T> {
    const NAMES: &'static [&'static str] = &["x", "gamma", "beta", "running_mean", "running_var"];

    fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
        if items.len() == 3 {
            let [x, gamma, beta] = arity(what, items)?;
            return Ok(BatchNormInputs {
                x,
                gamma,
                beta,
                running: None,
            });
        }
        let [x, gamma, beta, mean, var] = arity(what, items)?;
        let running = Some(MeanVar { mean, var });
        Ok(BatchNormInputs {
            x,
            gamma,
            beta,
            running,
        })
    }

    fn into_vec(self) -> Vec<T> {
        let mut v = vec![self.x, self.gamma, self.beta];
        v.extend(self.running.map(|s| [s.mean, s.var]).into_iter().flatten());
        v
    }
}

impl<T> Args<T> for BatchNormOutputs<T> {
    const NAMES: &'static [&'static str] = &["y", "mean", "var"];

    fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
        if items.len() == 1 {
            let [y] = arity(what, items)?;
            return Ok(BatchNormOutputs { y, batch: None });
        }
        let [y, mean, var] = arity(what, items)?;
        let batch = Some(MeanVar { mean, var });
        Ok(BatchNormOutputs { y, batch })
    }

    fn into_vec(self) -> Vec<T> {
        let mut v = vec![self.y];
        v.extend(self.batch.map(|s| [s.mean, s.var]).into_iter().flatten());
        v
    }
}

impl<T> OpInputs<T> for BatchNormInputs<T> {
    type Outputs = BatchNormOutputs<T>;
}

/// Where the statistics of `Op::BatchNorm` come from, as a kernel uses them; `R` is what a
/// backend reads through, `W` what it writes through.
#[derive(Debug, Clone, Copy)]
pub enum BatchNormStats<R, W> {
    /// Training: the batch mean and biased variance `[C]` are computed and written here.
    Batch { mean: W, var: W },
    /// Inference: the running mean and variance `[C]` are read.
    Running { mean: R, var: R },
}

impl<R, W> BatchNormStats<R, W> {
    /// The statistics of one call: those it computes (training) or those it reads.
    pub fn of(running: Option<MeanVar<R>>, batch: Option<MeanVar<W>>) -> Result<Self, String> {
        match (batch, running) {
            (Some(MeanVar { mean, var }), None) => Ok(BatchNormStats::Batch { mean, var }),
            (None, Some(MeanVar { mean, var })) => Ok(BatchNormStats::Running { mean, var }),
            _ => Err("batchnorm_forward: exactly one of batch or running statistics".into()),
        }
    }
}

/// Each item with its name and the number of elements it has for a layer of `d`, for
/// kernels that check the lengths they are handed.
pub type Expected<'a, T> = Vec<(&'static str, &'a T, usize)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_counts_are_errors() {
        let e = LstmForwardInputs::from_vec("inputs", vec![0u8; 6]).unwrap_err();
        assert_eq!(e, "expected 7 inputs, got 6");
        let e = LstmForwardOutputs::from_vec("outputs", vec![0u8; 6]).unwrap_err();
        assert_eq!(e, "expected at most 5 outputs, got 6");
        let out = LstmForwardOutputs::from_vec("outputs", vec![1u8, 2, 3, 4]).unwrap();
        assert_eq!((out.gates, out.cells), (4, None));
        let out = LstmForwardOutputs::from_vec("outputs", vec![1u8, 2, 3, 4, 5]).unwrap();
        assert_eq!(out.cells, Some(5));
    }

    #[test]
    fn lists_round_trip_through_the_named_structs() {
        let inputs = BatchNormInputs::from_vec("inputs", vec![1u8, 2, 3, 4, 5]).unwrap();
        assert_eq!(inputs.running, Some(MeanVar { mean: 4, var: 5 }));
        assert_eq!(inputs.into_vec(), [1, 2, 3, 4, 5]);
        let outputs = BatchNormOutputs::from_vec("outputs", vec![7u8]).unwrap();
        assert_eq!(outputs.into_vec(), [7]);
        let grads = LstmBackwardOutputs::from_vec("outputs", (0u8..6).collect()).unwrap();
        assert_eq!((grads.db, grads.dx), (5, None));
        assert_eq!(grads.into_vec(), [0, 1, 2, 3, 4, 5]);
        assert!(FillInputs::<u8>::from_vec("inputs", vec![1]).is_err());
    }
}
