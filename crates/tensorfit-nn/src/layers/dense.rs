//! Fully connected layers: [`Dense`] is PyTorch's `nn.Linear` followed by an activation;
//! [`OutputLayer`] is the output layer, a linear map to the loss's width and the loss.

use tensorfit_core::args::{
    ActivationInputs, BinaryInputs, MatMulInputs, MseLossInputs, SoftmaxCrossEntropyInputs,
};
use tensorfit_core::{Activation, BinaryOp, Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{Init, ParamSpec, StateSlot, Tensors};
use crate::description::LossSpec;

/// `activation(x · Wᵀ + b)` from `input` to `output` features, registered as `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dense {
    pub name: String,
    pub input: usize,
    pub output: usize,
    pub activation: Activation,
}

/// A linear map's tensors, in PyTorch's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearTensors<T> {
    /// `[output, input]`.
    pub weight: T,
    /// `[output]`.
    pub bias: T,
}

impl<T> LinearTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> LinearTensors<U> {
        LinearTensors {
            weight: f(&self.weight),
            bias: f(&self.bias),
        }
    }
}

impl<T> Tensors<T> for LinearTensors<T> {
    fn items(&self) -> Vec<&T> {
        vec![&self.weight, &self.bias]
    }
}

impl Dense {
    /// The table: weight and bias uniform in ±1/√input.
    pub fn specs(&self) -> LinearTensors<ParamSpec> {
        let (name, init) = (&self.name, Init::fan(self.input));
        LinearTensors {
            weight: ParamSpec::trainable(format!("{name}.weight"), [self.output, self.input], init),
            bias: ParamSpec::trainable(format!("{name}.bias"), [self.output], init),
        }
    }

    /// `x` `[B, input]` through the layer.
    pub fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        t: &LinearTensors<TensorId>,
    ) -> Result<TensorId> {
        let name = &self.name;
        let matmul = Op::MatMul {
            trans_a: false,
            trans_b: true,
        };
        let inputs = MatMulInputs { a: x, b: t.weight };
        let xw = g.apply(&format!("{name}.matmul"), matmul, inputs)?.c;
        bias_activation(g, name, (xw, t.bias), self.activation)
    }
}

/// `f(y + bias)`, its nodes named after the layer `name`: the end of a linear map
/// (a dense layer's, a convolution's).
pub(crate) fn bias_activation(
    g: &mut Graph,
    name: &str,
    (y, bias): (TensorId, TensorId),
    f: Activation,
) -> Result<TensorId> {
    let add = Op::Binary(BinaryOp::Add);
    let inputs = BinaryInputs { a: y, b: bias };
    let y = g.apply(&format!("{name}.bias_add"), add, inputs)?.out;
    match f {
        Activation::Identity => Ok(y),
        f => {
            let inputs = ActivationInputs { x: y };
            Ok(
                g.apply(&format!("{name}.activation"), Op::Activation(f), inputs)?
                    .y,
            )
        }
    }
}

impl Layer for Dense {
    fn kind(&self) -> &'static str {
        "dense"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().to_vec()
    }

    fn output_features(&self, _input: usize) -> usize {
        self.output
    }

    fn traits(&self) -> LayerTraits {
        LayerTraits::PER_ROW
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        _cx: &mut Context,
    ) -> Result<TensorId> {
        let [weight, bias] = exactly(self, tensors)?;
        Dense::forward(self, g, x, &LinearTensors { weight, bias })
    }
}

/// The output layer `out`: a linear map from `input` features to the loss's width, then
/// the loss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLayer {
    pub linear: Dense,
    pub loss: LossSpec,
}

/// The loss node's results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossOutputs {
    /// The mean loss, `[1]`.
    pub loss: TensorId,
    /// What the model predicts per row: softmax probabilities for cross-entropy, the
    /// output layer's values for mean squared error.
    pub prediction: TensorId,
}

impl OutputLayer {
    /// The layer registered as `name`, sized by `loss`.
    pub fn new(name: &str, input: usize, loss: LossSpec) -> Self {
        OutputLayer {
            linear: Dense {
                name: name.to_string(),
                input,
                output: loss.outputs(),
                activation: Activation::Identity,
            },
            loss,
        }
    }

    pub fn specs(&self) -> LinearTensors<ParamSpec> {
        self.linear.specs()
    }

    /// Loss and prediction of `x` `[rows, input]` against `targets` (node `loss`): class
    /// ids `[rows]` for cross-entropy, f32 values `[rows, outputs]` for mean squared
    /// error.
    pub fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        t: &LinearTensors<TensorId>,
        targets: TensorId,
    ) -> Result<LossOutputs> {
        let logits = self.linear.forward(g, x, t)?;
        match self.loss {
            LossSpec::SoftmaxCrossEntropy { .. } => {
                let inputs = SoftmaxCrossEntropyInputs {
                    logits,
                    labels: targets,
                };
                let outs = g.apply("loss", Op::SoftmaxCrossEntropy, inputs)?;
                Ok(LossOutputs {
                    loss: outs.loss,
                    prediction: outs.probs,
                })
            }
            LossSpec::MeanSquaredError { .. } => {
                let inputs = MseLossInputs {
                    pred: logits,
                    target: targets,
                };
                let outs = g.apply("loss", Op::MseLoss, inputs)?;
                Ok(LossOutputs {
                    loss: outs.loss,
                    prediction: logits,
                })
            }
        }
    }
}
