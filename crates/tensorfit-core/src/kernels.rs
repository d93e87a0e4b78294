//! [`OpKernels`]: one typed method per op, and [`dispatch`](crate::dispatch()), the one place an [`Op`] is
//! turned into a call of it.
//!
//! A backend's [`crate::Backend::execute`] receives an op and two lists of views. It has
//! its [`crate::Ledger`] check them ([`crate::Ledger::check_call`]: shapes against
//! [`Op::infer_shapes`], ranges inside live buffers, no output overlapping another view),
//! turns each view into its own handle (`OpKernels::In` / `OpKernels::Out`: host slices
//! on the CPU, buffer regions on wgpu, device addresses on CUDA), and calls [`dispatch`](crate::dispatch()),
//! which names the handles with the op's structs from [`crate::args`] and calls the
//! method. So the argument list of an op *is* the method's signature, as in candle's
//! `BackendStorage`; a new op is a compile error here until it has a method, and in every
//! backend until it implements it.
//!
//! Every method gets the op's attributes, the input shapes by name (`s`; the LSTM and GRU
//! methods get the layer's [`LstmDims`] or [`GruDims`] instead), the inputs and the outputs (for update ops: the
//! targets, read and overwritten). `dispatch` is generic, not a trait object: the
//! [`crate::Backend`] trait above it stays object-safe.

use crate::args::*;
use crate::backend::TensorView;
use crate::dropout::DropoutParams;
use crate::error::Result;
use crate::gru::GruDims;
use crate::op::{Activation, AdamParams, BinaryOp, LstmDims, Op, SgdParams};
use crate::shape::Shape;

/// Beside the row rules in `rows.rs` (this file keeps room under the 600-line limit), and
/// still found here by the kernels.
pub use crate::rows::batchnorm_dims;

pub use crate::attention_ops::AttentionKernels;
pub use crate::conv_ops::ConvKernels;
pub use crate::pool_ops::PoolKernels;
pub use crate::positions_ops::PositionKernels;

/// What every family of kernels of one backend shares: its name and its handles.
pub trait KernelTypes {
    /// The backend's name in errors (`cpu`, `wgpu`, `cuda`).
    const BACKEND: &'static str;
    /// What a kernel reads a tensor through.
    type In;
    /// What a kernel writes a tensor through (update ops also read their targets).
    type Out;
}

/// The kernels of one backend, one method per [`Op`] variant, named as `Op::name` names
/// the kernel. See the module documentation. A family of ops may declare its methods in
/// its own trait beside its ops (as [`PoolKernels`] in `pool_ops.rs`), listed here as a
/// supertrait; a backend implements it in its own file for that family.
pub trait OpKernels:
    KernelTypes + PoolKernels + ConvKernels + PositionKernels + AttentionKernels
{
    fn matmul(
        &mut self,
        trans: (bool, bool),
        s: MatMulInputs<&Shape>,
        i: MatMulInputs<Self::In>,
        o: MatMulOutputs<Self::Out>,
    ) -> Result<()>;

    fn binary(
        &mut self,
        op: BinaryOp,
        s: BinaryInputs<&Shape>,
        i: BinaryInputs<Self::In>,
        o: BinaryOutputs<Self::Out>,
    ) -> Result<()>;

    fn activation_forward(
        &mut self,
        f: Activation,
        s: ActivationInputs<&Shape>,
        i: ActivationInputs<Self::In>,
        o: ActivationOutputs<Self::Out>,
    ) -> Result<()>;

    fn activation_backward(
        &mut self,
        f: Activation,
        s: ActivationBackwardInputs<&Shape>,
        i: ActivationBackwardInputs<Self::In>,
        o: ActivationBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    /// `shape` is the output's (the op's attribute).
    fn sum_to_shape(
        &mut self,
        shape: &Shape,
        s: SumToShapeInputs<&Shape>,
        i: SumToShapeInputs<Self::In>,
        o: SumToShapeOutputs<Self::Out>,
    ) -> Result<()>;

    /// `shape` is the output's (the op's attribute); there are no inputs.
    fn fill(&mut self, value: f32, shape: &Shape, o: FillOutputs<Self::Out>) -> Result<()>;

    fn slice_time(
        &mut self,
        t: usize,
        s: SliceTimeInputs<&Shape>,
        i: SliceTimeInputs<Self::In>,
        o: SliceTimeOutputs<Self::Out>,
    ) -> Result<()>;

    fn scatter_time(
        &mut self,
        t: usize,
        steps: usize,
        s: ScatterTimeInputs<&Shape>,
        i: ScatterTimeInputs<Self::In>,
        o: ScatterTimeOutputs<Self::Out>,
    ) -> Result<()>;

    fn reverse_time(
        &mut self,
        s: ReverseTimeInputs<&Shape>,
        i: ReverseTimeInputs<Self::In>,
        o: ReverseTimeOutputs<Self::Out>,
    ) -> Result<()>;

    fn concat_features(
        &mut self,
        s: ConcatFeaturesInputs<&Shape>,
        i: ConcatFeaturesInputs<Self::In>,
        o: ConcatFeaturesOutputs<Self::Out>,
    ) -> Result<()>;

    /// `start` and `width` are the op's attributes: the features of `x` copied.
    fn slice_features(
        &mut self,
        start: usize,
        width: usize,
        s: SliceFeaturesInputs<&Shape>,
        i: SliceFeaturesInputs<Self::In>,
        o: SliceFeaturesOutputs<Self::Out>,
    ) -> Result<()>;

    /// `o.cells` is present when the forward keeps its activations for backward.
    fn lstm_forward(
        &mut self,
        d: LstmDims,
        i: LstmForwardInputs<Self::In>,
        o: LstmForwardOutputs<Self::Out>,
    ) -> Result<()>;

    /// `o.dx` is present when the input gradient is wanted.
    fn lstm_backward(
        &mut self,
        d: LstmDims,
        i: LstmBackwardInputs<Self::In>,
        o: LstmBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    /// `o.gates` and `o.hidden` hold `d.gate_steps(keep_for_backward)` steps.
    fn gru_forward(
        &mut self,
        d: GruDims,
        keep_for_backward: bool,
        i: GruForwardInputs<Self::In>,
        o: GruForwardOutputs<Self::Out>,
    ) -> Result<()>;

    /// `o.dx` is present when the input gradient is wanted.
    fn gru_backward(
        &mut self,
        d: GruDims,
        i: GruBackwardInputs<Self::In>,
        o: GruBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn embedding(
        &mut self,
        s: EmbeddingInputs<&Shape>,
        i: EmbeddingInputs<Self::In>,
        o: EmbeddingOutputs<Self::Out>,
    ) -> Result<()>;

    /// `vocab` is the table's rows (the op's attribute).
    fn embedding_backward(
        &mut self,
        vocab: usize,
        s: EmbeddingBackwardInputs<&Shape>,
        i: EmbeddingBackwardInputs<Self::In>,
        o: EmbeddingBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    /// Training when `o.batch` is present (and `i.running` absent), inference otherwise;
    /// [`BatchNormStats::of`] gives the kernel its statistics.
    fn batchnorm_forward(
        &mut self,
        eps: f32,
        s: BatchNormInputs<&Shape>,
        i: BatchNormInputs<Self::In>,
        o: BatchNormOutputs<Self::Out>,
    ) -> Result<()>;

    fn batchnorm_backward(
        &mut self,
        eps: f32,
        training: bool,
        s: BatchNormBackwardInputs<&Shape>,
        i: BatchNormBackwardInputs<Self::In>,
        o: BatchNormBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn layernorm_forward(
        &mut self,
        eps: f32,
        s: LayerNormInputs<&Shape>,
        i: LayerNormInputs<Self::In>,
        o: LayerNormOutputs<Self::Out>,
    ) -> Result<()>;

    fn layernorm_backward(
        &mut self,
        s: LayerNormBackwardInputs<&Shape>,
        i: LayerNormBackwardInputs<Self::In>,
        o: LayerNormBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn batchnorm_stats_update(
        &mut self,
        momentum: f32,
        unbias: f32,
        s: StatsUpdateInputs<&Shape>,
        i: StatsUpdateInputs<Self::In>,
        o: StatsUpdateTargets<Self::Out>,
    ) -> Result<()>;

    fn softmax_cross_entropy_forward(
        &mut self,
        s: SoftmaxCrossEntropyInputs<&Shape>,
        i: SoftmaxCrossEntropyInputs<Self::In>,
        o: SoftmaxCrossEntropyOutputs<Self::Out>,
    ) -> Result<()>;

    fn softmax_cross_entropy_backward(
        &mut self,
        s: SoftmaxCrossEntropyBackwardInputs<&Shape>,
        i: SoftmaxCrossEntropyBackwardInputs<Self::In>,
        o: SoftmaxCrossEntropyBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn mse_loss_forward(
        &mut self,
        s: MseLossInputs<&Shape>,
        i: MseLossInputs<Self::In>,
        o: MseLossOutputs<Self::Out>,
    ) -> Result<()>;

    fn mse_loss_backward(
        &mut self,
        s: MseLossBackwardInputs<&Shape>,
        i: MseLossBackwardInputs<Self::In>,
        o: MseLossBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn adam_update(
        &mut self,
        p: AdamParams,
        s: AdamInputs<&Shape>,
        i: AdamInputs<Self::In>,
        o: AdamTargets<Self::Out>,
    ) -> Result<()>;

    fn sgd_update(
        &mut self,
        p: SgdParams,
        s: SgdInputs<&Shape>,
        i: SgdInputs<Self::In>,
        o: SgdTargets<Self::Out>,
    ) -> Result<()>;

    fn sum_squares(
        &mut self,
        s: SumSquaresInputs<&Shape>,
        i: SumSquaresInputs<Self::In>,
        o: SumSquaresOutputs<Self::Out>,
    ) -> Result<()>;

    fn clip_grad(
        &mut self,
        max_norm: f32,
        value: f32,
        s: ClipGradInputs<&Shape>,
        i: ClipGradInputs<Self::In>,
        o: ClipGradOutputs<Self::Out>,
    ) -> Result<()>;

    fn dropout(
        &mut self,
        p: DropoutParams,
        s: DropoutInputs<&Shape>,
        i: DropoutInputs<Self::In>,
        o: DropoutOutputs<Self::Out>,
    ) -> Result<()>;

    fn copy(
        &mut self,
        s: CopyInputs<&Shape>,
        i: CopyInputs<Self::In>,
        o: CopyTargets<Self::Out>,
    ) -> Result<()>;
}

/// The four recurrent methods of an [`OpKernels`] implementation whose `lstm` and `gru`
/// modules take a recurrent call whole: the kernel object, the layer's dims and the op's
/// named tensors by reference (`lstm::lstm_forward(self, d, &i, &o)`, and likewise
/// `lstm_backward`, `gru_forward` with `keep_for_backward`, `gru_backward`). The GPU
/// backends' (wgpu plans launches, CUDA launches kernels) are written so; invoked inside
/// the `impl OpKernels` block, where `lstm` and `gru` name the backend's modules.
#[macro_export]
macro_rules! recurrent_kernels {
    () => {
        fn lstm_forward(
            &mut self,
            d: $crate::LstmDims,
            i: $crate::args::LstmForwardInputs<Self::In>,
            o: $crate::args::LstmForwardOutputs<Self::Out>,
        ) -> $crate::Result<()> {
            lstm::lstm_forward(self, d, &i, &o)
        }

        fn lstm_backward(
            &mut self,
            d: $crate::LstmDims,
            i: $crate::args::LstmBackwardInputs<Self::In>,
            o: $crate::args::LstmBackwardOutputs<Self::Out>,
        ) -> $crate::Result<()> {
            lstm::lstm_backward(self, d, &i, &o)
        }

        fn gru_forward(
            &mut self,
            d: $crate::GruDims,
            keep_for_backward: bool,
            i: $crate::args::GruForwardInputs<Self::In>,
            o: $crate::args::GruForwardOutputs<Self::Out>,
        ) -> $crate::Result<()> {
            gru::gru_forward(self, d, keep_for_backward, &i, &o)
        }

        fn gru_backward(
            &mut self,
            d: $crate::GruDims,
            i: $crate::args::GruBackwardInputs<Self::In>,
            o: $crate::args::GruBackwardOutputs<Self::Out>,
        ) -> $crate::Result<()> {
            gru::gru_backward(self, d, &i, &o)
        }
    };
}

/// An op call whose views have been checked ([`crate::Ledger::check_call`] makes them):
/// the only way into [`dispatch`](crate::dispatch()), so no kernel sees an unchecked call.
#[derive(Debug, Clone, Copy)]
pub struct OpCall<'a> {
    op: &'a Op,
    inputs: &'a [TensorView],
    outputs: &'a [TensorView],
}

impl<'a> OpCall<'a> {
    /// Wraps a call whose shapes, ranges and overlaps have been checked.
    pub(crate) fn checked(op: &'a Op, inputs: &'a [TensorView], outputs: &'a [TensorView]) -> Self {
        OpCall {
            op,
            inputs,
            outputs,
        }
    }

    pub fn op(&self) -> &'a Op {
        self.op
    }

    pub fn inputs(&self) -> &'a [TensorView] {
        self.inputs
    }

    pub fn outputs(&self) -> &'a [TensorView] {
        self.outputs
    }
}

/// A shape as a matrix: `[rows, width]`, the rows being every leading dimension (as
/// [`crate::rows`] reads `[T, B, F]` as `[T·B, F]`).
pub fn dims2(shape: &Shape) -> [usize; 2] {
    let width = shape.0.last().copied().unwrap_or(0);
    [crate::rows::leading(shape).numel(), width]
}
