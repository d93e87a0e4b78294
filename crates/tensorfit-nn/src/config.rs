//! Model configuration: the stacked-LSTM classifier and the `seed` preset.
//!
//! The network is the one in `shared/seed`: input features → `layers` × LSTM(`hidden`)
//! → last time step → BatchNorm → Dense(`dense`, activation) → BatchNorm → Dense(`classes`)
//! → softmax. Parameter names and shapes are PyTorch's (`lstm.weight_ih_l{k}`, ...), so
//! checkpoints load into `torch.nn.LSTM` unchanged.

use tensorfit_core::{Activation, Error, Result};

use crate::layers::{ParamKind, ParamSpec, Tensors};
use crate::network::Network;

/// Shape of the stacked-LSTM classifier. Plain data: build graphs from it with
/// [`crate::model`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// Features per time step.
    pub input: usize,
    /// Units per LSTM layer.
    pub hidden: usize,
    /// Number of stacked LSTM layers.
    pub layers: usize,
    /// Units of the dense layer between the two BatchNorms.
    pub dense: usize,
    /// Number of output classes.
    pub classes: usize,
    /// Nonlinearity of the dense layer.
    pub dense_activation: Activation,
}

/// Largest size accepted for any one dimension: far beyond any real model, small enough
/// that products of a few of them cannot overflow.
const MAX_DIM: usize = 1 << 24;
/// Most stacked layers accepted.
const MAX_LAYERS: usize = 1024;
/// Most parameters accepted (2^36: 256 GiB of f32, beyond any device).
const MAX_PARAMETERS: u128 = 1 << 36;

impl ModelConfig {
    /// The network of the seed report: 152 one-hot features, 3 × LSTM 250, BatchNorm 250,
    /// Dense 100, BatchNorm 100, softmax over 6 classes. 1,434,406 trainable parameters
    /// with PyTorch's two LSTM bias vectors.
    pub fn seed() -> Self {
        ModelConfig {
            input: 152,
            hidden: 250,
            layers: 3,
            dense: 100,
            classes: 6,
            dense_activation: Activation::Tanh,
        }
    }

    /// Checks that every size is usable; the message names the field.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("input", self.input),
            ("hidden", self.hidden),
            ("layers", self.layers),
            ("dense", self.dense),
            ("classes", self.classes),
        ] {
            if v == 0 || v > MAX_DIM {
                return Err(Error::input(format!(
                    "model {name} = {v}: must be between 1 and {MAX_DIM}"
                )));
            }
        }
        if self.classes < 2 {
            return Err(Error::input("model classes must be at least 2"));
        }
        if self.layers > MAX_LAYERS {
            return Err(Error::input(format!(
                "model layers = {}: at most {MAX_LAYERS} are supported",
                self.layers
            )));
        }
        // Count in u128 so an absurd configuration is refused instead of overflowing.
        let (i, h, l) = (self.input as u128, self.hidden as u128, self.layers as u128);
        let lstm = 4 * h * (i + h) + 8 * h + (l - 1) * (4 * h * 2 * h + 8 * h);
        let rest = (self.dense as u128 + 1) * (h + self.classes as u128);
        if lstm + rest > MAX_PARAMETERS {
            return Err(Error::input(format!(
                "the model would have {} parameters; at most {MAX_PARAMETERS} are supported",
                lstm + rest
            )));
        }
        Ok(())
    }

    /// The model as typed layers.
    pub fn network(&self) -> Network {
        Network::new(self)
    }

    /// Every model tensor in the network's fixed order (LSTM layers, bn1, dense, bn2,
    /// out), with PyTorch's names.
    pub fn param_specs(&self) -> Vec<ParamSpec> {
        self.network()
            .specs()
            .items()
            .into_iter()
            .cloned()
            .collect()
    }

    /// Number of trainable parameters.
    pub fn trainable_parameters(&self) -> usize {
        self.param_specs()
            .iter()
            .filter(|p| p.kind == ParamKind::Trainable)
            .map(|p| p.shape.numel())
            .sum()
    }

    /// Forward FLOPs of the LSTM stack over `steps` steps of `batch` sequences
    /// ([`crate::layers::Lstm::forward_flops`]; the head is negligible). A training step counts
    /// [`TRAIN_FLOPS_PER_FORWARD`] times this.
    pub fn lstm_forward_flops(&self, batch: usize, steps: usize) -> f64 {
        self.network().lstm.forward_flops(batch, steps)
    }
}

/// A training step's FLOPs in forward passes: forward, and backward at twice its cost.
pub const TRAIN_FLOPS_PER_FORWARD: f64 = 3.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_parameter_count_matches_pytorch_layout() {
        assert_eq!(ModelConfig::seed().trainable_parameters(), 1_434_406);
    }

    #[test]
    fn seed_flops_match_the_reference_figures() {
        // The seed network's figures: a training step at B=32, T=50 is three forward
        // passes' worth; inference at B=100, T=200 is one.
        let s = ModelConfig::seed();
        assert!(
            (TRAIN_FLOPS_PER_FORWARD * s.lstm_forward_flops(32, 50) / 1e9 - 13.46).abs() < 0.01
        );
        assert!((s.lstm_forward_flops(100, 200) / 1e9 - 56.08).abs() < 0.01);
    }

    #[test]
    fn zero_sizes_are_rejected_with_the_field_name() {
        let mut c = ModelConfig::seed();
        c.hidden = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("hidden"), "{e}");
    }
}
