//! Building a [`ModelDescription`] in code, part by part, as a description file reads:
//! the input, the recurrent stack, the head's layers, the loss.
//!
//! ```
//! use tensorfit_core::Activation;
//! use tensorfit_nn::ModelDescription;
//!
//! // A 2-layer GRU regressor of 2 values from 3 features per step, with a dense layer
//! // between the stack and the output.
//! let model = ModelDescription::builder()
//!     .features(3)
//!     .gru(32, 2)
//!     .dense(16, Activation::Relu)
//!     .regress(2)
//!     .build()
//!     .unwrap();
//! assert_eq!(model.head.layers[0].name, "head.0");
//! ```
//!
//! What the builder leaves out takes the description file's default: no dropout, the head
//! on the last step, head layers named `head.{i}` (their index, as `nn.Sequential` names
//! them). `build` checks the whole description ([`ModelDescription::validate`]) and names
//! the field at fault, as the file's parser does.

use std::fmt;

use tensorfit_core::Activation;

use crate::description::{
    BodyLayer, Cell, Conv1dSpec, DropoutRate, EncoderSpec, HeadLayer, HeadLayerKind, HeadOn,
    HeadSpec, InputSpec, LossSpec, ModelDescription, PositionsSpec, RecurrentSpec, Reduce,
};
use crate::description_check::InvalidDescription;

/// A [`ModelDescription`] being built; start with [`ModelDescription::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build`"]
pub struct ModelBuilder {
    input: Option<InputSpec>,
    /// The body's layers as given (a recurrent stack's dropout and directions are the
    /// builder's `dropout` and `bidirectional`).
    pub(crate) body: Vec<GivenBody>,
    dropout: f32,
    bidirectional: bool,
    on: HeadOn,
    /// Each head layer as given: its name if given, the layer, whether it asks for a
    /// residual connection.
    layers: Vec<(Option<String>, Given, bool)>,
    /// Whether the layer added last is the body's (`residual` and `named` apply to it).
    pub(crate) last_in_body: bool,
    loss: Option<LossSpec>,
}

/// A body layer as given; a name left empty is `body.{i}` (`build` names it).
#[derive(Debug, Clone)]
pub(crate) enum GivenBody {
    Recurrent(Cell, usize, usize),
    Conv1d(Conv1dSpec),
    Positions(PositionsSpec),
    /// The encoder, and its dropout probability as given (checked by `build`).
    Encoder(EncoderSpec, f32),
}

/// A head layer as given, its dropout rate not yet checked.
#[derive(Debug, Clone, Copy)]
enum Given {
    BatchNorm,
    LayerNorm,
    Dense(usize, Activation),
    Dropout(f32),
}

/// Why [`ModelBuilder::build`] gave no description.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildError {
    /// A part every model needs was not given: `input` (`features`, `tokens`), `body`
    /// (`lstm`, `gru`, `conv1d`) or `loss` (`classify`, `regress`).
    Missing { part: &'static str },
    /// A dropout probability outside `0 <= p < 1`, with the field it was given for.
    Dropout { field: String, p: f32 },
    /// The description fails its checks.
    Invalid(InvalidDescription),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Missing { part } => write!(
                f,
                "the model has no `{part}`: {}",
                match *part {
                    "input" => "call `features(n)` or `tokens(vocab)`",
                    "body" => "call `lstm(hidden, layers)`, `gru(hidden, layers)` or `conv1d(..)`",
                    _ => "call `classify(classes)` or `regress(outputs)`",
                }
            ),
            BuildError::Dropout { field, p } => write!(
                f,
                "`{field}` = {p}: must be at least 0 and less than 1 (the probability of dropping an element)"
            ),
            BuildError::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

impl From<InvalidDescription> for BuildError {
    fn from(e: InvalidDescription) -> BuildError {
        BuildError::Invalid(e)
    }
}

impl From<BuildError> for tensorfit_core::Error {
    fn from(e: BuildError) -> tensorfit_core::Error {
        tensorfit_core::Error::input(format!("model description: {e}"))
    }
}

impl ModelDescription {
    /// A builder of a description: see [`ModelBuilder`].
    pub fn builder() -> ModelBuilder {
        ModelBuilder {
            input: None,
            body: Vec::new(),
            dropout: 0.0,
            bidirectional: false,
            on: HeadOn::LAST_STEP,
            layers: Vec::new(),
            last_in_body: false,
            loss: None,
        }
    }
}

impl ModelBuilder {
    /// `n` f32 values per step (`[input] kind = "dense"`).
    pub fn features(mut self, n: usize) -> Self {
        self.input = Some(InputSpec::Dense { features: n });
        self
    }

    /// One token id in `0..vocab` per step, one-hot into the first recurrent layer
    /// (`kind = "tokens"`, never materialised).
    pub fn tokens(mut self, vocab: usize) -> Self {
        self.input = Some(InputSpec::Tokens {
            vocab,
            embedding: None,
        });
        self
    }

    /// Token ids through `nn.Embedding(vocab, dim)` (`embedding = dim`).
    pub fn embedded_tokens(mut self, vocab: usize, dim: usize) -> Self {
        self.input = Some(InputSpec::Tokens {
            vocab,
            embedding: Some(dim),
        });
        self
    }

    /// `layers` stacked `nn.LSTM` layers of `hidden` units.
    pub fn lstm(mut self, hidden: usize, layers: usize) -> Self {
        self.last_in_body = true;
        self.body
            .push(GivenBody::Recurrent(Cell::Lstm, hidden, layers));
        self
    }

    /// `layers` stacked `nn.GRU` layers of `hidden` units.
    pub fn gru(mut self, hidden: usize, layers: usize) -> Self {
        self.last_in_body = true;
        self.body
            .push(GivenBody::Recurrent(Cell::Gru, hidden, layers));
        self
    }

    /// PyTorch's `dropout=` of the stack: on every recurrent layer's output but the
    /// last, in training only.
    pub fn recurrent_dropout(mut self, p: f32) -> Self {
        self.dropout = p;
        self
    }

    /// PyTorch's `bidirectional=True`: each recurrent layer also reads each sequence
    /// from its end back to its start, and gives both directions' outputs side by side
    /// (`2 · hidden` features per step). A head on the last step then reads each
    /// direction's own last step: the forward direction's at the sequence's end, the
    /// reverse direction's at its start (PyTorch's `torch.cat((h_n[-2], h_n[-1]), 1)`,
    /// Keras's `Bidirectional` without `return_sequences`).
    ///
    /// ```
    /// use tensorfit_nn::ModelDescription;
    ///
    /// // A tagger: a bidirectional LSTM of 16 per direction, a class per step.
    /// let model = ModelDescription::builder()
    ///     .features(8)
    ///     .lstm(16, 2)
    ///     .bidirectional()
    ///     .every_step()
    ///     .classify(5)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(model.body_features(), 32);
    /// let names: Vec<String> = model.param_specs().unwrap().into_iter().map(|p| p.name).collect();
    /// assert_eq!(&names[4..6], ["lstm.weight_ih_l0_reverse", "lstm.weight_hh_l0_reverse"]);
    /// ```
    pub fn bidirectional(mut self) -> Self {
        self.bidirectional = true;
        self
    }

    /// The head reads every step (tagging, language models) instead of the last.
    pub fn every_step(mut self) -> Self {
        self.on = HeadOn::EveryStep;
        self
    }

    /// The head reads the mean of each sequence's steps (Keras's
    /// `GlobalAveragePooling1D`; `on = "mean"`) instead of its last step; with lengths,
    /// over its own steps only.
    ///
    /// ```
    /// use tensorfit_nn::{HeadOn, ModelDescription, Reduce};
    ///
    /// // A sequence classifier reading the mean of a GRU's outputs over each sequence.
    /// let model = ModelDescription::builder()
    ///     .features(8)
    ///     .gru(32, 1)
    ///     .mean_pool()
    ///     .classify(3)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(model.head.on, HeadOn::Sequence(Reduce::Mean));
    /// assert!(model.to_toml().contains("on = \"mean\""));
    /// ```
    pub fn mean_pool(mut self) -> Self {
        self.on = HeadOn::Sequence(Reduce::Mean);
        self
    }

    /// The head reads the maximum of each feature over each sequence's steps (Keras's
    /// `GlobalMaxPooling1D`; `on = "max"`) instead of its last step.
    pub fn max_pool(mut self) -> Self {
        self.on = HeadOn::Sequence(Reduce::Max);
        self
    }

    /// `nn.Linear` to `units`, then `activation`.
    pub fn dense(self, units: usize, activation: Activation) -> Self {
        self.layer(Given::Dense(units, activation))
    }

    /// `nn.BatchNorm1d` over the features (eps 1e-5, momentum 0.1).
    pub fn batch_norm(self) -> Self {
        self.layer(Given::BatchNorm)
    }

    /// `nn.LayerNorm` over the features of each row (eps 1e-5).
    pub fn layer_norm(self) -> Self {
        self.layer(Given::LayerNorm)
    }

    /// `nn.Dropout(p)` in the head, in training only.
    pub fn dropout(self, p: f32) -> Self {
        self.layer(Given::Dropout(p))
    }

    /// Names the head layer, convolution, positions or encoder added last (its tensors
    /// are `name.weight`, ...), for a checkpoint whose names are fixed elsewhere; without
    /// it, `head.{i}` or `body.{i}` (a recurrent stack is always `lstm` or `gru`).
    pub fn named(mut self, name: &str) -> Self {
        match self.last_in_body {
            true => match self.body.last_mut() {
                Some(GivenBody::Conv1d(c)) => c.name = name.to_string(),
                Some(GivenBody::Positions(p)) => p.name = name.to_string(),
                Some(GivenBody::Encoder(e, _)) => e.name = name.to_string(),
                Some(GivenBody::Recurrent(..)) | None => {}
            },
            false => {
                if let Some(last) = self.layers.last_mut() {
                    last.0 = Some(name.to_string());
                }
            }
        }
        self
    }

    /// Softmax cross-entropy over `classes` (labels are class ids).
    pub fn classify(mut self, classes: usize) -> Self {
        self.loss = Some(LossSpec::SoftmaxCrossEntropy { classes });
        self
    }

    /// Mean squared error over `outputs` values (regression).
    pub fn regress(mut self, outputs: usize) -> Self {
        self.loss = Some(LossSpec::MeanSquaredError { outputs });
        self
    }

    /// Adds the input of the head layer added last to its output (`x + f(x)`); the
    /// layer must keep its input's width (`build` says so if not).
    ///
    /// ```
    /// use tensorfit_core::Activation;
    /// use tensorfit_nn::ModelDescription;
    ///
    /// // A tagger: LSTM 32, then x + relu(Linear(32, 32)(x)) and nn.LayerNorm(32) on
    /// // every step.
    /// let model = ModelDescription::builder()
    ///     .features(4)
    ///     .lstm(32, 1)
    ///     .every_step()
    ///     .dense(32, Activation::Relu)
    ///     .residual()
    ///     .layer_norm()
    ///     .classify(5)
    ///     .build()
    ///     .unwrap();
    /// assert!(model.head.layers[0].residual && !model.head.layers[1].residual);
    /// // A block that changes the width cannot add its input.
    /// let wider = ModelDescription::builder()
    ///     .features(4)
    ///     .lstm(32, 1)
    ///     .dense(64, Activation::Relu)
    ///     .residual()
    ///     .classify(5)
    ///     .build();
    /// assert!(wider.unwrap_err().to_string().contains("head.layers[0].residual"));
    /// ```
    pub fn residual(mut self) -> Self {
        match self.last_in_body {
            true => {
                if let Some(GivenBody::Conv1d(c)) = self.body.last_mut() {
                    c.residual = true;
                }
            }
            false => {
                if let Some(last) = self.layers.last_mut() {
                    last.2 = true;
                }
            }
        }
        self
    }

    fn layer(mut self, layer: Given) -> Self {
        self.last_in_body = false;
        self.layers.push((None, layer, false));
        self
    }

    /// The description, checked as a description file's is.
    pub fn build(self) -> Result<ModelDescription, BuildError> {
        let input = self.input.ok_or(BuildError::Missing { part: "input" })?;
        if self.body.is_empty() {
            return Err(BuildError::Missing { part: "body" });
        }
        let loss = self.loss.ok_or(BuildError::Missing { part: "loss" })?;
        let rate = |field: String, p: f32| {
            DropoutRate::new(p).map_err(|_| BuildError::Dropout { field, p })
        };
        let dropout = rate("recurrent.dropout".into(), self.dropout)?;
        let default_name = |name: &mut String, i: usize| {
            if name.is_empty() {
                *name = format!("body.{i}");
            }
        };
        let mut body = Vec::with_capacity(self.body.len());
        for (i, given) in self.body.into_iter().enumerate() {
            body.push(match given {
                GivenBody::Recurrent(cell, hidden, layers) => BodyLayer::Recurrent(RecurrentSpec {
                    cell,
                    hidden,
                    layers,
                    dropout,
                    bidirectional: self.bidirectional,
                }),
                GivenBody::Conv1d(mut c) => {
                    default_name(&mut c.name, i);
                    BodyLayer::Conv1d(c)
                }
                GivenBody::Positions(mut p) => {
                    default_name(&mut p.name, i);
                    BodyLayer::Positions(p)
                }
                GivenBody::Encoder(mut e, p) => {
                    default_name(&mut e.name, i);
                    e.dropout = rate(format!("body[{i}].dropout"), p)?;
                    BodyLayer::Encoder(e)
                }
            });
        }
        let mut head = Vec::with_capacity(self.layers.len());
        for (i, (name, layer, residual)) in self.layers.into_iter().enumerate() {
            let kind = match layer {
                Given::BatchNorm => HeadLayerKind::BatchNorm,
                Given::LayerNorm => HeadLayerKind::LayerNorm,
                Given::Dense(units, activation) => HeadLayerKind::Dense { units, activation },
                Given::Dropout(p) => HeadLayerKind::Dropout {
                    p: rate(format!("head.layers[{i}].p"), p)?,
                },
            };
            let name = name.unwrap_or_else(|| format!("head.{i}"));
            head.push(HeadLayer {
                name,
                kind,
                residual,
            });
        }
        let description = ModelDescription {
            input,
            body,
            head: HeadSpec {
                on: self.on,
                layers: head,
            },
            loss,
        };
        description.validate()?;
        Ok(description)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;

    use super::*;

    fn from_toml(text: &str) -> ModelDescription {
        ModelDescription::from_toml(text, Path::new("model.toml")).unwrap()
    }

    #[test]
    fn the_seed_network_built_is_the_seed_preset() {
        let built = ModelDescription::builder()
            .features(152)
            .lstm(250, 3)
            .batch_norm()
            .named("bn1")
            .dense(100, Activation::Tanh)
            .named("dense")
            .batch_norm()
            .named("bn2")
            .classify(6)
            .build()
            .unwrap();
        assert_eq!(built, ModelDescription::seed());
    }

    #[test]
    fn a_built_model_is_the_one_its_description_file_gives() {
        let built = ModelDescription::builder()
            .embedded_tokens(77, 16)
            .gru(64, 2)
            .recurrent_dropout(0.25)
            .every_step()
            .dense(32, Activation::Relu)
            .dropout(0.5)
            .regress(3)
            .build()
            .unwrap();
        let file = from_toml(
            r#"
            [input]
            kind = "tokens"
            vocab = 77
            embedding = 16
            [recurrent]
            cell = "gru"
            hidden = 64
            layers = 2
            dropout = 0.25
            [head]
            on = "every_step"
            layers = [
              { kind = "dense", units = 32, activation = "relu" },
              { kind = "dropout", p = 0.5 },
            ]
            [loss]
            kind = "mse"
            outputs = 3
            "#,
        );
        assert_eq!(built, file);
        let lstm = ModelDescription::builder()
            .features(10)
            .lstm(8, 2)
            .classify(4);
        assert_eq!(
            lstm.build().unwrap(),
            ModelDescription::lstm_classifier(10, 8, 2, 4)
        );
    }

    #[test]
    fn what_is_missing_or_wrong_is_named() {
        let b = ModelDescription::builder;
        let missing = |e: BuildError| match e {
            BuildError::Missing { part } => part,
            other => panic!("{other}"),
        };
        assert_eq!(
            missing(b().lstm(8, 1).classify(2).build().unwrap_err()),
            "input"
        );
        assert_eq!(
            missing(b().features(3).classify(2).build().unwrap_err()),
            "body"
        );
        assert_eq!(
            missing(b().features(3).gru(8, 1).build().unwrap_err()),
            "loss"
        );
        let e = b()
            .features(3)
            .gru(8, 2)
            .dense(4, Activation::Tanh)
            .dropout(1.0)
            .classify(2)
            .build()
            .unwrap_err();
        assert_eq!(
            e,
            BuildError::Dropout {
                field: "head.layers[1].p".into(),
                p: 1.0
            }
        );
        let e = b().features(3).gru(0, 2).classify(2).build().unwrap_err();
        assert!(
            matches!(&e, BuildError::Invalid(i) if i.field() == Some("recurrent.hidden")),
            "{e}"
        );
        let e = b().features(3).lstm(8, 1).recurrent_dropout(0.2).regress(1);
        assert!(e
            .build()
            .unwrap_err()
            .to_string()
            .contains("recurrent.dropout"));
        let e = b()
            .features(3)
            .lstm(8, 1)
            .batch_norm()
            .named("out")
            .classify(2)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("head.layers[0].name"), "{e}");
    }
}
