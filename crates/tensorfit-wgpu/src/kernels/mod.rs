//! The host side of the kernels: each [`Op`] turned into the kernel launches that compute
//! it, one file per op family and one function per op, named as the CPU backend names its
//! kernels (`Op::name`), so that `tensorfit-cpu/src/kernels/lstm.rs` and `lstm.rs` here
//! read side by side.
//!
//! These functions only plan: they check dimensions, split work so that every launch's
//! windows fit the binding limit (see `crate::window`), and return [`Launch`]es; nothing
//! here touches the device, so a wrong plan is an error before anything is recorded.

pub(crate) mod adam;
pub(crate) mod batchnorm;
pub(crate) mod elementwise;
pub(crate) mod gemm;
pub(crate) mod lstm;
pub(crate) mod softmax;

use tensorfit_core::{args, Op, Result, TensorView};

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

fn regions(views: &[TensorView]) -> Vec<Region> {
    views.iter().map(Region::of).collect()
}

/// [`args::arity`] with this backend's error.
fn arity<T, const N: usize>(op: &Op, what: &str, items: Vec<T>) -> Result<[T; N]> {
    args::arity(op, what, items).map_err(backend_error)
}

/// Plans the launches of one op. The views' shapes have been checked against
/// `Op::infer_shapes`; the match is exhaustive, so a new op does not compile until it
/// has kernels here.
pub(crate) fn plan(
    op: &Op,
    inputs: &[TensorView],
    outputs: &[TensorView],
    limits: Limits,
) -> Result<Vec<Launch>> {
    let mut l = Launches::new(limits);
    let ins = regions(inputs);
    let outs = regions(outputs);
    match op {
        Op::MatMul { trans_a, trans_b } => {
            let [a, b] = arity(op, "inputs", ins)?;
            let [c] = arity(op, "outputs", outs)?;
            let (a_dims, b_dims) = (args::dims2(&inputs[0]), args::dims2(&inputs[1]));
            gemm::matmul(&mut l, (a, a_dims, *trans_a), (b, b_dims, *trans_b), c)?;
        }
        Op::Binary(bop) => {
            let [a, b] = arity(op, "inputs", ins)?;
            let [out] = arity(op, "outputs", outs)?;
            elementwise::binary(&mut l, *bop, a, b, out)?;
        }
        Op::Activation(f) => {
            let [x] = arity(op, "inputs", ins)?;
            let [y] = arity(op, "outputs", outs)?;
            elementwise::activation_forward(&mut l, *f, x, y)?;
        }
        Op::ActivationBackward(f) => {
            let [y, dy] = arity(op, "inputs", ins)?;
            let [dx] = arity(op, "outputs", outs)?;
            elementwise::activation_backward(&mut l, *f, y, dy, dx)?;
        }
        Op::SumToShape { .. } => {
            let [x] = arity(op, "inputs", ins)?;
            let [out] = arity(op, "outputs", outs)?;
            elementwise::sum_to_shape(&mut l, x, out)?;
        }
        Op::Fill { value, .. } => {
            let [out] = arity(op, "outputs", outs)?;
            elementwise::fill(&mut l, *value, out);
        }
        Op::SliceTime { t } => {
            let [x] = arity(op, "inputs", ins)?;
            let [out] = arity(op, "outputs", outs)?;
            elementwise::slice_time(&mut l, *t, x, out)?;
        }
        Op::ScatterTime { t, .. } => {
            let [x] = arity(op, "inputs", ins)?;
            let [out] = arity(op, "outputs", outs)?;
            elementwise::scatter_time(&mut l, *t, x, out)?;
        }
        Op::LstmForward { .. } => {
            let dims = args::lstm_dims(op, inputs).map_err(backend_error)?;
            let inp = args::LstmForwardInputs::from_vec(op, ins).map_err(backend_error)?;
            let out = args::LstmForwardOutputs::from_vec(op, outs).map_err(backend_error)?;
            lstm::lstm_forward(&mut l, dims, &inp, &out)?;
        }
        Op::LstmBackward { .. } => {
            let dims = args::lstm_dims(op, inputs).map_err(backend_error)?;
            let inp = args::LstmBackwardInputs::from_vec(op, ins).map_err(backend_error)?;
            let out = args::LstmBackwardOutputs::from_vec(op, outs).map_err(backend_error)?;
            lstm::lstm_backward(&mut l, dims, &inp, &out)?;
        }
        Op::BatchNorm { eps, training } => {
            if *training {
                let [x, gamma, beta] = arity(op, "inputs", ins)?;
                let [y, mean, var] = arity(op, "outputs", outs)?;
                let stats = args::BatchNormStats::Batch { mean, var };
                batchnorm::batchnorm_forward(&mut l, *eps, [x, gamma, beta], stats, y)?;
            } else {
                let [x, gamma, beta, mean, var] = arity(op, "inputs", ins)?;
                let [y] = arity(op, "outputs", outs)?;
                let stats = args::BatchNormStats::Running { mean, var };
                batchnorm::batchnorm_forward(&mut l, *eps, [x, gamma, beta], stats, y)?;
            }
        }
        Op::BatchNormBackward { eps, training } => {
            let inp = args::BatchNormBackwardInputs::from_vec(op, ins).map_err(backend_error)?;
            let [dx, dgamma, dbeta] = arity(op, "outputs", outs)?;
            batchnorm::batchnorm_backward(&mut l, *eps, *training, &inp, [dx, dgamma, dbeta])?;
        }
        Op::BatchNormStatsUpdate { momentum, unbias } => {
            let [mean, var] = arity(op, "inputs", ins)?;
            let [running_mean, running_var] = arity(op, "targets", outs)?;
            batchnorm::batchnorm_stats_update(
                &mut l,
                *momentum,
                *unbias,
                [mean, var],
                [running_mean, running_var],
            )?;
        }
        Op::SoftmaxCrossEntropy => {
            let [logits, labels] = arity(op, "inputs", ins)?;
            let [loss, probs] = arity(op, "outputs", outs)?;
            softmax::softmax_cross_entropy_forward(&mut l, logits, labels, loss, probs)?;
        }
        Op::SoftmaxCrossEntropyBackward => {
            let [probs, labels, dloss] = arity(op, "inputs", ins)?;
            let [dlogits] = arity(op, "outputs", outs)?;
            softmax::softmax_cross_entropy_backward(&mut l, probs, labels, dloss, dlogits)?;
        }
        Op::Adam(p) => {
            let [grad, scalars] = arity(op, "inputs", ins)?;
            let [param, m, v] = arity(op, "targets", outs)?;
            adam::adam_update(&mut l, *p, grad, scalars, [param, m, v])?;
        }
        Op::Copy => {
            let [src] = arity(op, "inputs", ins)?;
            let [dst] = arity(op, "targets", outs)?;
            elementwise::copy(&mut l, src, dst)?;
        }
    }
    Ok(l.list)
}
