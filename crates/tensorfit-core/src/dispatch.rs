//! [`dispatch`](dispatch()): the one place an [`Op`] becomes a call of its [`OpKernels`] method, the
//! handles named by the op's structs from [`crate::args`] (see [`crate::kernels`]).

use crate::args::*;
use crate::attention_ops::AttentionDims;
use crate::conv_ops::ConvTaps;
use crate::error::{Error, Result};
use crate::kernels::{OpCall, OpKernels};
use crate::op::Op;
use crate::shape::Shape;

/// Calls the method of `call`'s op on `k` with the backend's handles of the call's input
/// and output views (`ins`, `outs`, in the views' order). The match is exhaustive: a new
/// op does not compile until it is dispatched here.
pub fn dispatch<K: OpKernels + ?Sized>(
    k: &mut K,
    call: &OpCall<'_>,
    ins: Vec<K::In>,
    outs: Vec<K::Out>,
) -> Result<()> {
    let op = call.op();
    let shapes: Vec<&Shape> = call.inputs().iter().map(|v| &v.shape).collect();
    let error = |message: String| Error::Backend {
        backend: K::BACKEND,
        message: format!("{}: {message}", op.name()),
    };
    let outputs_are = op.outputs_are();
    // The shapes, inputs and outputs of the call as the structs `$inputs` (whose
    // outputs struct follows from it).
    macro_rules! named {
        ($inputs:ident) => {{
            let s: $inputs<&Shape> = Args::from_vec("inputs", shapes).map_err(error)?;
            let i: $inputs<K::In> = Args::from_vec("inputs", ins).map_err(error)?;
            let o = <$inputs<K::Out> as OpInputs<K::Out>>::Outputs::from_vec(outputs_are, outs)
                .map_err(error)?;
            (s, i, o)
        }};
    }
    match op {
        Op::MatMul { trans_a, trans_b } => {
            let (s, i, o) = named!(MatMulInputs);
            k.matmul((*trans_a, *trans_b), s, i, o)
        }
        Op::Binary(bop) => {
            let (s, i, o) = named!(BinaryInputs);
            k.binary(*bop, s, i, o)
        }
        Op::Activation(f) => {
            let (s, i, o) = named!(ActivationInputs);
            k.activation_forward(*f, s, i, o)
        }
        Op::ActivationBackward(f) => {
            let (s, i, o) = named!(ActivationBackwardInputs);
            k.activation_backward(*f, s, i, o)
        }
        Op::SumToShape { shape } => {
            let (s, i, o) = named!(SumToShapeInputs);
            k.sum_to_shape(shape, s, i, o)
        }
        Op::Fill { value, shape } => {
            let (_, _, o) = named!(FillInputs);
            k.fill(*value, shape, o)
        }
        Op::SliceTime { t } => {
            let (s, i, o) = named!(SliceTimeInputs);
            k.slice_time(*t, s, i, o)
        }
        Op::ScatterTime { t, steps } => {
            let (s, i, o) = named!(ScatterTimeInputs);
            k.scatter_time(*t, *steps, s, i, o)
        }
        Op::ReverseTime => {
            let (s, i, o) = named!(ReverseTimeInputs);
            k.reverse_time(s, i, o)
        }
        Op::ConcatFeatures => {
            let (s, i, o) = named!(ConcatFeaturesInputs);
            k.concat_features(s, i, o)
        }
        Op::SliceFeatures { start, width } => {
            let (s, i, o) = named!(SliceFeaturesInputs);
            k.slice_features(*start, *width, s, i, o)
        }
        Op::MeanTime => {
            let (s, i, o) = named!(MeanTimeInputs);
            k.mean_time(s, i, o)
        }
        Op::MeanTimeBackward { steps } => {
            let (s, i, o) = named!(MeanTimeBackwardInputs);
            k.mean_time_backward(*steps, s, i, o)
        }
        Op::MaxTime => {
            let (s, i, o) = named!(MaxTimeInputs);
            k.max_time(s, i, o)
        }
        Op::MaxTimeBackward { steps } => {
            let (s, i, o) = named!(MaxTimeBackwardInputs);
            k.max_time_backward(*steps, s, i, o)
        }
        Op::UnfoldTime { .. } => {
            let (s, i, o) = named!(UnfoldTimeInputs);
            k.unfold_time(ConvTaps::of(op).map_err(error)?, s, i, o)
        }
        Op::FoldTime { .. } => {
            let (s, i, o) = named!(FoldTimeInputs);
            k.fold_time(ConvTaps::of(op).map_err(error)?, s, i, o)
        }
        Op::Reshape { shape } => {
            let (s, i, o) = named!(ReshapeInputs);
            k.reshape(shape, s, i, o)
        }
        Op::AddTimeRows => {
            let (s, i, o) = named!(AddTimeRowsInputs);
            k.add_time_rows(s, i, o)
        }
        Op::SumBatchToRows { rows } => {
            let (s, i, o) = named!(SumBatchToRowsInputs);
            k.sum_batch_to_rows(*rows, s, i, o)
        }
        &Op::Sinusoids { steps, dim } => {
            let (_, _, o) = named!(SinusoidsInputs);
            k.sinusoids(steps, dim, o)
        }
        &Op::AttentionScores { heads, causal } => {
            let (s, i, o) = named!(AttentionScoresInputs);
            let d = AttentionDims::of(heads, s.q).map_err(error)?;
            k.attention_scores(d, causal, i, o)
        }
        &Op::AttentionScoresBackward { heads, .. } => {
            let (s, i, o) = named!(AttentionScoresBackwardInputs);
            k.attention_scores_backward(AttentionDims::of(heads, s.q).map_err(error)?, i, o)
        }
        &Op::AttentionMix { heads } => {
            let (s, i, o) = named!(AttentionMixInputs);
            k.attention_mix(AttentionDims::of(heads, s.v).map_err(error)?, i, o)
        }
        &Op::AttentionMixBackward { heads } => {
            let (s, i, o) = named!(AttentionMixBackwardInputs);
            k.attention_mix_backward(AttentionDims::of(heads, s.v).map_err(error)?, i, o)
        }
        Op::LstmForward { .. } => {
            let (s, i, o) = named!(LstmForwardInputs);
            k.lstm_forward(s.dims(), i, o)
        }
        Op::LstmBackward { .. } => {
            let (s, i, o) = named!(LstmBackwardInputs);
            k.lstm_backward(s.dims(), i, o)
        }
        &Op::GruForward { keep_for_backward } => {
            let (s, i, o) = named!(GruForwardInputs);
            k.gru_forward(s.dims(), keep_for_backward, i, o)
        }
        Op::GruBackward { .. } => {
            let (s, i, o) = named!(GruBackwardInputs);
            k.gru_backward(s.dims(), i, o)
        }
        Op::Embedding => {
            let (s, i, o) = named!(EmbeddingInputs);
            k.embedding(s, i, o)
        }
        Op::EmbeddingBackward { vocab } => {
            let (s, i, o) = named!(EmbeddingBackwardInputs);
            k.embedding_backward(*vocab, s, i, o)
        }
        Op::BatchNorm { eps, .. } => {
            let (s, i, o) = named!(BatchNormInputs);
            k.batchnorm_forward(*eps, s, i, o)
        }
        Op::BatchNormBackward { eps, training } => {
            let (s, i, o) = named!(BatchNormBackwardInputs);
            k.batchnorm_backward(*eps, *training, s, i, o)
        }
        Op::LayerNorm { eps } => {
            let (s, i, o) = named!(LayerNormInputs);
            k.layernorm_forward(*eps, s, i, o)
        }
        Op::LayerNormBackward => {
            let (s, i, o) = named!(LayerNormBackwardInputs);
            k.layernorm_backward(s, i, o)
        }
        Op::BatchNormStatsUpdate { momentum, unbias } => {
            let (s, i, o) = named!(StatsUpdateInputs);
            k.batchnorm_stats_update(*momentum, *unbias, s, i, o)
        }
        Op::SoftmaxCrossEntropy => {
            let (s, i, o) = named!(SoftmaxCrossEntropyInputs);
            k.softmax_cross_entropy_forward(s, i, o)
        }
        Op::SoftmaxCrossEntropyBackward => {
            let (s, i, o) = named!(SoftmaxCrossEntropyBackwardInputs);
            k.softmax_cross_entropy_backward(s, i, o)
        }
        Op::MseLoss => {
            let (s, i, o) = named!(MseLossInputs);
            k.mse_loss_forward(s, i, o)
        }
        Op::MseLossBackward => {
            let (s, i, o) = named!(MseLossBackwardInputs);
            k.mse_loss_backward(s, i, o)
        }
        Op::Adam(p) => {
            let (s, i, o) = named!(AdamInputs);
            k.adam_update(*p, s, i, o)
        }
        Op::Sgd(p) => {
            let (s, i, o) = named!(SgdInputs);
            k.sgd_update(*p, s, i, o)
        }
        Op::SumSquares => {
            let (s, i, o) = named!(SumSquaresInputs);
            k.sum_squares(s, i, o)
        }
        Op::ClipGrad { max_norm, value } => {
            let (s, i, o) = named!(ClipGradInputs);
            k.clip_grad(*max_norm, *value, s, i, o)
        }
        Op::Dropout(p) => {
            let (s, i, o) = named!(DropoutInputs);
            k.dropout(*p, s, i, o)
        }
        Op::Copy => {
            let (s, i, o) = named!(CopyInputs);
            k.copy(s, i, o)
        }
    }
}
