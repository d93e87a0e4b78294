//! [`Op::infer_shapes`]: each op's rule from input shapes to output shapes, the one
//! check every graph node and every backend call goes through. Families with longer
//! rules keep them beside their ops (`bidir_ops.rs`, `pool_ops.rs`, `rows.rs`, ...).

use crate::args::*;
use crate::attention_ops::attention_shapes;
use crate::bidir_ops::bidir_shapes;
use crate::conv_ops::conv_shapes;
use crate::dropout::dropout_shapes;
use crate::gru::GruDims;
use crate::loss_op::mse_shapes;
use crate::lstm_dims::LstmDims;
use crate::op::Op;
use crate::optim_op::optim_shapes;
use crate::pool_ops::pool_shapes;
use crate::positions_ops::position_shapes;
use crate::rows::{batchnorm_shapes, layernorm_shapes, matmul_shapes, softmax_shapes};
use crate::seq_lengths::check_shape;
use crate::shape::{rank, same, Shape};

impl Op {
    /// Checks input shapes and returns the output shapes (for update ops: the shapes the
    /// targets must have). The message is wrapped with the node's name by the graph.
    pub fn infer_shapes(&self, inputs: &[&Shape]) -> Result<Vec<Shape>, String> {
        let list = inputs.to_vec();
        match self {
            &Op::MatMul { trans_a, trans_b } => matmul_shapes(trans_a, trans_b, list),
            Op::Binary(_) => {
                let BinaryInputs { a, b } = named(list)?;
                if !a.ends_with(b) {
                    return Err(format!("b {b} must equal the trailing dimensions of a {a}"));
                }
                Ok(BinaryOutputs { out: a.clone() }.into_vec())
            }
            Op::Activation(_) => {
                let ActivationInputs { x } = named(list)?;
                Ok(ActivationOutputs { y: x.clone() }.into_vec())
            }
            Op::ActivationBackward(f) => {
                let ActivationBackwardInputs { y, dy, x } = named(list)?;
                same(dy, y, "dy")?;
                match (f.needs_input(), x) {
                    (true, Some(x)) => same(x, y, "x")?,
                    (true, None) => return Err(format!("{}'s gradient needs x", f.name())),
                    (false, Some(_)) => return Err(format!("{}'s gradient takes no x", f.name())),
                    (false, None) => {}
                }
                Ok(ActivationBackwardOutputs { dx: y.clone() }.into_vec())
            }
            Op::SumToShape { shape } => {
                let SumToShapeInputs { x } = named(list)?;
                if !x.ends_with(shape) {
                    return Err(format!("input {x} does not end with {shape}"));
                }
                Ok(SumToShapeOutputs { out: shape.clone() }.into_vec())
            }
            Op::Fill { shape, .. } => {
                let FillInputs(_) = named(list)?;
                Ok(FillOutputs { out: shape.clone() }.into_vec())
            }
            Op::SliceTime { t } => {
                let SliceTimeInputs { x, lengths } = named(list)?;
                rank(x, 3, "x")?;
                check_shape(lengths, x.dim(1))?;
                if *t >= x.dim(0) {
                    return Err(format!("time step {t} outside {x}"));
                }
                let out = Shape::from([x.dim(1), x.dim(2)]);
                Ok(SliceTimeOutputs { out }.into_vec())
            }
            Op::ScatterTime { t, steps } => {
                let ScatterTimeInputs { x, lengths } = named(list)?;
                rank(x, 2, "x")?;
                check_shape(lengths, x.dim(0))?;
                if t >= steps {
                    return Err(format!("time step {t} outside {steps} steps"));
                }
                let out = Shape::from([*steps, x.dim(0), x.dim(1)]);
                Ok(ScatterTimeOutputs { out }.into_vec())
            }
            Op::ReverseTime | Op::ConcatFeatures | Op::SliceFeatures { .. } => {
                bidir_shapes(self, list)
            }
            Op::MeanTime
            | Op::MeanTimeBackward { .. }
            | Op::MaxTime
            | Op::MaxTimeBackward { .. } => pool_shapes(self, list),
            Op::UnfoldTime { .. } | Op::FoldTime { .. } | Op::Reshape { .. } => {
                conv_shapes(self, list)
            }
            Op::AddTimeRows | Op::SumBatchToRows { .. } | Op::Sinusoids { .. } => {
                position_shapes(self, list)
            }
            Op::AttentionScores { .. }
            | Op::AttentionScoresBackward { .. }
            | Op::AttentionMix { .. }
            | Op::AttentionMixBackward { .. } => attention_shapes(self, list),
            &Op::LstmForward { keep_for_backward } => {
                LstmDims::forward_shapes(named(list)?, keep_for_backward)
            }
            &Op::LstmBackward { input_grad } => LstmDims::backward_shapes(named(list)?, input_grad),
            &Op::GruForward { keep_for_backward } => {
                GruDims::forward_shapes(named(list)?, keep_for_backward)
            }
            &Op::GruBackward { input_grad } => GruDims::backward_shapes(named(list)?, input_grad),
            Op::Embedding => {
                let EmbeddingInputs { table, ids } = named(list)?;
                rank(table, 2, "table")?;
                let out = with_width(ids, table.dim(1));
                Ok(EmbeddingOutputs { out }.into_vec())
            }
            Op::EmbeddingBackward { vocab } => {
                let EmbeddingBackwardInputs { ids, dout } = named(list)?;
                let width = dout.0.last().copied().unwrap_or(0);
                same(dout, &with_width(ids, width), "dout (one row per id)")?;
                let dtable = Shape::from([*vocab, width]);
                Ok(EmbeddingBackwardOutputs { dtable }.into_vec())
            }
            Op::BatchNorm { .. } | Op::BatchNormBackward { .. } => batchnorm_shapes(self, list),
            Op::LayerNorm { .. } | Op::LayerNormBackward => layernorm_shapes(self, list),
            Op::BatchNormStatsUpdate { .. } => {
                let StatsUpdateInputs { mean, var } = named(list)?;
                rank(mean, 1, "mean")?;
                same(var, mean, "var")?;
                let targets = StatsUpdateTargets {
                    running_mean: mean.clone(),
                    running_var: mean.clone(),
                };
                Ok(targets.into_vec())
            }
            Op::SoftmaxCrossEntropy | Op::SoftmaxCrossEntropyBackward => softmax_shapes(self, list),
            Op::Adam(_) | Op::Sgd(_) | Op::SumSquares | Op::ClipGrad { .. } => {
                optim_shapes(self, list)
            }
            Op::Dropout(p) => dropout_shapes(p, list),
            Op::MseLoss | Op::MseLossBackward => mse_shapes(self, list),
            Op::Copy => {
                let CopyInputs { src } = named(list)?;
                Ok(CopyTargets { dst: src.clone() }.into_vec())
            }
        }
    }
}

/// The input shapes by name.
pub(crate) fn named<'s, A: Args<&'s Shape>>(list: Vec<&'s Shape>) -> Result<A, String> {
    A::from_vec("inputs", list)
}

/// `ids`'s shape with one more dimension of `width` (a vector per id).
fn with_width(ids: &Shape, width: usize) -> Shape {
    let mut dims = ids.0.clone();
    dims.push(width);
    Shape(dims)
}
