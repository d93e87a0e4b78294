//! The stacked-LSTM classifier as typed layers, and the table of its tensors.
//!
//! [`Network`] places the layers (LSTM stack, BatchNorm `bn1`, Dense `dense`, BatchNorm
//! `bn2`, softmax output `out`); [`NetworkTensors`] holds one item per tensor, by layer
//! and field, in one fixed order: the order of graph leaves, of checkpoints' parameter
//! lists and of Adam's updates. Its names are PyTorch's, made by each layer.

use crate::config::ModelConfig;
use crate::layers::{
    BatchNorm, BatchNormTensors, Dense, LinearTensors, Lstm, LstmInput, LstmWeights, ParamSpec,
    SoftmaxOutput, Tensors,
};

/// The classifier's layers, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub lstm: Lstm,
    pub bn1: BatchNorm,
    pub dense: Dense,
    pub bn2: BatchNorm,
    pub out: SoftmaxOutput,
}

/// One item per tensor of the [`Network`], by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkTensors<T> {
    pub lstm: Vec<LstmWeights<T>>,
    pub bn1: BatchNormTensors<T>,
    pub dense: LinearTensors<T>,
    pub bn2: BatchNormTensors<T>,
    pub out: LinearTensors<T>,
}

impl<T> NetworkTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> NetworkTensors<U> {
        NetworkTensors {
            lstm: self.lstm.iter().map(|w| w.map(&mut f)).collect(),
            bn1: self.bn1.map(&mut f),
            dense: self.dense.map(&mut f),
            bn2: self.bn2.map(&mut f),
            out: self.out.map(&mut f),
        }
    }

    /// The LSTM stack's items, layer by layer.
    pub fn lstm_items(&self) -> Vec<&T> {
        self.lstm.iter().flat_map(|w| w.items()).collect()
    }

    /// The items of the layers after the LSTM stack.
    pub fn head_items(&self) -> Vec<&T> {
        let mut v = self.bn1.items();
        v.extend(self.dense.items());
        v.extend(self.bn2.items());
        v.extend(self.out.items());
        v
    }
}

impl<T> Tensors<T> for NetworkTensors<T> {
    fn items(&self) -> Vec<&T> {
        let mut v = self.lstm_items();
        v.extend(self.head_items());
        v
    }
}

impl Network {
    pub fn new(cfg: &ModelConfig) -> Network {
        let batchnorm = |name: &str, features| BatchNorm {
            name: name.to_string(),
            features,
        };
        Network {
            lstm: Lstm {
                input: cfg.input,
                hidden: cfg.hidden,
                layers: cfg.layers,
                input_kind: LstmInput::Features,
            },
            bn1: batchnorm("bn1", cfg.hidden),
            dense: Dense {
                name: "dense".to_string(),
                input: cfg.hidden,
                output: cfg.dense,
                activation: cfg.dense_activation,
            },
            bn2: batchnorm("bn2", cfg.dense),
            out: SoftmaxOutput::new("out", cfg.dense, cfg.classes),
        }
    }

    /// The table of every tensor.
    pub fn specs(&self) -> NetworkTensors<ParamSpec> {
        NetworkTensors {
            lstm: self.lstm.specs(),
            bn1: self.bn1.specs(),
            dense: self.dense.specs(),
            bn2: self.bn2.specs(),
            out: self.out.specs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::ParamKind;
    use tensorfit_core::Activation;

    #[test]
    fn every_tensor_a_layer_declares_is_listed_once_in_table_order() {
        // `map` must visit every field (struct literals are exhaustive), `items` lists
        // them by hand: a field left out of `items` would get no leaf in the checkpoint
        // and no optimizer update.
        let net = Network::new(&ModelConfig {
            input: 3,
            hidden: 4,
            layers: 2,
            dense: 5,
            classes: 3,
            dense_activation: Activation::Relu,
        });
        let specs = net.specs();
        let mut visited = Vec::new();
        let _ = specs.map(|s| visited.push(s.name.clone()));
        let listed: Vec<String> = specs.items().iter().map(|s| s.name.clone()).collect();
        assert_eq!(listed, visited);
        let mut unique = listed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), listed.len(), "{listed:?}");
        assert_eq!(listed[0], "lstm.weight_ih_l0");
        assert_eq!(listed.last().map(String::as_str), Some("out.bias"));
        let running = specs
            .items()
            .iter()
            .filter(|s| s.kind == ParamKind::RunningStat)
            .count();
        assert_eq!(
            running, 4,
            "bn1 and bn2 each keep a running mean and variance"
        );
    }
}
