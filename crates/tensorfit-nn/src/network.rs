//! A described model as typed layers, and the table of its tensors.
//!
//! [`Network`] places the layers (the token embedding if any, the body's layers over the
//! steps, the reduction of each sequence unless the head reads every step, the head's layers in the description's
//! order, the output layer `out` the loss sizes); [`Network::layers`] is that order as
//! [`Layer`]s, which is how graphs are built and properties asked. [`NetworkTensors`]
//! holds one item per tensor, by layer and field, in one fixed order: the order of graph
//! leaves, of checkpoints' parameter lists and of Adam's updates. Its names are
//! PyTorch's, made by each layer.

use tensorfit_core::{Graph, Result, Shape, TensorId};

use crate::description::{
    BodyLayer, Cell, HeadLayerKind, HeadOn, InputSpec, ModelDescription, RecurrentSpec, Reduce,
};
use crate::layers::{
    residual_add, BatchNorm, BodyPart, BodyPartTensors, CellInput, Context, Conv1d, Dense, Dropout,
    Embedding, EmbeddingTensors, Encoder, Gru, HeadEntry, HeadPart, HeadPartTensors, LastStep,
    Layer, LayerNorm, LinearTensors, Lstm, OutputLayer, ParamSpec, Positions, Recurrent,
    RecurrentLayer, RecurrentStack, RecurrentWeights, Tensors, TimePool,
};

/// The name the output layer is registered under.
pub const OUTPUT: &str = "out";

/// The model's layers, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Network {
    /// The token embedding before the body (`embedding.weight`), if the input has one.
    pub embedding: Option<Embedding>,
    /// The layers over the steps, in order.
    pub body: Vec<BodyPart>,
    /// Which steps of the body's output the head reads: a head on each sequence places a
    /// [`LastStep`] or a [`TimePool`] after the stack ([`Network::reduce`]).
    pub head_on: HeadOn,
    pub head: Vec<HeadEntry>,
    pub out: OutputLayer,
}

/// One item per tensor of the [`Network`], by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkTensors<T> {
    pub embedding: Option<EmbeddingTensors<T>>,
    pub body: Vec<BodyPartTensors<T>>,
    pub head: Vec<HeadPartTensors<T>>,
    pub out: LinearTensors<T>,
}

impl<T> NetworkTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> NetworkTensors<U> {
        NetworkTensors {
            embedding: self.embedding.as_ref().map(|e| e.map(&mut f)),
            body: self.body.iter().map(|p| p.map(&mut f)).collect(),
            head: self.head.iter().map(|p| p.map(&mut f)).collect(),
            out: self.out.map(&mut f),
        }
    }

    /// The items of the input side: the embedding's, then the body's, layer by layer.
    pub fn input_items(&self) -> Vec<&T> {
        let mut v: Vec<&T> = self.embedding.iter().flat_map(|e| e.items()).collect();
        v.extend(self.body.iter().flat_map(|p| p.items()));
        v
    }

    /// The body's recurrent stack's weights, if it has one.
    pub fn recurrent(&self) -> Option<&RecurrentWeights<T>> {
        self.body.iter().find_map(|p| p.recurrent())
    }

    /// The items of the layers after the body: the head's, then `out`'s.
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
        let embedding = match d.input {
            InputSpec::Tokens {
                vocab,
                embedding: Some(dim),
            } => Some(Embedding { vocab, dim }),
            InputSpec::Tokens { .. } | InputSpec::Dense { .. } => None,
        };
        // Token ids without an embedding are read by the first layer directly (only a
        // recurrent stack can: exact one-hot, a gather of its input weights' columns).
        let mut input_kind = match d.input {
            InputSpec::Tokens {
                embedding: None, ..
            } => CellInput::Tokens,
            InputSpec::Tokens { .. } | InputSpec::Dense { .. } => CellInput::Features,
        };
        let mut width = d.body_input_features();
        let mut body = Vec::with_capacity(d.body.len());
        for layer in &d.body {
            let part = match layer {
                BodyLayer::Recurrent(r) => {
                    BodyPart::Recurrent(recurrent_layer(r, width, input_kind))
                }
                BodyLayer::Conv1d(c) => BodyPart::Conv1d(Conv1d {
                    spec: c.clone(),
                    input: width,
                }),
                BodyLayer::Positions(p) => BodyPart::Positions(Positions {
                    spec: p.clone(),
                    features: width,
                }),
                BodyLayer::Encoder(e) => BodyPart::Encoder(Encoder {
                    spec: e.clone(),
                    features: width,
                    index: body.len(),
                }),
            };
            width = part.layer().output_features(width);
            input_kind = CellInput::Features;
            body.push(part);
        }
        let mut head = Vec::with_capacity(d.head.layers.len());
        for (index, layer) in d.head.layers.iter().enumerate() {
            let name = layer.name.clone();
            let part = match layer.kind {
                HeadLayerKind::BatchNorm => HeadPart::BatchNorm(BatchNorm {
                    name,
                    features: width,
                }),
                HeadLayerKind::LayerNorm => HeadPart::LayerNorm(LayerNorm {
                    name,
                    features: width,
                }),
                HeadLayerKind::Dense { units, activation } => HeadPart::Dense(Dense {
                    name,
                    input: width,
                    output: units,
                    activation,
                }),
                HeadLayerKind::Dropout { p } => HeadPart::Dropout(Dropout { name, p, index }),
            };
            width = part.layer().output_features(width);
            head.push(HeadEntry {
                part,
                residual: layer.residual,
            });
        }
        Network {
            embedding,
            body,
            head_on: d.head.on,
            head,
            out: OutputLayer::new(OUTPUT, width, d.loss),
        }
    }

    /// The table of every tensor.
    pub fn specs(&self) -> NetworkTensors<ParamSpec> {
        NetworkTensors {
            embedding: self.embedding.map(|e| e.specs()),
            body: self.body.iter().map(|p| p.specs()).collect(),
            head: self.head.iter().map(|e| e.part.specs()).collect(),
            out: self.out.specs(),
        }
    }

    /// The shape of the sequence the host writes: `[T, B]` token ids, or the first
    /// body layer's input.
    pub fn input_shape(&self, batch: usize, steps: usize) -> Shape {
        match (&self.embedding, self.body.first()) {
            (Some(_), _) => Shape::from([steps, batch]),
            (None, Some(first)) => first.input_shape(batch, steps),
            // A body of no layers is refused by `ModelDescription::validate`.
            (None, None) => Shape::from([steps, batch, 0]),
        }
    }

    /// The body's recurrent stack, if it has one.
    pub fn recurrent(&self) -> Option<&RecurrentLayer> {
        self.body.iter().find_map(BodyPart::recurrent)
    }

    /// The body's recurrent stack when it is the body's only layer: what the ways of
    /// running that build the stack layer by layer (recomputed sub-segments, a state
    /// carried across chunks, streaming) run on; `what` names that way in the error
    /// otherwise.
    pub fn only_recurrent(&self, what: &str) -> Result<&RecurrentLayer> {
        match self.body.as_slice() {
            [BodyPart::Recurrent(r)] => Ok(r),
            _ => Err(tensorfit_core::Error::input(format!(
                "{what} runs a body of one \"lstm\" or \"gru\" layer only; this model's body is {}",
                self.body
                    .iter()
                    .map(|p| format!("`{}` ({})", p.layer().name(), p.layer().kind()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Features per step out of the body (its last layer's width).
    pub fn body_features(&self) -> usize {
        self.body.last().map_or(0, |p| p.layer().output_features(0))
    }

    /// The layers in order, each as the rest of the engine asks it: the embedding if
    /// any, the body's layers, the reduction of each sequence (a head on each
    /// sequence), the head's layers. (The output layer `out` and the loss end every
    /// model; they are not listed.)
    pub fn layers(&self) -> Vec<&dyn Layer> {
        let mut v: Vec<&dyn Layer> = Vec::new();
        if let Some(e) = &self.embedding {
            v.push(e);
        }
        v.extend(self.body.iter().map(BodyPart::layer));
        v.extend(self.reduce());
        v.extend(self.head_layers());
        v
    }

    /// The layer that reduces each sequence to one row for a head on each sequence: its
    /// last step, or the mean or maximum over its steps; none for a head on every step.
    pub fn reduce(&self) -> Option<&'static dyn Layer> {
        const LAST_STEP: LastStep = LastStep;
        match self.head_on {
            HeadOn::Sequence(Reduce::LastStep) => Some(&LAST_STEP),
            HeadOn::Sequence(Reduce::Mean) => Some(&TimePool::MEAN),
            HeadOn::Sequence(Reduce::Max) => Some(&TimePool::MAX),
            HeadOn::EveryStep => None,
        }
    }

    /// The head's layers (those after the body and the reduction), in order.
    pub fn head_layers(&self) -> impl Iterator<Item = &dyn Layer> {
        self.head.iter().map(|e| e.part.layer())
    }

    /// The first layer that reads each sequence whole ([`crate::layers::LayerTraits::splits_in_time`]
    /// false), if any.
    pub fn reads_whole(&self) -> Option<&dyn Layer> {
        self.layers()
            .into_iter()
            .find(|l| !l.traits().splits_in_time)
    }

    /// Refuses `what`, a way of running that cuts sequences in time (chunks continued
    /// from the carried state, recomputed sub-segments, streaming), for a network with a
    /// layer that reads each sequence whole ([`crate::layers::LayerTraits::splits_in_time`]), naming
    /// the layer.
    pub fn check_splits_in_time(&self, what: &str) -> Result<()> {
        match self.reads_whole() {
            None => Ok(()),
            Some(layer) => Err(tensorfit_core::Error::input(format!(
                "layer `{}` ({}) reads each sequence whole (its output at a step depends on the steps after it), so it cannot run {what}; give it whole sequences (truncated BPTT no shorter than the sequence, no state carried from one batch into the next, no streaming)",
                layer.name(),
                layer.kind(),
            ))),
        }
    }

    /// Whether a training graph of this network drops anything (and so reads the
    /// step's dropout key).
    pub fn has_dropout(&self) -> bool {
        self.layers().iter().any(|l| l.traits().random)
    }

    /// The input side over a sequence it adds (`x`, of [`Network::input_shape`], and with
    /// `cx.lengths` the sequences' lengths `[B]`): the embedding if any, then the body's
    /// layers (a recurrent stack from its carried state, recorded in `cx`), dropping
    /// with `cx`'s dropout key (a training graph's; `None` in inference).
    pub fn stack(
        &self,
        g: &mut Graph,
        ids: &NetworkTensors<TensorId>,
        steps: usize,
        cx: &mut Context,
    ) -> Result<RecurrentStack> {
        let x = g.input("x", self.input_shape(cx.batch, steps));
        let mut y = x;
        match (&self.embedding, &ids.embedding) {
            (Some(e), Some(w)) => y = e.forward(g, y, &[w.weight], cx)?,
            (None, None) => {}
            (Some(_), None) | (None, Some(_)) => {
                return Err(tensorfit_core::Error::Graph(
                    "the embedding's tensors do not match the network".into(),
                ))
            }
        }
        if ids.body.len() != self.body.len() {
            return Err(tensorfit_core::Error::Graph(
                "the body's tensors do not match the network".into(),
            ));
        }
        for (part, tensors) in self.body.iter().zip(&ids.body) {
            let out = part.layer().forward(g, y, &tensors.to_vec(), cx)?;
            if part.recurrent().is_none() {
                // A summary of each sequence's end left by a stack below is not this
                // layer's.
                cx.ends = None;
            }
            y = match part.residual() {
                false => out,
                true => residual_add(g, part.layer().name(), (y, out))?,
            };
        }
        Ok(RecurrentStack {
            x,
            carried: cx.carried.clone(),
            finals: cx.finals.clone(),
            y,
            ends: cx.ends,
            lengths: cx.lengths,
        })
    }
}

/// The recurrent stack `r` reading `input` features (or token ids, `input` being the
/// vocabulary) per step.
fn recurrent_layer(r: &RecurrentSpec, input: usize, input_kind: CellInput) -> RecurrentLayer {
    let (hidden, layers, bidirectional) = (r.hidden, r.layers, r.bidirectional);
    let cells = match r.cell {
        Cell::Lstm => Recurrent::Lstm(Lstm {
            input,
            hidden,
            layers,
            input_kind,
            bidirectional,
        }),
        Cell::Gru => Recurrent::Gru(Gru {
            input,
            hidden,
            layers,
            input_kind,
            bidirectional,
        }),
    };
    RecurrentLayer {
        cells,
        dropout: r.dropout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::description::{Cell, DropoutRate};
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
    fn the_layers_in_order_hold_every_tensor_but_the_output_layers_and_answer_for_themselves() {
        let seed = ModelDescription::seed().network().unwrap();
        let kinds: Vec<&str> = seed.layers().iter().map(|l| l.kind()).collect();
        assert_eq!(
            kinds,
            ["lstm", "last_step", "batchnorm", "dense", "batchnorm"]
        );
        let names = |net: &Network| -> (Vec<String>, Vec<String>) {
            let mut listed: Vec<String> = net
                .layers()
                .iter()
                .flat_map(|l| l.table())
                .map(|s| s.name)
                .collect();
            listed.extend(net.out.specs().items().iter().map(|s| s.name.clone()));
            let table = net.specs().items().iter().map(|s| s.name.clone()).collect();
            (listed, table)
        };
        let (listed, table) = names(&seed);
        assert_eq!(listed, table);
        let mixing: Vec<&str> = seed
            .layers()
            .iter()
            .filter(|l| l.traits().mixes_rows)
            .map(|l| l.name())
            .collect();
        assert_eq!(mixing, ["bn1", "bn2"]);
        assert!(!seed.has_dropout());
        let slots: usize = seed.layers().iter().map(|l| l.state_slots().len()).sum();
        assert_eq!(slots, 6, "h and c of three LSTM layers");

        // Embedded tokens into a GRU with dropout between its layers, on every step.
        let mut d = ModelDescription::lstm_language_model(11, 6, 2);
        d.input = InputSpec::Tokens {
            vocab: 11,
            embedding: Some(4),
        };
        d.recurrent_mut().unwrap().cell = Cell::Gru;
        d.recurrent_mut().unwrap().dropout = DropoutRate::new(0.25).unwrap();
        d.head.layers = vec![crate::description::HeadLayer {
            name: "drop".into(),
            kind: HeadLayerKind::Dropout {
                p: DropoutRate::NONE,
            },
            residual: false,
        }];
        let net = d.network().unwrap();
        let kinds: Vec<&str> = net.layers().iter().map(|l| l.kind()).collect();
        assert_eq!(kinds, ["embedding", "gru", "dropout"]);
        let (listed, table) = names(&net);
        assert_eq!(listed, table);
        let random: Vec<&str> = net
            .layers()
            .iter()
            .filter(|l| l.traits().random)
            .map(|l| l.kind())
            .collect();
        assert_eq!(random, ["gru"], "a dropout of 0 drops nothing");
        assert!(net.has_dropout());
        let widths = net.layers().iter().fold(vec![11], |mut w, l| {
            w.push(l.output_features(*w.last().unwrap()));
            w
        });
        assert_eq!(widths, [11, 4, 6, 6]);
    }

    #[test]
    fn a_bidirectional_stack_has_pytorchs_reverse_tensors_twice_the_width_and_no_carried_state() {
        let d = crate::ModelDescription::builder()
            .features(3)
            .gru(4, 2)
            .bidirectional()
            .dense(5, Activation::Tanh)
            .classify(2)
            .build()
            .unwrap();
        let net = d.network().unwrap();
        let table: Vec<String> = net
            .specs()
            .items()
            .iter()
            .map(|s| format!("{}{}", s.name, s.shape))
            .collect();
        assert_eq!(
            table[..16],
            [
                "gru.weight_ih_l0[12, 3]",
                "gru.weight_hh_l0[12, 4]",
                "gru.bias_ih_l0[12]",
                "gru.bias_hh_l0[12]",
                "gru.weight_ih_l0_reverse[12, 3]",
                "gru.weight_hh_l0_reverse[12, 4]",
                "gru.bias_ih_l0_reverse[12]",
                "gru.bias_hh_l0_reverse[12]",
                "gru.weight_ih_l1[12, 8]",
                "gru.weight_hh_l1[12, 4]",
                "gru.bias_ih_l1[12]",
                "gru.bias_hh_l1[12]",
                "gru.weight_ih_l1_reverse[12, 8]",
                "gru.weight_hh_l1_reverse[12, 4]",
                "gru.bias_ih_l1_reverse[12]",
                "gru.bias_hh_l1_reverse[12]",
            ]
        );
        assert_eq!(
            table[16], "head.0.weight[5, 8]",
            "the head reads both directions"
        );
        let stack = net.layers()[0];
        assert_eq!(stack.output_features(3), 8);
        assert!(stack.state_slots().is_empty());
        let traits = stack.traits();
        assert!(traits.mixes_steps && !traits.carries_state && !traits.splits_in_time);
        assert_eq!(net.reads_whole().map(|l| l.name()), Some("gru"));
        let e = net
            .check_splits_in_time("in chunks")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("layer `gru` (gru) reads each sequence whole"),
            "{e}"
        );
        // Twice the FLOPs of one direction, the second layer reading 8 features.
        let one_way = 2.0 * 3.0 * 4.0 * ((3.0 + 4.0) + (8.0 + 4.0));
        assert_eq!(d.body_forward_flops(1, 1), 2.0 * one_way);
        let mut uni = d.clone();
        uni.recurrent_mut().unwrap().bidirectional = false;
        assert!(uni.network().unwrap().reads_whole().is_none());
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
            residual: false,
        };
        d.head.layers = vec![
            dense("a", 40),
            crate::description::HeadLayer {
                name: "n".into(),
                kind: HeadLayerKind::BatchNorm,
                residual: false,
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
