//! A described model as typed layers, and the table of its tensors.
//!
//! [`Network`] places the layers (the token embedding if any, the recurrent stack, the
//! head's layers in the description's order, the output layer `out` the loss sizes); [`NetworkTensors`] holds one item per
//! tensor, by layer and field, in one fixed order: the order of graph leaves, of
//! checkpoints' parameter lists and of Adam's updates. Its names are PyTorch's, made by
//! each layer.

use tensorfit_core::{Graph, Result, Shape, TensorId};

use crate::description::{Cell, HeadLayerKind, HeadOn, InputSpec, ModelDescription};
use crate::layers::{
    BatchNorm, Between, CellInput, Dense, DropoutRate, Embedding, EmbeddingTensors, Gru, HeadPart,
    HeadPartTensors, LinearTensors, Lstm, OutputLayer, ParamSpec, Recurrent, RecurrentStack,
    RecurrentWeights, Tensors,
};

/// The name the output layer is registered under.
pub const OUTPUT: &str = "out";

/// The model's layers, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    /// The token embedding before the stack (`embedding.weight`), if the input has one.
    pub embedding: Option<Embedding>,
    pub recurrent: Recurrent,
    /// Dropout on the output of every recurrent layer but the last, in training.
    pub between: DropoutRate,
    /// Which steps of the top layer the head reads.
    pub head_on: HeadOn,
    pub head: Vec<HeadPart>,
    pub out: OutputLayer,
}

/// One item per tensor of the [`Network`], by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkTensors<T> {
    pub embedding: Option<EmbeddingTensors<T>>,
    pub recurrent: RecurrentWeights<T>,
    pub head: Vec<HeadPartTensors<T>>,
    pub out: LinearTensors<T>,
}

impl<T> NetworkTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> NetworkTensors<U> {
        NetworkTensors {
            embedding: self.embedding.as_ref().map(|e| e.map(&mut f)),
            recurrent: self.recurrent.map(&mut f),
            head: self.head.iter().map(|p| p.map(&mut f)).collect(),
            out: self.out.map(&mut f),
        }
    }

    /// The items of the input side: the embedding's, then the recurrent stack's, layer
    /// by layer.
    pub fn input_items(&self) -> Vec<&T> {
        let mut v: Vec<&T> = self.embedding.iter().flat_map(|e| e.items()).collect();
        v.extend(self.recurrent.items());
        v
    }

    /// The items of the layers after the recurrent stack: the head's, then `out`'s.
    pub fn head_items(&self) -> Vec<&T> {
        let mut v: Vec<&T> = self.head.iter().flat_map(|p| p.items()).collect();
        v.extend(self.out.items());
        v
    }
}

impl<T> Tensors<T> for NetworkTensors<T> {
    fn items(&self) -> Vec<&T> {
        let mut v = self.input_items();
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
        let (input, input_kind, embedding) = match d.input {
            InputSpec::Dense { features } => (features, CellInput::Features, None),
            InputSpec::Tokens {
                vocab,
                embedding: Some(dim),
            } => (dim, CellInput::Features, Some(Embedding { vocab, dim })),
            InputSpec::Tokens {
                vocab,
                embedding: None,
            } => (vocab, CellInput::Tokens, None),
        };
        let layers = d.recurrent.layers;
        let recurrent = match d.recurrent.cell {
            Cell::Lstm => Recurrent::Lstm(Lstm {
                input,
                hidden,
                layers,
                input_kind,
            }),
            Cell::Gru => Recurrent::Gru(Gru {
                input,
                hidden,
                layers,
                input_kind,
            }),
        };
        let mut width = hidden;
        let mut head = Vec::with_capacity(d.head.layers.len());
        for (index, layer) in d.head.layers.iter().enumerate() {
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
                HeadLayerKind::Dropout { p } => HeadPart::Dropout { p, index },
            };
            width = part.output(width);
            head.push(part);
        }
        Network {
            embedding,
            recurrent,
            between: d.recurrent.dropout,
            head_on: d.head.on,
            head,
            out: OutputLayer::new(OUTPUT, width, d.loss),
        }
    }

    /// The table of every tensor.
    pub fn specs(&self) -> NetworkTensors<ParamSpec> {
        NetworkTensors {
            embedding: self.embedding.map(|e| e.specs()),
            recurrent: self.recurrent.specs(),
            head: self.head.iter().map(HeadPart::specs).collect(),
            out: self.out.specs(),
        }
    }

    /// The shape of the sequence the host writes: `[T, B]` token ids, or the first
    /// recurrent layer's input.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        match self.embedding {
            Some(_) => Shape::from([steps, batch]),
            None => self.recurrent.input_shape(batch, steps),
        }
    }

    /// Whether a training graph of this network drops anything (and so reads the
    /// step's dropout key).
    pub fn has_dropout(&self) -> bool {
        let in_head = self.head.iter().any(|part| match part {
            HeadPart::Dropout { p, .. } => p.is_active(),
            _ => false,
        });
        in_head || (self.between.is_active() && self.recurrent.layers() > 1)
    }

    /// The input side over a sequence it adds (`x`, of [`Network::input_shape`], and with
    /// `padded` the sequences' `lengths` `[B]`): the embedding if any, then the recurrent
    /// stack from its carried state, dropping between layers with `dropout_key` (a
    /// training graph's; `None` in inference).
    pub fn stack(
        &self,
        g: &mut Graph,
        ids: &NetworkTensors<TensorId>,
        (batch, steps): (usize, usize),
        (keep, padded): (bool, bool),
        dropout_key: Option<TensorId>,
    ) -> Result<RecurrentStack> {
        let x = g.input("x", self.input_shape(batch, steps));
        let lengths = padded.then(|| g.input("lengths", [batch]));
        let input = match &ids.embedding {
            Some(w) => Embedding::forward(g, "embedding", x, w)?,
            None => x,
        };
        let between = Between {
            p: self.between,
            key: dropout_key,
        };
        let mut stack = self.recurrent.stack_over(
            g,
            (input, lengths),
            &ids.recurrent,
            batch,
            (keep, between),
        )?;
        stack.x = x;
        Ok(stack)
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
