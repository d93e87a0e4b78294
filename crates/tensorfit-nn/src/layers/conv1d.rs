//! [`Conv1d`]: PyTorch's `nn.Conv1d` over the steps of each sequence (time-major,
//! `[T, B, in]` → `[T, B, channels]`), the sequence padded with zeros so that it keeps
//! its length (causal or "same"), then an activation.
//!
//! The graph: `Op::UnfoldTime` gathers, for each step, the `kernel` steps it reads into
//! one row `[T, B, in · kernel]` (in PyTorch's weight order, input channel major), reading
//! only steps inside each sequence's own length (zeros outside it, and the rows of its
//! padding zeros); the weight `[channels, in, kernel]` is viewed as `[channels, in ·
//! kernel]` (`Op::Reshape`) and one `MatMul` gives every step's output. The backward comes
//! from the ops' autodiff (`Op::FoldTime` sums each step's columns back).

use tensorfit_core::args::{MatMulInputs, ReshapeInputs, UnfoldTimeInputs};
use tensorfit_core::{Graph, Op, Result, Shape, TensorId};

use super::dense::bias_activation;
use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{Init, LinearTensors, ParamSpec, StateSlot, Tensors};
use crate::description::Conv1dSpec;

/// A convolution over the steps reading `input` features per step, registered as
/// `spec.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv1d {
    pub spec: Conv1dSpec,
    pub input: usize,
}

impl Conv1d {
    /// The table: weight `[channels, input, kernel]` and bias `[channels]`, uniform in
    /// ±1/√(input · kernel) (PyTorch's default initialisation of `nn.Conv1d`).
    pub fn specs(&self) -> LinearTensors<ParamSpec> {
        let c = &self.spec;
        let init = Init::fan(self.input * c.kernel);
        LinearTensors {
            weight: ParamSpec::trainable(
                format!("{}.weight", c.name),
                [c.channels, self.input, c.kernel],
                init,
            ),
            bias: ParamSpec::trainable(format!("{}.bias", c.name), [c.channels], init),
        }
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences: one multiply-add per
    /// weight per step and sequence.
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        let c = &self.spec;
        2.0 * (batch * steps) as f64 * (c.channels * self.input * c.kernel) as f64
    }
}

impl Layer for Conv1d {
    fn kind(&self) -> &'static str {
        "conv1d"
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().to_vec()
    }

    fn output_features(&self, _input: usize) -> usize {
        self.spec.channels
    }

    /// A step's output reads the steps around it (before it only, causal): over a
    /// sequence cut in time, the first steps of a piece would read zeros where the
    /// previous piece's steps were. (A causal convolution could carry its last
    /// `(kernel - 1) · dilation` inputs from piece to piece; this version does not.)
    fn traits(&self) -> LayerTraits {
        LayerTraits {
            mixes_rows: false,
            mixes_steps: self.spec.kernel > 1,
            carries_state: false,
            splits_in_time: false,
            random: false,
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let [weight, bias] = exactly(self, tensors)?;
        let c = &self.spec;
        let name = &c.name;
        let unfold = Op::UnfoldTime {
            kernel: c.kernel,
            dilation: c.dilation,
            left: c.left(),
        };
        let inputs = UnfoldTimeInputs {
            x,
            lengths: cx.lengths,
        };
        let cols = g.apply(&format!("{name}.unfold"), unfold, inputs)?.cols;
        let reshape = Op::Reshape {
            shape: Shape::from([c.channels, self.input * c.kernel]),
        };
        let inputs = ReshapeInputs { x: weight };
        let w = g
            .apply(&format!("{name}.weight_rows"), reshape, inputs)?
            .out;
        let matmul = Op::MatMul {
            trans_a: false,
            trans_b: true,
        };
        let inputs = MatMulInputs { a: cols, b: w };
        let y = g.apply(&format!("{name}.matmul"), matmul, inputs)?.c;
        bias_activation(g, name, (y, bias), c.activation)
    }
}
