//! The kernels of the CUDA backend: CUDA C sources under this folder (one `.cu` file per op
//! family, `lstm.cu`, `gru.cu`, `elementwise.cu` and the others `sources.rs` lists), and one
//! Rust file per op family with a launcher per [`tensorfit_core::Op`], named as `Op::name`
//! names it in every backend (`lstm_forward` in `lstm.rs` here, in the CPU's
//! `kernels/lstm/mod.rs` and in wgpu's `shaders/lstm.wgsl`).
//!
//! The sources are embedded with `include_str!` and compiled at run time by NVRTC for the
//! GPU's architecture, so the crate builds with no CUDA toolkit. Compiled PTX is cached per
//! architecture for the life of the process (a second backend on the same kind of GPU does
//! not compile again); each backend loads the modules into its context once.
//!
//! A launcher gets device addresses (`DevPtr`) the backend has checked against its
//! buffers, and the op's dimensions; it checks what the shapes alone cannot (sizes that
//! must fit the kernels' `int` widths) and launches. GEMMs go through cuBLAS (`gemm.rs`).
//! [`Gpu`] implements [`OpKernels`] with the launchers: one method per op.

pub mod adam;
pub mod attention;
pub mod batchnorm;
pub mod bidir;
pub mod conv;
pub mod dropout;
pub mod elementwise;
pub mod gather;
pub mod gemm;
pub mod gru;
pub mod layernorm;
pub mod lstm;
mod modules;
pub mod mse;
pub mod optim;
pub mod pool;
pub mod positions;
pub mod recurrent;
pub mod softmax;
mod sources;

pub use modules::{compile_all, entry_params, Kernels, ParamKind};
pub use sources::*;

use tensorfit_core::args::*;
use tensorfit_core::kernels::dims2;
use tensorfit_core::tokens::Table;
use tensorfit_core::{
    Activation, AdamParams, BinaryOp, DropoutParams, Error, KernelTypes, OpKernels, Result,
    SgdParams, Shape,
};

use crate::backend_error;
use crate::blas::Blas;
use crate::driver::{describe, Arg, DevPtr, Device};
use modules::Loaded;

/// What a launcher needs: the device, cuBLAS, the loaded kernels and the status word
/// (where kernels report bad user data, see `common.cuh`).
#[derive(Debug, Clone, Copy)]
pub struct Gpu<'a> {
    pub device: &'a Device,
    pub blas: &'a Blas,
    pub kernels: &'a Kernels,
    pub status: DevPtr,
}

/// Threads per block of the one-dimensional kernels.
const BLOCK: u32 = 256;

/// Most blocks of a grid-stride launch: enough to fill any current GPU many times over.
const MAX_BLOCKS: i64 = 1 << 16;

impl Gpu<'_> {
    /// Launches kernel `name` over `n` elements with a grid-stride grid (nothing if `n` is 0).
    fn launch_1d(&self, name: &str, n: i64, args: &[Arg]) -> Result<()> {
        self.launch_fn(self.kernels.get(name)?, name, n, args)
    }

    /// [`Gpu::launch_1d`] with the kernel already looked up.
    fn launch_fn(&self, k: &Loaded, name: &str, n: i64, args: &[Arg]) -> Result<()> {
        if n <= 0 {
            return Ok(());
        }
        let blocks = ((n + BLOCK as i64 - 1) / BLOCK as i64).min(MAX_BLOCKS) as u32;
        self.launch_loaded(k, name, (blocks, 1, 1), (BLOCK, 1, 1), args)
    }

    /// Launches kernel `name` with an explicit grid and block.
    fn launch(
        &self,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        self.launch_loaded(self.kernels.get(name)?, name, grid, block, args)
    }

    /// The one place a kernel is launched: the argument list is checked against the
    /// kernel's parameters first (see [`entry_params`]).
    fn launch_loaded(
        &self,
        k: &Loaded,
        name: &str,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        args: &[Arg],
    ) -> Result<()> {
        if args.len() != k.params.len() || args.iter().zip(&k.params).any(|(a, p)| a.kind() != *p) {
            let got: Vec<_> = args.iter().map(Arg::kind).collect();
            return Err(backend_error(format!(
                "launch of `{name}`: arguments {got:?} do not match its parameters {:?}",
                k.params
            )));
        }
        self.device
            .launch(k.function, grid, block, args)
            .map_err(|e| backend_error(format!("launch of `{name}` failed: {}", describe(e))))
    }

    /// A device-to-device copy of `elements` f32s.
    fn copy(&self, dst: DevPtr, src: DevPtr, elements: usize) -> Result<()> {
        self.device
            .copy(dst, src, elements)
            .map_err(|e| backend_error(format!("device copy failed: {}", describe(e))))
    }

    /// Sets `elements` f32s to `value`.
    fn fill(&self, dst: DevPtr, value: f32, elements: usize) -> Result<()> {
        self.device
            .fill(dst, value, elements)
            .map_err(|e| backend_error(format!("device fill failed: {}", describe(e))))
    }
}

/// `v` as a kernel's `int`, or an error naming what is too large.
pub(crate) fn int(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        Error::Input(format!(
            "{what} = {v} exceeds the CUDA kernels' limit of {}",
            i32::MAX
        ))
    })
}

/// `v` as a kernel's `i64` element count.
pub(crate) fn count(v: usize) -> i64 {
    v as i64
}

impl<'g> KernelTypes for Gpu<'g> {
    const BACKEND: &'static str = "cuda";
    type In = DevPtr;
    type Out = DevPtr;
}

impl<'g> OpKernels for Gpu<'g> {
    fn matmul(
        &mut self,
        (trans_a, trans_b): (bool, bool),
        s: MatMulInputs<&Shape>,
        i: MatMulInputs<DevPtr>,
        o: MatMulOutputs<DevPtr>,
    ) -> Result<()> {
        let (a, b) = ((i.a, dims2(s.a)), (i.b, dims2(s.b)));
        gemm::matmul(self, a, b, (trans_a, trans_b), o.c)
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        s: BinaryInputs<&Shape>,
        i: BinaryInputs<DevPtr>,
        o: BinaryOutputs<DevPtr>,
    ) -> Result<()> {
        let (n, nb) = (s.a.numel(), s.b.numel());
        elementwise::binary(self, op, i.a, i.b, o.out, n, nb)
    }

    fn activation_forward(
        &mut self,
        f: Activation,
        s: ActivationInputs<&Shape>,
        i: ActivationInputs<DevPtr>,
        o: ActivationOutputs<DevPtr>,
    ) -> Result<()> {
        elementwise::activation_forward(self, f, i.x, o.y, s.x.numel())
    }

    fn activation_backward(
        &mut self,
        f: Activation,
        s: ActivationBackwardInputs<&Shape>,
        i: ActivationBackwardInputs<DevPtr>,
        o: ActivationBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let tensors = [i.y, i.dy, o.dx];
        elementwise::activation_backward(self, f, tensors, i.x, s.y.numel())
    }

    fn sum_to_shape(
        &mut self,
        shape: &Shape,
        s: SumToShapeInputs<&Shape>,
        i: SumToShapeInputs<DevPtr>,
        o: SumToShapeOutputs<DevPtr>,
    ) -> Result<()> {
        let width = shape.numel();
        if width == 0 {
            return Ok(());
        }
        elementwise::sum_to_shape(self, i.x, o.out, s.x.numel() / width, width)
    }

    fn fill(&mut self, value: f32, shape: &Shape, o: FillOutputs<DevPtr>) -> Result<()> {
        elementwise::fill(self, value, o.out, shape.numel())
    }

    fn slice_time(
        &mut self,
        t: usize,
        s: SliceTimeInputs<&Shape>,
        i: SliceTimeInputs<DevPtr>,
        o: SliceTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let step = s.x.dim(1) * s.x.dim(2);
        match i.lengths {
            Some(lengths) => {
                let dims = (t, s.x.dim(0), s.x.dim(1), s.x.dim(2));
                Gpu::fill(self, o.out, 0.0, step)?;
                gather::steps_at_lengths(self, GATHER_STEPS, [lengths, i.x, o.out], dims)
            }
            None => elementwise::slice_time(self, t, i.x, o.out, step),
        }
    }

    fn scatter_time(
        &mut self,
        t: usize,
        steps: usize,
        s: ScatterTimeInputs<&Shape>,
        i: ScatterTimeInputs<DevPtr>,
        o: ScatterTimeOutputs<DevPtr>,
    ) -> Result<()> {
        match i.lengths {
            Some(lengths) => {
                let dims = (t, steps, s.x.dim(0), s.x.dim(1));
                Gpu::fill(self, o.out, 0.0, steps * s.x.numel())?;
                gather::steps_at_lengths(self, SCATTER_STEPS, [lengths, i.x, o.out], dims)
            }
            None => elementwise::scatter_time(self, t, i.x, o.out, s.x.numel(), steps),
        }
    }

    fn reverse_time(
        &mut self,
        s: ReverseTimeInputs<&Shape>,
        i: ReverseTimeInputs<DevPtr>,
        o: ReverseTimeOutputs<DevPtr>,
    ) -> Result<()> {
        let dims = tensorfit_core::time_dims(s.x);
        bidir::reverse_time(self, [i.x, o.y], i.lengths, dims)
    }

    fn concat_features(
        &mut self,
        s: ConcatFeaturesInputs<&Shape>,
        i: ConcatFeaturesInputs<DevPtr>,
        o: ConcatFeaturesOutputs<DevPtr>,
    ) -> Result<()> {
        let ([rows, fa], [_, fb]) = (dims2(s.a), dims2(s.b));
        bidir::concat_features(self, rows, [(i.a, fa), (i.b, fb)], o.out)
    }

    fn slice_features(
        &mut self,
        start: usize,
        width: usize,
        s: SliceFeaturesInputs<&Shape>,
        i: SliceFeaturesInputs<DevPtr>,
        o: SliceFeaturesOutputs<DevPtr>,
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
        i: EmbeddingInputs<DevPtr>,
        o: EmbeddingOutputs<DevPtr>,
    ) -> Result<()> {
        let t = Table::rows(s.table.dim(0), s.table.dim(1));
        gather::gather(self, i.table, t, i.ids, o.out, s.ids.numel())
    }

    fn embedding_backward(
        &mut self,
        vocab: usize,
        s: EmbeddingBackwardInputs<&Shape>,
        i: EmbeddingBackwardInputs<DevPtr>,
        o: EmbeddingBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let t = Table::rows(vocab, s.dout.0.last().copied().unwrap_or(0));
        gather::scatter_add(self, t, i.ids, i.dout, o.dtable, s.ids.numel())
    }

    fn batchnorm_forward(
        &mut self,
        eps: f32,
        s: BatchNormInputs<&Shape>,
        i: BatchNormInputs<DevPtr>,
        o: BatchNormOutputs<DevPtr>,
    ) -> Result<()> {
        let stats = BatchNormStats::of(i.running, o.batch).map_err(backend_error)?;
        let [rows, width] = dims2(s.x);
        let bc = (rows, width);
        batchnorm::batchnorm_forward(self, eps, [i.x, i.gamma, i.beta], stats, o.y, bc)
    }

    fn batchnorm_backward(
        &mut self,
        eps: f32,
        training: bool,
        s: BatchNormBackwardInputs<&Shape>,
        i: BatchNormBackwardInputs<DevPtr>,
        o: BatchNormBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let [rows, width] = dims2(s.x);
        let bc = (rows, width);
        batchnorm::batchnorm_backward(self, (eps, training), &i, &o, bc)
    }

    fn layernorm_forward(
        &mut self,
        eps: f32,
        s: LayerNormInputs<&Shape>,
        i: LayerNormInputs<DevPtr>,
        o: LayerNormOutputs<DevPtr>,
    ) -> Result<()> {
        let [rows, features] = dims2(s.x);
        layernorm::layernorm_forward(self, eps, &i, &o, (rows, features))
    }

    fn layernorm_backward(
        &mut self,
        s: LayerNormBackwardInputs<&Shape>,
        i: LayerNormBackwardInputs<DevPtr>,
        o: LayerNormBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let [rows, features] = dims2(s.x);
        layernorm::layernorm_backward(self, &i, &o, (rows, features))
    }

    fn batchnorm_stats_update(
        &mut self,
        momentum: f32,
        unbias: f32,
        s: StatsUpdateInputs<&Shape>,
        i: StatsUpdateInputs<DevPtr>,
        o: StatsUpdateTargets<DevPtr>,
    ) -> Result<()> {
        let n = s.mean.numel();
        batchnorm::batchnorm_stats_update(self, (momentum, unbias), &i, &o, n)
    }

    fn softmax_cross_entropy_forward(
        &mut self,
        s: SoftmaxCrossEntropyInputs<&Shape>,
        i: SoftmaxCrossEntropyInputs<DevPtr>,
        o: SoftmaxCrossEntropyOutputs<DevPtr>,
    ) -> Result<()> {
        let [rows, width] = dims2(s.logits);
        let bk = (rows, width);
        softmax::softmax_cross_entropy_forward(self, i.logits, i.labels, o.loss, o.probs, bk)
    }

    fn softmax_cross_entropy_backward(
        &mut self,
        s: SoftmaxCrossEntropyBackwardInputs<&Shape>,
        i: SoftmaxCrossEntropyBackwardInputs<DevPtr>,
        o: SoftmaxCrossEntropyBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        let [rows, width] = dims2(s.probs);
        let bk = (rows, width);
        softmax::softmax_cross_entropy_backward(self, i.probs, i.labels, i.dloss, o.dlogits, bk)
    }

    fn mse_loss_forward(
        &mut self,
        s: MseLossInputs<&Shape>,
        i: MseLossInputs<DevPtr>,
        o: MseLossOutputs<DevPtr>,
    ) -> Result<()> {
        mse::mse_loss_forward(self, &i, o.loss, s.pred.numel())
    }

    fn mse_loss_backward(
        &mut self,
        s: MseLossBackwardInputs<&Shape>,
        i: MseLossBackwardInputs<DevPtr>,
        o: MseLossBackwardOutputs<DevPtr>,
    ) -> Result<()> {
        mse::mse_loss_backward(self, &i, o.dpred, s.pred.numel())
    }

    fn adam_update(
        &mut self,
        p: AdamParams,
        s: AdamInputs<&Shape>,
        i: AdamInputs<DevPtr>,
        o: AdamTargets<DevPtr>,
    ) -> Result<()> {
        adam::adam_update(self, p, &i, &o, s.grad.numel())
    }

    fn sgd_update(
        &mut self,
        p: SgdParams,
        s: SgdInputs<&Shape>,
        i: SgdInputs<DevPtr>,
        o: SgdTargets<DevPtr>,
    ) -> Result<()> {
        optim::sgd_update(self, p, &i, &o, s.grad.numel())
    }

    fn sum_squares(
        &mut self,
        s: SumSquaresInputs<&Shape>,
        i: SumSquaresInputs<DevPtr>,
        o: SumSquaresOutputs<DevPtr>,
    ) -> Result<()> {
        optim::sum_squares(self, i.x, o.total, s.x.numel())
    }

    fn clip_grad(
        &mut self,
        max_norm: f32,
        value: f32,
        s: ClipGradInputs<&Shape>,
        i: ClipGradInputs<DevPtr>,
        o: ClipGradOutputs<DevPtr>,
    ) -> Result<()> {
        let n = s.x.numel();
        optim::clip_grad(self, [max_norm, value], [i.x, i.total_sq, o.y], n)
    }

    fn dropout(
        &mut self,
        p: DropoutParams,
        s: DropoutInputs<&Shape>,
        i: DropoutInputs<DevPtr>,
        o: DropoutOutputs<DevPtr>,
    ) -> Result<()> {
        dropout::dropout(self, p, [i.x, i.key, o.y], s.x.numel())
    }

    fn copy(
        &mut self,
        s: CopyInputs<&Shape>,
        i: CopyInputs<DevPtr>,
        o: CopyTargets<DevPtr>,
    ) -> Result<()> {
        elementwise::copy(self, i.src, o.dst, s.src.numel())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_table_names_exactly_the_kernels_each_source_defines() {
        for src in SOURCES {
            let defined = src.code.matches("__global__").count();
            assert_eq!(defined, src.kernels.len(), "{}: kernels defined", src.file);
            for name in src.kernels {
                let signature = format!("extern \"C\" __global__ void {name}(");
                assert!(src.code.contains(&signature), "{} has no {name}", src.file);
            }
        }
    }
}
