//! The seed network's shape with other sizes: a description in five numbers and an
//! activation, for tests, benchmarks and checkpoints written before descriptions.

use tensorfit_core::Activation;

use crate::description::{
    BodyLayer, Cell, DropoutRate, HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec,
    ModelDescription, RecurrentSpec,
};

/// Input `features` → `layers` × LSTM(`hidden`) → last step → BatchNorm `bn1` → Dense
/// `dense`(`dense` units, `activation`) → BatchNorm `bn2` → softmax over `classes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedShape {
    pub features: usize,
    pub hidden: usize,
    pub layers: usize,
    pub dense: usize,
    pub classes: usize,
    pub activation: Activation,
}

impl SeedShape {
    /// The seed report's sizes.
    pub const SEED: SeedShape = SeedShape {
        features: 152,
        hidden: 250,
        layers: 3,
        dense: 100,
        classes: 6,
        activation: Activation::Tanh,
    };

    /// The small network of the PyTorch reference files (`tools/make_reference.py`,
    /// the state dicts under `crates/tensorfit-nn/tests/data/`): the seed's shape with
    /// F=10, H=8, D=5.
    pub const SMALL_REFERENCE: SeedShape = SeedShape {
        features: 10,
        hidden: 8,
        layers: 3,
        dense: 5,
        classes: 6,
        activation: Activation::Tanh,
    };

    /// The description of this shape.
    pub fn description(&self) -> ModelDescription {
        let layer = |name: &str, kind| HeadLayer {
            name: name.to_string(),
            kind,
            residual: false,
        };
        ModelDescription {
            input: InputSpec::Dense {
                features: self.features,
            },
            body: vec![BodyLayer::Recurrent(RecurrentSpec {
                cell: Cell::Lstm,
                hidden: self.hidden,
                layers: self.layers,
                dropout: DropoutRate::NONE,
                bidirectional: false,
            })],
            head: HeadSpec {
                on: HeadOn::LAST_STEP,
                layers: vec![
                    layer("bn1", HeadLayerKind::BatchNorm),
                    layer(
                        "dense",
                        HeadLayerKind::Dense {
                            units: self.dense,
                            activation: self.activation,
                        },
                    ),
                    layer("bn2", HeadLayerKind::BatchNorm),
                ],
            },
            loss: LossSpec::SoftmaxCrossEntropy {
                classes: self.classes,
            },
        }
    }
}
