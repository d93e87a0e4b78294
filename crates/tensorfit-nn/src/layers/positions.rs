//! [`Positions`]: each step's position added to its features, the Transformer's
//! positional encoding: sines and cosines of the step index ("Attention is all you
//! need", PyTorch's tutorial `PositionalEncoding`; no tensors) or a trained table of
//! `max_len` rows (an `nn.Embedding(max_len, F)` of the step indices).

use tensorfit_core::args::{AddTimeRowsInputs, SinusoidsInputs};
use tensorfit_core::{Error, Graph, Op, Result, TensorId};

use super::layer::{wrong_tensors, Context, Layer, LayerTraits};
use super::{Init, ParamSpec, StateSlot};
use crate::description::{PositionEncoding, PositionsSpec};

/// Positions added to `features` per step, registered as `spec.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positions {
    pub spec: PositionsSpec,
    pub features: usize,
}

impl Positions {
    /// The learned table `{name}.weight` `[max_len, F]`, N(0, 1) as `nn.Embedding`'s;
    /// none for sinusoids.
    pub fn specs(&self) -> Option<ParamSpec> {
        match self.spec.encoding {
            PositionEncoding::Sinusoidal => None,
            PositionEncoding::Learned { max_len } => Some(ParamSpec::trainable(
                format!("{}.weight", self.spec.name),
                [max_len, self.features],
                Init::Normal { std: 1.0 },
            )),
        }
    }
}

impl Layer for Positions {
    fn kind(&self) -> &'static str {
        "positions"
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        self.specs().into_iter().collect()
    }

    fn output_features(&self, input: usize) -> usize {
        input
    }

    /// A step's output depends on its index from the sequence's start: a sequence cut
    /// in time would number each piece's steps from 0.
    fn traits(&self) -> LayerTraits {
        LayerTraits {
            mixes_rows: false,
            mixes_steps: false,
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
        _cx: &mut Context,
    ) -> Result<TensorId> {
        let name = &self.spec.name;
        let steps = g.shape(x).dim(0);
        let table = match (self.spec.encoding, tensors) {
            (PositionEncoding::Learned { max_len }, &[table]) => {
                if steps > max_len {
                    return Err(Error::Input(format!(
                        "layer `{name}` (positions) learned {max_len} positions (max_len = \
                         {max_len}) and is asked for sequences of {steps} steps: a larger \
                         max_len, or sequences cut to at most {max_len} steps"
                    )));
                }
                table
            }
            (PositionEncoding::Sinusoidal, []) => {
                let op = Op::Sinusoids {
                    steps,
                    dim: self.features,
                };
                g.apply(&format!("{name}.table"), op, SinusoidsInputs::default())?
                    .table
            }
            _ => return Err(wrong_tensors(self, self.table().len(), tensors.len())),
        };
        let inputs = AddTimeRowsInputs { x, table };
        Ok(g.apply(name, Op::AddTimeRows, inputs)?.out)
    }
}
