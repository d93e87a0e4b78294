//! The kernels of the CPU backend: one file per op family, one function per
//! [`tensorfit_core::Op`], named as `Op::name` names it in every backend, and
//! [`HostKernels`], which implements [`OpKernels`] with them.
//!
//! Kernels work on host slices, so they can be called (and tested) without a backend.
//! Every kernel checks the lengths of its slices against the dimensions it is given and
//! returns an error on a mismatch, so indexing inside a kernel cannot go out of bounds
//! whoever calls it. Layouts follow the op conventions: row-major, contiguous, sequences
//! time-major `[T, B, F]`.

pub mod adam;
pub mod at_lengths;
pub mod attention;
pub mod attention_fast;
pub mod batchnorm;
pub mod bidir;
pub mod conv;
pub mod dropout;
pub mod elementwise;
pub mod fastmath;
pub mod gather;
pub mod gemm;
pub mod gemm_fast;
pub mod gru;
pub mod layernorm;
pub mod lstm;
pub mod mse;
pub mod optim;
pub mod packs;
pub mod pool;
pub mod positions;
pub(crate) mod recurrent;
pub mod softmax;

use std::marker::PhantomData;

use tensorfit_core::args::*;
use tensorfit_core::kernels::dims2;
use tensorfit_core::{
    Activation, AdamParams, BinaryOp, DropoutParams, GruDims, KernelTypes, LstmDims, OpKernels,
    Result, SgdParams, Shape, TensorView,
};

use crate::backend_error;
use packs::{PackCache, Packer, Source};

/// Below this many elements a fused pass runs on one thread: splitting work across
/// rayon's pool costs a few microseconds, more than a small pass takes.
pub const PARALLEL_MIN_ELEMENTS: usize = 16_384;

/// Checks that `slice` (called `what` in the message of kernel `kernel`) has `want`
/// elements.
pub(crate) fn check_len(kernel: &str, what: &str, slice: &[f32], want: usize) -> Result<()> {
    if slice.len() == want {
        Ok(())
    } else {
        Err(backend_error(format!(
            "{kernel}: `{what}` has {} elements, expected {want}",
            slice.len()
        )))
    }
}

/// The kernels of this backend as [`OpKernels`]: each method hands the named slices of
/// one call to the kernel function of the same name. With [`HostKernels::keeping`], an
/// inference forward of a recurrent layer keeps its packed weights in the backend's cache
/// (`packs.rs`).
#[derive(Debug, Default)]
pub struct HostKernels<'a> {
    /// The backend's cache, and the views of the call's inputs (which name the weights'
    /// sources).
    packs: Option<(&'a mut PackCache, &'a [TensorView])>,
    _slices: PhantomData<&'a mut [f32]>,
}

impl<'a> HostKernels<'a> {
    /// Kernels that pack every weight afresh.
    pub fn new() -> Self {
        HostKernels {
            packs: None,
            _slices: PhantomData,
        }
    }

    /// Kernels for one call with input views `inputs`, keeping packed weights in `cache`.
    pub fn keeping(cache: &'a mut PackCache, inputs: &'a [TensorView]) -> Self {
        HostKernels {
            packs: Some((cache, inputs)),
            _slices: PhantomData,
        }
    }

    /// The packer of a recurrent forward whose inputs struct is `I`: through the cache
    /// for its `w_ih` and `w_hh` when it keeps nothing for a backward, else afresh.
    fn packer<I: Args<TensorView>>(
        &mut self,
        keep_for_backward: bool,
        weights: impl Fn(&I) -> [&TensorView; 2],
    ) -> Packer<'_> {
        let Some((cache, views)) = self.packs.as_mut().filter(|_| !keep_for_backward) else {
            return Packer::fresh();
        };
        let Ok(named) = I::from_vec("inputs", views.to_vec()) else {
            return Packer::fresh();
        };
        let [w_ih, w_hh] = weights(&named).map(Source::of);
        Packer::cached(cache, vec![("w_ih", w_ih), ("w_hh", w_hh)])
    }
}

impl<'a> KernelTypes for HostKernels<'a> {
    const BACKEND: &'static str = "cpu";
    type In = &'a [f32];
    type Out = &'a mut [f32];
}

impl<'a> OpKernels for HostKernels<'a> {
    fn matmul(
        &mut self,
        (trans_a, trans_b): (bool, bool),
        s: MatMulInputs<&Shape>,
        i: MatMulInputs<Self::In>,
        o: MatMulOutputs<Self::Out>,
    ) -> Result<()> {
        gemm::matmul(i.a, dims2(s.a), i.b, dims2(s.b), trans_a, trans_b, o.c)
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        _: BinaryInputs<&Shape>,
        i: BinaryInputs<Self::In>,
        o: BinaryOutputs<Self::Out>,
    ) -> Result<()> {
        elementwise::binary(op, i.a, i.b, o.out)
    }

    fn activation_forward(
        &mut self,
        f: Activation,
        _: ActivationInputs<&Shape>,
        i: ActivationInputs<Self::In>,
        o: ActivationOutputs<Self::Out>,
    ) -> Result<()> {
        elementwise::activation_forward(f, i.x, o.y)
    }

    fn activation_backward(
        &mut self,
        f: Activation,
        _: ActivationBackwardInputs<&Shape>,
        i: ActivationBackwardInputs<Self::In>,
        o: ActivationBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        elementwise::activation_backward(f, i.y, i.x, i.dy, o.dx)
    }

    fn sum_to_shape(
        &mut self,
        _: &Shape,
        _: SumToShapeInputs<&Shape>,
        i: SumToShapeInputs<Self::In>,
        o: SumToShapeOutputs<Self::Out>,
    ) -> Result<()> {
        elementwise::sum_to_shape(i.x, o.out)
    }

    fn fill(&mut self, value: f32, _: &Shape, o: FillOutputs<Self::Out>) -> Result<()> {
        elementwise::fill(value, o.out)
    }

    fn slice_time(
        &mut self,
        t: usize,
        _: SliceTimeInputs<&Shape>,
        i: SliceTimeInputs<Self::In>,
        o: SliceTimeOutputs<Self::Out>,
    ) -> Result<()> {
        match i.lengths {
            Some(lengths) => at_lengths::slice_time(t, lengths, i.x, o.out),
            None => elementwise::slice_time(t, i.x, o.out),
        }
    }

    fn scatter_time(
        &mut self,
        t: usize,
        _: usize,
        _: ScatterTimeInputs<&Shape>,
        i: ScatterTimeInputs<Self::In>,
        o: ScatterTimeOutputs<Self::Out>,
    ) -> Result<()> {
        match i.lengths {
            Some(lengths) => at_lengths::scatter_time(t, lengths, i.x, o.out),
            None => elementwise::scatter_time(t, i.x, o.out),
        }
    }

    fn reverse_time(
        &mut self,
        s: ReverseTimeInputs<&Shape>,
        i: ReverseTimeInputs<Self::In>,
        o: ReverseTimeOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = tensorfit_core::time_dims(s.x);
        bidir::reverse_time(dims, i.lengths, i.x, o.y)
    }

    fn concat_features(
        &mut self,
        s: ConcatFeaturesInputs<&Shape>,
        i: ConcatFeaturesInputs<Self::In>,
        o: ConcatFeaturesOutputs<Self::Out>,
    ) -> Result<()> {
        let ([rows, fa], [_, fb]) = (dims2(s.a), dims2(s.b));
        bidir::concat_features(rows, (i.a, fa), (i.b, fb), o.out)
    }

    fn slice_features(
        &mut self,
        start: usize,
        width: usize,
        s: SliceFeaturesInputs<&Shape>,
        i: SliceFeaturesInputs<Self::In>,
        o: SliceFeaturesOutputs<Self::Out>,
    ) -> Result<()> {
        let [rows, features] = dims2(s.x);
        bidir::slice_features((start, width), (i.x, rows, features), o.out)
    }

    fn lstm_forward(
        &mut self,
        d: LstmDims,
        i: LstmForwardInputs<Self::In>,
        o: LstmForwardOutputs<Self::Out>,
    ) -> Result<()> {
        // Without cells the forward keeps nothing for a backward.
        let keep = o.cells.is_some();
        let mut packs = self.packer(keep, |v: &LstmForwardInputs<TensorView>| [&v.w_ih, &v.w_hh]);
        lstm::lstm_forward_packed(d, &i, o, &mut packs)
    }

    fn lstm_backward(
        &mut self,
        d: LstmDims,
        i: LstmBackwardInputs<Self::In>,
        o: LstmBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        lstm::lstm_backward(d, &i, o)
    }

    fn gru_forward(
        &mut self,
        d: GruDims,
        keep_for_backward: bool,
        i: GruForwardInputs<Self::In>,
        o: GruForwardOutputs<Self::Out>,
    ) -> Result<()> {
        let mut packs = self.packer(keep_for_backward, |v: &GruForwardInputs<TensorView>| {
            [&v.w_ih, &v.w_hh]
        });
        gru::gru_forward_packed(d, keep_for_backward, &i, o, &mut packs)
    }

    fn gru_backward(
        &mut self,
        d: GruDims,
        i: GruBackwardInputs<Self::In>,
        o: GruBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        gru::gru_backward(d, &i, o)
    }

    fn embedding(
        &mut self,
        s: EmbeddingInputs<&Shape>,
        i: EmbeddingInputs<Self::In>,
        o: EmbeddingOutputs<Self::Out>,
    ) -> Result<()> {
        gather::embedding(i.table, s.table.dim(0), i.ids, o.out)
    }

    fn embedding_backward(
        &mut self,
        vocab: usize,
        _: EmbeddingBackwardInputs<&Shape>,
        i: EmbeddingBackwardInputs<Self::In>,
        o: EmbeddingBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        gather::embedding_backward(vocab, i.ids, i.dout, o.dtable)
    }

    fn batchnorm_forward(
        &mut self,
        eps: f32,
        _: BatchNormInputs<&Shape>,
        i: BatchNormInputs<Self::In>,
        o: BatchNormOutputs<Self::Out>,
    ) -> Result<()> {
        let stats = BatchNormStats::of(i.running, o.batch).map_err(backend_error)?;
        batchnorm::batchnorm_forward(eps, i.x, i.gamma, i.beta, stats, o.y)
    }

    fn batchnorm_backward(
        &mut self,
        eps: f32,
        training: bool,
        _: BatchNormBackwardInputs<&Shape>,
        i: BatchNormBackwardInputs<Self::In>,
        o: BatchNormBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        batchnorm::batchnorm_backward(eps, training, &i, o.dx, o.dgamma, o.dbeta)
    }

    fn layernorm_forward(
        &mut self,
        eps: f32,
        _: LayerNormInputs<&Shape>,
        i: LayerNormInputs<Self::In>,
        o: LayerNormOutputs<Self::Out>,
    ) -> Result<()> {
        let x = (i.x, i.gamma, i.beta);
        layernorm::layernorm_forward(eps, x, o.y, o.mean, o.rstd)
    }

    fn layernorm_backward(
        &mut self,
        _: LayerNormBackwardInputs<&Shape>,
        i: LayerNormBackwardInputs<Self::In>,
        o: LayerNormBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        layernorm::layernorm_backward(&i, o.dx, o.dgamma, o.dbeta)
    }

    fn batchnorm_stats_update(
        &mut self,
        momentum: f32,
        unbias: f32,
        _: StatsUpdateInputs<&Shape>,
        i: StatsUpdateInputs<Self::In>,
        o: StatsUpdateTargets<Self::Out>,
    ) -> Result<()> {
        let (mean, var) = (i.mean, i.var);
        batchnorm::batchnorm_stats_update(
            momentum,
            unbias,
            mean,
            var,
            o.running_mean,
            o.running_var,
        )
    }

    fn softmax_cross_entropy_forward(
        &mut self,
        _: SoftmaxCrossEntropyInputs<&Shape>,
        i: SoftmaxCrossEntropyInputs<Self::In>,
        o: SoftmaxCrossEntropyOutputs<Self::Out>,
    ) -> Result<()> {
        softmax::softmax_cross_entropy_forward(i.logits, i.labels, o.loss, o.probs)
    }

    fn softmax_cross_entropy_backward(
        &mut self,
        _: SoftmaxCrossEntropyBackwardInputs<&Shape>,
        i: SoftmaxCrossEntropyBackwardInputs<Self::In>,
        o: SoftmaxCrossEntropyBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        softmax::softmax_cross_entropy_backward(i.probs, i.labels, i.dloss, o.dlogits)
    }

    fn mse_loss_forward(
        &mut self,
        _: MseLossInputs<&Shape>,
        i: MseLossInputs<Self::In>,
        o: MseLossOutputs<Self::Out>,
    ) -> Result<()> {
        mse::mse_loss_forward(i.pred, i.target, o.loss)
    }

    fn mse_loss_backward(
        &mut self,
        _: MseLossBackwardInputs<&Shape>,
        i: MseLossBackwardInputs<Self::In>,
        o: MseLossBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        mse::mse_loss_backward(i.pred, i.target, i.dloss, o.dpred)
    }

    fn adam_update(
        &mut self,
        p: AdamParams,
        _: AdamInputs<&Shape>,
        i: AdamInputs<Self::In>,
        o: AdamTargets<Self::Out>,
    ) -> Result<()> {
        adam::adam_update(p, i.grad, i.scalars, o.param, o.m, o.v)
    }

    fn sgd_update(
        &mut self,
        p: SgdParams,
        _: SgdInputs<&Shape>,
        i: SgdInputs<Self::In>,
        o: SgdTargets<Self::Out>,
    ) -> Result<()> {
        optim::sgd_update(p, i.grad, i.scalars, o.param, o.buf)
    }

    fn sum_squares(
        &mut self,
        _: SumSquaresInputs<&Shape>,
        i: SumSquaresInputs<Self::In>,
        o: SumSquaresOutputs<Self::Out>,
    ) -> Result<()> {
        optim::sum_squares(i.x, o.total)
    }

    fn clip_grad(
        &mut self,
        max_norm: f32,
        value: f32,
        _: ClipGradInputs<&Shape>,
        i: ClipGradInputs<Self::In>,
        o: ClipGradOutputs<Self::Out>,
    ) -> Result<()> {
        optim::clip_grad(max_norm, value, i.x, i.total_sq, o.y)
    }

    fn dropout(
        &mut self,
        p: DropoutParams,
        _: DropoutInputs<&Shape>,
        i: DropoutInputs<Self::In>,
        o: DropoutOutputs<Self::Out>,
    ) -> Result<()> {
        dropout::dropout(p, i.x, i.key, o.y)
    }

    fn copy(
        &mut self,
        _: CopyInputs<&Shape>,
        i: CopyInputs<Self::In>,
        o: CopyTargets<Self::Out>,
    ) -> Result<()> {
        elementwise::copy(i.src, o.dst)
    }
}
