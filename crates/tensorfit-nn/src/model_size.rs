//! What a [`ModelDescription`] comes to: its network, its table of tensors, its parameter
//! count and its FLOPs.

use std::fmt;

use tensorfit_core::Result;

use crate::description::{
    BodyLayer, HeadLayerKind, HeadOn, InputSpec, LossSpec, ModelDescription, PositionEncoding,
    Reduce,
};
use crate::layers::{ParamKind, ParamSpec, Tensors};
use crate::network::Network;

/// A training step's FLOPs in forward passes: forward, and backward at twice its cost.
pub const TRAIN_FLOPS_PER_FORWARD: f64 = 3.0;

impl ModelDescription {
    /// The model as typed layers, after [`ModelDescription::validate`].
    pub fn network(&self) -> Result<Network> {
        self.validate()?;
        Ok(Network::new(self))
    }

    /// Values per step and sequence of the input: `features`, or one token id.
    pub fn input_features(&self) -> usize {
        match self.input {
            InputSpec::Dense { features } => features,
            InputSpec::Tokens { .. } => 1,
        }
    }

    /// Every model tensor in the network's fixed order (recurrent layers, the head's
    /// layers, `out`), with PyTorch's names.
    pub fn param_specs(&self) -> Result<Vec<ParamSpec>> {
        Ok(self
            .network()?
            .specs()
            .items()
            .into_iter()
            .cloned()
            .collect())
    }

    /// Number of trainable parameters.
    pub fn trainable_parameters(&self) -> Result<usize> {
        Ok(self
            .param_specs()?
            .iter()
            .filter(|p| p.kind == ParamKind::Trainable)
            .map(|p| p.shape.numel())
            .sum())
    }

    /// Forward FLOPs of the body over `steps` steps of `batch` sequences, each layer's
    /// ([`crate::layers::Lstm::forward_flops`], [`crate::layers::Gru::forward_flops`]; the
    /// embedding and the head are negligible). A training step counts
    /// [`TRAIN_FLOPS_PER_FORWARD`] times this.
    pub fn body_forward_flops(&self, batch: usize, steps: usize) -> f64 {
        Network::new(self)
            .body
            .iter()
            .map(|part| part.forward_flops(batch, steps))
            .sum()
    }
}

/// One line for messages: `dense 152 → 3 × lstm 250 → last step: bn1, dense 100 tanh,
/// bn2 → cross_entropy 6`.
impl fmt::Display for ModelDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.input {
            InputSpec::Dense { features } => write!(f, "dense {features}")?,
            InputSpec::Tokens { vocab, embedding } => {
                write!(f, "tokens {vocab}")?;
                if let Some(dim) = embedding {
                    write!(f, " → embedding {dim}")?;
                }
            }
        }
        let on = match self.head.on {
            HeadOn::Sequence(Reduce::LastStep) => "last step",
            HeadOn::Sequence(Reduce::Mean) => "mean over the steps",
            HeadOn::Sequence(Reduce::Max) => "max over the steps",
            HeadOn::EveryStep => "every step",
        };
        for layer in &self.body {
            match layer {
                BodyLayer::Recurrent(r) => {
                    let bi = if r.bidirectional {
                        "bidirectional "
                    } else {
                        ""
                    };
                    write!(f, " → {} × {bi}{} {}", r.layers, r.cell.name(), r.hidden)?;
                    if r.dropout.is_active() {
                        write!(f, " dropout {}", r.dropout)?;
                    }
                }
                BodyLayer::Conv1d(c) => {
                    write!(f, " → {} conv1d {} k{}", c.name, c.channels, c.kernel)?;
                    if c.dilation > 1 {
                        write!(f, " d{}", c.dilation)?;
                    }
                    write!(f, " {}", c.padding.spelling())?;
                    if c.activation != tensorfit_core::Activation::Identity {
                        write!(f, " {}", c.activation.name())?;
                    }
                    if c.residual {
                        write!(f, " + input")?;
                    }
                }
                BodyLayer::Positions(p) => match p.encoding {
                    PositionEncoding::Sinusoidal => write!(f, " → + sinusoidal positions")?,
                    PositionEncoding::Learned { max_len } => {
                        write!(f, " → + {} learned positions {max_len}", p.name)?
                    }
                },
                BodyLayer::Encoder(e) => {
                    let norm = if e.norm_first { " pre-norm" } else { "" };
                    let causal = if e.causal { " causal" } else { "" };
                    let last = if e.final_norm { " + norm" } else { "" };
                    write!(
                        f,
                        " → {} {} × transformer_encoder {} heads ff {} {}{norm}{causal}{last}",
                        e.name,
                        e.layers,
                        e.heads,
                        e.feedforward,
                        e.activation.name()
                    )?;
                    if e.dropout.is_active() {
                        write!(f, " dropout {}", e.dropout)?;
                    }
                }
            }
        }
        let mut sep = ":";
        write!(f, " → {on}")?;
        for layer in &self.head.layers {
            match layer.kind {
                HeadLayerKind::BatchNorm => write!(f, "{sep} {}", layer.name)?,
                HeadLayerKind::LayerNorm => write!(f, "{sep} {} layernorm", layer.name)?,
                HeadLayerKind::Dense { units, activation } => {
                    write!(f, "{sep} {} {units} {}", layer.name, activation.name())?
                }
                HeadLayerKind::Dropout { p } => write!(f, "{sep} {} dropout {p}", layer.name)?,
            }
            if layer.residual {
                write!(f, " + input")?;
            }
            sep = ",";
        }
        match self.loss {
            LossSpec::SoftmaxCrossEntropy { classes } => write!(f, " → cross_entropy {classes}"),
            LossSpec::MeanSquaredError { outputs } => write!(f, " → mse {outputs}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed_shape::SeedShape;

    #[test]
    fn seed_parameter_count_matches_pytorch_layout() {
        assert_eq!(
            ModelDescription::seed().trainable_parameters().unwrap(),
            1_434_406
        );
    }

    #[test]
    fn a_description_prints_as_one_line_naming_every_part() {
        assert_eq!(
            ModelDescription::seed().to_string(),
            "dense 152 → 3 × lstm 250 → last step: bn1, dense 100 tanh, bn2 → cross_entropy 6"
        );
    }

    #[test]
    fn dropout_shows_in_the_one_line_summary() {
        let mut d = ModelDescription::seed();
        d.recurrent_mut().unwrap().dropout = crate::layers::DropoutRate::new(0.25).unwrap();
        d.head.layers[1].kind = HeadLayerKind::Dropout {
            p: crate::layers::DropoutRate::new(0.5).unwrap(),
        };
        assert_eq!(
            d.to_string(),
            "dense 152 → 3 × lstm 250 dropout 0.25 → last step: bn1, dense dropout 0.5, bn2 → cross_entropy 6"
        );
    }

    #[test]
    fn the_seed_preset_is_the_seed_shape() {
        assert_eq!(ModelDescription::seed(), SeedShape::SEED.description());
    }

    #[test]
    fn seed_flops_match_the_reference_figures() {
        // The seed network's figures: a training step at B=32, T=50 is three forward
        // passes' worth; inference at B=100, T=200 is one.
        let s = ModelDescription::seed();
        assert!(
            (TRAIN_FLOPS_PER_FORWARD * s.body_forward_flops(32, 50) / 1e9 - 13.46).abs() < 0.01
        );
        assert!((s.body_forward_flops(100, 200) / 1e9 - 56.08).abs() < 0.01);
    }
}
