//! Layer normalisation over the features of each row, PyTorch's `nn.LayerNorm(F)` (eps
//! 1e-5, elementwise affine): its weight and bias, and its forward node. Unlike
//! BatchNorm it normalises each row by its own statistics, so it mixes no rows, keeps no
//! running statistics and is the same in training and inference.

use tensorfit_core::args::LayerNormInputs;
use tensorfit_core::{Graph, Op, Result, TensorId};

use super::layer::{exactly, Context, Layer, LayerTraits};
use super::{Init, LinearTensors, ParamSpec, StateSlot, Tensors};

/// PyTorch's default epsilon.
pub const LN_EPS: f32 = 1e-5;

/// LayerNorm over `features`, registered as `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerNorm {
    pub name: String,
    pub features: usize,
}

impl LayerNorm {
    /// The table: weight 1, bias 0 (`[F]` each; the pair a linear map also has).
    pub fn specs(&self) -> LinearTensors<ParamSpec> {
        let (name, f) = (&self.name, [self.features]);
        LinearTensors {
            weight: ParamSpec::trainable(format!("{name}.weight"), f, Init::Constant(1.0)),
            bias: ParamSpec::trainable(format!("{name}.bias"), f, Init::Constant(0.0)),
        }
    }
}

impl Layer for LayerNorm {
    fn kind(&self) -> &'static str {
        "layernorm"
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().to_vec()
    }

    fn output_features(&self, input: usize) -> usize {
        input
    }

    fn traits(&self) -> LayerTraits {
        LayerTraits::PER_ROW
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    /// `x` `[.., F]` normalised row by row.
    fn forward(
        &self,
        g: &mut Graph,
        x: TensorId,
        tensors: &[TensorId],
        _cx: &mut Context,
    ) -> Result<TensorId> {
        let [gamma, beta] = exactly(self, tensors)?;
        let inputs = LayerNormInputs { x, gamma, beta };
        Ok(g.apply(&self.name, Op::LayerNorm { eps: LN_EPS }, inputs)?
            .y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Shape;

    #[test]
    fn the_table_has_pytorchs_names_and_init_and_every_step_keeps_its_shape() {
        let layer = LayerNorm {
            name: "ln".into(),
            features: 6,
        };
        let names: Vec<String> = layer.table().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["ln.weight", "ln.bias"]);
        assert_eq!(layer.specs().weight.init, Init::Constant(1.0));
        let mut g = Graph::new();
        let t: Vec<TensorId> = layer.table().iter().map(|s| s.leaf(&mut g)).collect();
        let x = g.input("x", [4, 3, 6]);
        let mut cx = Context::new(crate::model::Mode::Train, 3, None, None);
        let y = layer.forward(&mut g, x, &t, &mut cx).unwrap();
        assert_eq!(g.shape(y), &Shape::from([4, 3, 6]));
        assert!(cx.stats.is_empty(), "no batch statistics to update");
        assert!(layer.forward(&mut g, x, &t[..1], &mut cx).is_err());
    }
}
