//! A described model as typed layers, and the table of its tensors.
//!
//! [`Network`] places the layers (the LSTM stack, the head's layers in the description's
//! order, the output layer `out` the loss sizes); [`NetworkTensors`] holds one item per
//! tensor, by layer and field, in one fixed order: the order of graph leaves, of
//! checkpoints' parameter lists and of Adam's updates. Its names are PyTorch's, made by
//! each layer.

use crate::description::{HeadLayerKind, HeadOn, InputSpec, ModelDescription};
use crate::layers::{
    BatchNorm, Dense, HeadPart, HeadPartTensors, LinearTensors, Lstm, LstmInput, LstmWeights,
    OutputLayer, ParamSpec, Tensors,
};

/// The name the output layer is registered under.
pub const OUTPUT: &str = "out";

/// The model's layers, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    pub lstm: Lstm,
    /// Which steps of the top layer the head reads.
    pub head_on: HeadOn,
    pub head: Vec<HeadPart>,
    pub out: OutputLayer,
}

/// One item per tensor of the [`Network`], by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkTensors<T> {
    pub lstm: Vec<LstmWeights<T>>,
    pub head: Vec<HeadPartTensors<T>>,
    pub out: LinearTensors<T>,
}

impl<T> NetworkTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> NetworkTensors<U> {
        NetworkTensors {
            lstm: self.lstm.iter().map(|w| w.map(&mut f)).collect(),
            head: self.head.iter().map(|p| p.map(&mut f)).collect(),
            out: self.out.map(&mut f),
        }
    }

    /// The LSTM stack's items, layer by layer.
    pub fn lstm_items(&self) -> Vec<&T> {
        self.lstm.iter().flat_map(|w| w.items()).collect()
    }

    /// The items of the layers after the LSTM stack: the head's, then `out`'s.
    pub fn head_items(&self) -> Vec<&T> {
        let mut v: Vec<&T> = self.head.iter().flat_map(|p| p.items()).collect();
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
    /// The layers of `d`, which [`ModelDescription::validate`] has accepted
    /// ([`ModelDescription::network`] checks first).
    pub(crate) fn new(d: &ModelDescription) -> Network {
        let hidden = d.recurrent.hidden;
        // What the first recurrent layer reads: features, the output of an embedding, or
        // token ids directly (exact one-hot, a gather of its input weights' columns).
        let (input, input_kind) = match d.input {
            InputSpec::Dense { features } => (features, LstmInput::Features),
            InputSpec::Tokens {
                embedding: Some(dim),
                ..
            } => (dim, LstmInput::Features),
            InputSpec::Tokens {
                vocab,
                embedding: None,
            } => (vocab, LstmInput::Tokens),
        };
        let mut width = hidden;
        let mut head = Vec::with_capacity(d.head.layers.len());
        for layer in &d.head.layers {
            let name = layer.name.clone();
            let part = match layer.kind {
                HeadLayerKind::BatchNorm => HeadPart::BatchNorm(BatchNorm {
                    name,
                    features: width,
                }),
                HeadLayerKind::Dense { units, activation } => HeadPart::Dense(Dense {
                    name,
                    input: width,
                    output: units,
                    activation,
                }),
            };
            width = part.output(width);
            head.push(part);
        }
        Network {
            lstm: Lstm {
                input,
                hidden,
                layers: d.recurrent.layers,
                input_kind,
            },
            head_on: d.head.on,
            head,
            out: OutputLayer::new(OUTPUT, width, d.loss),
        }
    }

    /// The table of every tensor.
    pub fn specs(&self) -> NetworkTensors<ParamSpec> {
        NetworkTensors {
            lstm: self.lstm.specs(),
            head: self.head.iter().map(HeadPart::specs).collect(),
            out: self.out.specs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::ParamKind;
    use crate::seed_shape::SeedShape;
    use tensorfit_core::Activation;

    #[test]
    fn every_tensor_a_layer_declares_is_listed_once_in_table_order() {
        // `map` must visit every field (struct literals are exhaustive), `items` lists
        // them by hand: a field left out of `items` would get no leaf in the checkpoint
        // and no optimizer update.
        let d = SeedShape {
            features: 3,
            hidden: 4,
            layers: 2,
            dense: 5,
            classes: 3,
            activation: Activation::Relu,
        }
        .description();
        let specs = d.network().unwrap().specs();
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

    #[test]
    fn a_head_of_any_layers_chains_their_widths_into_the_output_layer() {
        let mut d = ModelDescription::seed();
        d.head.layers.clear();
        let net = d.network().unwrap();
        assert!(net.head.is_empty());
        assert_eq!((net.out.linear.input, net.out.linear.output), (250, 6));
        // Dense 250→40, BatchNorm(40), Dense 40→7, out 7→6.
        let dense = |name: &str, units| crate::description::HeadLayer {
            name: name.into(),
            kind: HeadLayerKind::Dense {
                units,
                activation: Activation::Relu,
            },
        };
        d.head.layers = vec![
            dense("a", 40),
            crate::description::HeadLayer {
                name: "n".into(),
                kind: HeadLayerKind::BatchNorm,
            },
            dense("b", 7),
        ];
        let net = d.network().unwrap();
        let names: Vec<String> = net
            .specs()
            .head_items()
            .iter()
            .map(|s| format!("{}{}", s.name, s.shape))
            .collect();
        assert_eq!(
            names,
            [
                "a.weight[40, 250]",
                "a.bias[40]",
                "n.weight[40]",
                "n.bias[40]",
                "n.running_mean[40]",
                "n.running_var[40]",
                "b.weight[7, 40]",
                "b.bias[7]",
                "out.weight[6, 7]",
                "out.bias[6]"
            ]
        );
    }
}
