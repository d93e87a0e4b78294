//! The host side of the kernels: each [`Op`] turned into the kernel launches that compute
//! it, one file per op family and one function per op, named as the CPU backend names its
//! kernels (`Op::name`), so that `tensorfit-cpu/src/kernels/lstm/mod.rs` and `lstm.rs` here
//! read side by side.
//!
//! These functions only plan: they check dimensions, split work so that every launch's
//! windows fit the binding limit (see `crate::window`), and push [`Launch`]es onto
//! [`Launches`], which implements [`OpKernels`] with them; nothing here touches the
//! device, so a wrong plan is an error before anything is recorded.

pub(crate) mod adam;
pub(crate) mod attention;
pub(crate) mod batchnorm;
pub(crate) mod bidir;
pub(crate) mod conv;
pub(crate) mod dropout;
pub(crate) mod elementwise;
pub(crate) mod gather;
pub(crate) mod gemm;
pub(crate) mod gru;
pub(crate) mod layernorm;
pub(crate) mod lstm;
pub(crate) mod mse;
pub(crate) mod optim;
pub(crate) mod pool;
pub(crate) mod positions;
pub(crate) mod recurrent;
pub(crate) mod softmax;
pub(crate) mod steps;

use tensorfit_core::args::*;
use tensorfit_core::kernels::dims2;
use tensorfit_core::{
    dispatch, Activation, AdamParams, BinaryOp, DropoutParams, KernelTypes, OpCall, OpKernels,
    Result, SgdParams, Shape, TensorView,
};

use crate::backend_error;
use crate::record::Launch;
use crate::shaders::Kernel;
use crate::window::{grid, Limits, Operand, Rect, Region};

/// Launches being planned for one op, under the device's binding limits.
#[derive(Debug)]
pub(crate) struct Launches {
    pub limits: Limits,
    pub list: Vec<Launch>,
}

impl Launches {
    pub fn new(limits: Limits) -> Self {
        Launches {
            limits,
            list: Vec::new(),
        }
    }

    /// The most elements one launch may touch of one operand.
    pub fn span(&self) -> usize {
        self.limits.span()
    }

    /// A launch of `threads` invocations, the kernel's workgroup size to a workgroup
    /// (a column reduction: one invocation per column).
    pub fn push(
        &mut self,
        kernel: &'static Kernel,
        operands: Vec<Operand>,
        values: Vec<u32>,
        threads: usize,
    ) {
        let groups = grid(threads, kernel.group, self.limits.max_groups);
        self.push_groups(kernel, operands, values, groups);
    }

    /// A launch with explicit workgroup counts.
    pub fn push_groups(
        &mut self,
        kernel: &'static Kernel,
        operands: Vec<Operand>,
        values: Vec<u32>,
        groups: [u32; 3],
    ) {
        self.list.push(Launch {
            kernel,
            operands,
            values,
            groups,
        });
    }
}

/// A count or offset as a parameter word. Launches cover at most one binding's elements,
/// so counts fit; offsets inside a tensor wrap like the shaders' arithmetic (see
/// `crate::window`).
pub(crate) fn word(v: usize) -> u32 {
    v as u32
}

/// An `f32` parameter as its bits.
pub(crate) fn bits(v: f32) -> u32 {
    v.to_bits()
}

/// The block parameters of a kernel over block `r` of a matrix `[.., ld]`: first row and
/// column, row and column counts, row length.
pub(crate) fn block_values(r: &Rect, ld: usize) -> Vec<u32> {
    vec![
        word(r.rows.start),
        word(r.cols.start),
        word(r.rows.len()),
        word(r.cols.len()),
        word(ld),
    ]
}

impl KernelTypes for Launches {
    const BACKEND: &'static str = "wgpu";
    type In = Region;
    type Out = Region;
}

impl OpKernels for Launches {
    fn matmul(
        &mut self,
        (trans_a, trans_b): (bool, bool),
        s: MatMulInputs<&Shape>,
        i: MatMulInputs<Region>,
        o: MatMulOutputs<Region>,
    ) -> Result<()> {
        let (a, b) = ((i.a, dims2(s.a), trans_a), (i.b, dims2(s.b), trans_b));
        gemm::matmul(self, a, b, o.c)
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        _: BinaryInputs<&Shape>,
        i: BinaryInputs<Region>,
        o: BinaryOutputs<Region>,
    ) -> Result<()> {
        elementwise::binary(self, op, i.a, i.b, o.out)
    }

    fn activation_forward(
        &mut self,
        f: Activation,
        _: ActivationInputs<&Shape>,
        i: ActivationInputs<Region>,
        o: ActivationOutputs<Region>,
    ) -> Result<()> {
        elementwise::activation_forward(self, f, i.x, o.y)
    }

    fn activation_backward(
        &mut self,
        f: Activation,
        _: ActivationBackwardInputs<&Shape>,
        i: ActivationBackwardInputs<Region>,
        o: ActivationBackwardOutputs<Region>,
    ) -> Result<()> {
        elementwise::activation_backward(self, f, i.y, i.x, i.dy, o.dx)
    }

    fn sum_to_shape(
        &mut self,
        _: &Shape,
        _: SumToShapeInputs<&Shape>,
        i: SumToShapeInputs<Region>,
        o: SumToShapeOutputs<Region>,
    ) -> Result<()> {
        elementwise::sum_to_shape(self, i.x, o.out)
    }

    fn fill(&mut self, value: f32, _: &Shape, o: FillOutputs<Region>) -> Result<()> {
        elementwise::fill(self, value, o.out);
        Ok(())
    }

    fn slice_time(
        &mut self,
        t: usize,
        s: SliceTimeInputs<&Shape>,
        i: SliceTimeInputs<Region>,
        o: SliceTimeOutputs<Region>,
    ) -> Result<()> {
        match i.lengths {
            Some(lengths) => {
                let (steps, batch, width) = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
                let n = steps::Steps {
                    t,
                    steps,
                    batch,
                    width,
                };
                steps::at_lengths(self, n, [i.x, lengths, o.out], false)
            }
            None => elementwise::slice_time(self, t, i.x, o.out),
        }
    }

    fn scatter_time(
        &mut self,
        t: usize,
        steps: usize,
        s: ScatterTimeInputs<&Shape>,
        i: ScatterTimeInputs<Region>,
        o: ScatterTimeOutputs<Region>,
    ) -> Result<()> {
        match i.lengths {
            Some(lengths) => {
                let (batch, width) = (s.x.dim(0), s.x.dim(1));
                let n = steps::Steps {
                    t,
                    steps,
                    batch,
                    width,
                };
                steps::at_lengths(self, n, [i.x, lengths, o.out], true)
            }
            None => elementwise::scatter_time(self, t, i.x, o.out),
        }
    }

    fn reverse_time(
        &mut self,
        s: ReverseTimeInputs<&Shape>,
        i: ReverseTimeInputs<Region>,
        o: ReverseTimeOutputs<Region>,
    ) -> Result<()> {
        let dims = tensorfit_core::time_dims(s.x);
        bidir::reverse_time(self, dims, [i.x, o.y], i.lengths)
    }

    fn concat_features(
        &mut self,
        s: ConcatFeaturesInputs<&Shape>,
        i: ConcatFeaturesInputs<Region>,
        o: ConcatFeaturesOutputs<Region>,
    ) -> Result<()> {
        let ([rows, fa], [_, fb]) = (dims2(s.a), dims2(s.b));
        bidir::concat_features(self, rows, [(i.a, fa), (i.b, fb)], o.out)
    }

    fn slice_features(
        &mut self,
        start: usize,
        width: usize,
        s: SliceFeaturesInputs<&Shape>,
        i: SliceFeaturesInputs<Region>,
        o: SliceFeaturesOutputs<Region>,
    ) -> Result<()> {
        let [rows, features] = dims2(s.x);
        bidir::slice_features(self, (start, width), (i.x, rows, features), o.out)
    }

    // `lstm_forward`, `lstm_backward`, `gru_forward`, `gru_backward`: each call handed
    // whole to `lstm.rs` or `gru.rs`.
    tensorfit_core::recurrent_kernels!();

    fn embedding(
        &mut self,
        s: EmbeddingInputs<&Shape>,
        i: EmbeddingInputs<Region>,
        o: EmbeddingOutputs<Region>,
    ) -> Result<()> {
        gather::embedding(self, i.table, s.table.dim(0), i.ids, o.out)
    }

    fn embedding_backward(
        &mut self,
        vocab: usize,
        _: EmbeddingBackwardInputs<&Shape>,
        i: EmbeddingBackwardInputs<Region>,
        o: EmbeddingBackwardOutputs<Region>,
    ) -> Result<()> {
        gather::embedding_backward(self, vocab, i.ids, i.dout, o.dtable)
    }

    fn batchnorm_forward(
        &mut self,
        eps: f32,
        _: BatchNormInputs<&Shape>,
        i: BatchNormInputs<Region>,
        o: BatchNormOutputs<Region>,
    ) -> Result<()> {
        let stats = BatchNormStats::of(i.running, o.batch).map_err(backend_error)?;
        batchnorm::batchnorm_forward(self, eps, [i.x, i.gamma, i.beta], stats, o.y)
    }

    fn batchnorm_backward(
        &mut self,
        eps: f32,
        training: bool,
        _: BatchNormBackwardInputs<&Shape>,
        i: BatchNormBackwardInputs<Region>,
        o: BatchNormBackwardOutputs<Region>,
    ) -> Result<()> {
        let grads = [o.dx, o.dgamma, o.dbeta];
        batchnorm::batchnorm_backward(self, eps, training, &i, grads)
    }

    fn layernorm_forward(
        &mut self,
        eps: f32,
        _: LayerNormInputs<&Shape>,
        i: LayerNormInputs<Region>,
        o: LayerNormOutputs<Region>,
    ) -> Result<()> {
        let outs = [o.y, o.mean, o.rstd];
        layernorm::layernorm_forward(self, eps, [i.x, i.gamma, i.beta], outs)
    }

    fn layernorm_backward(
        &mut self,
        _: LayerNormBackwardInputs<&Shape>,
        i: LayerNormBackwardInputs<Region>,
        o: LayerNormBackwardOutputs<Region>,
    ) -> Result<()> {
        layernorm::layernorm_backward(self, &i, [o.dx, o.dgamma, o.dbeta])
    }

    fn batchnorm_stats_update(
        &mut self,
        momentum: f32,
        unbias: f32,
        _: StatsUpdateInputs<&Shape>,
        i: StatsUpdateInputs<Region>,
        o: StatsUpdateTargets<Region>,
    ) -> Result<()> {
        let (stats, running) = ([i.mean, i.var], [o.running_mean, o.running_var]);
        batchnorm::batchnorm_stats_update(self, momentum, unbias, stats, running)
    }

    fn softmax_cross_entropy_forward(
        &mut self,
        _: SoftmaxCrossEntropyInputs<&Shape>,
        i: SoftmaxCrossEntropyInputs<Region>,
        o: SoftmaxCrossEntropyOutputs<Region>,
    ) -> Result<()> {
        softmax::softmax_cross_entropy_forward(self, i.logits, i.labels, o.loss, o.probs)
    }

    fn softmax_cross_entropy_backward(
        &mut self,
        _: SoftmaxCrossEntropyBackwardInputs<&Shape>,
        i: SoftmaxCrossEntropyBackwardInputs<Region>,
        o: SoftmaxCrossEntropyBackwardOutputs<Region>,
    ) -> Result<()> {
        softmax::softmax_cross_entropy_backward(self, i.probs, i.labels, i.dloss, o.dlogits)
    }

    fn mse_loss_forward(
        &mut self,
        _: MseLossInputs<&Shape>,
        i: MseLossInputs<Region>,
        o: MseLossOutputs<Region>,
    ) -> Result<()> {
        mse::mse_loss_forward(self, i.pred, i.target, o.loss)
    }

    fn mse_loss_backward(
        &mut self,
        _: MseLossBackwardInputs<&Shape>,
        i: MseLossBackwardInputs<Region>,
        o: MseLossBackwardOutputs<Region>,
    ) -> Result<()> {
        mse::mse_loss_backward(self, i.pred, i.target, i.dloss, o.dpred)
    }

    fn adam_update(
        &mut self,
        p: AdamParams,
        _: AdamInputs<&Shape>,
        i: AdamInputs<Region>,
        o: AdamTargets<Region>,
    ) -> Result<()> {
        adam::adam_update(self, p, i.grad, i.scalars, [o.param, o.m, o.v])
    }

    fn sgd_update(
        &mut self,
        p: SgdParams,
        _: SgdInputs<&Shape>,
        i: SgdInputs<Region>,
        o: SgdTargets<Region>,
    ) -> Result<()> {
        optim::sgd_update(self, p, i.grad, i.scalars, [o.param, o.buf])
    }

    fn sum_squares(
        &mut self,
        _: SumSquaresInputs<&Shape>,
        i: SumSquaresInputs<Region>,
        o: SumSquaresOutputs<Region>,
    ) -> Result<()> {
        optim::sum_squares(self, i.x, o.total)
    }

    fn clip_grad(
        &mut self,
        max_norm: f32,
        value: f32,
        _: ClipGradInputs<&Shape>,
        i: ClipGradInputs<Region>,
        o: ClipGradOutputs<Region>,
    ) -> Result<()> {
        optim::clip_grad(self, max_norm, value, i.x, i.total_sq, o.y)
    }

    fn dropout(
        &mut self,
        p: DropoutParams,
        _: DropoutInputs<&Shape>,
        i: DropoutInputs<Region>,
        o: DropoutOutputs<Region>,
    ) -> Result<()> {
        dropout::dropout(self, p, i.x, i.key, o.y)
    }

    fn copy(
        &mut self,
        _: CopyInputs<&Shape>,
        i: CopyInputs<Region>,
        o: CopyTargets<Region>,
    ) -> Result<()> {
        elementwise::copy(self, i.src, o.dst)
    }
}

/// Plans the launches of one checked call.
pub(crate) fn plan(call: &OpCall<'_>, limits: Limits) -> Result<Vec<Launch>> {
    let regions = |views: &[TensorView]| views.iter().map(Region::of).collect();
    let mut l = Launches::new(limits);
    dispatch(
        &mut l,
        call,
        regions(call.inputs()),
        regions(call.outputs()),
    )?;
    Ok(l.list)
}
