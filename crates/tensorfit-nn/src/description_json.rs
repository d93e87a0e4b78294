//! A [`ModelDescription`] as JSON, the form a checkpoint keeps it in: the same tables and
//! keys as the description file (`input`, `recurrent`, `head`, `loss`).

use serde_json::{json, Map, Value};
use tensorfit_core::{Activation, Error, Result};

use crate::description::{
    BodyLayer, Cell, Conv1dSpec, ConvPadding, DropoutRate, EncoderSpec, HeadLayer, HeadLayerKind,
    HeadOn, HeadSpec, InputSpec, LossSpec, ModelDescription, PositionEncoding, PositionsSpec,
    RecurrentSpec,
};
use crate::seed_shape::SeedShape;

impl Cell {
    /// The cell as the description file and its JSON spell it.
    pub fn name(self) -> &'static str {
        match self {
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }
}

/// The activation called `name`, or an error naming `field` and the choices.
pub fn activation_named(field: &str, name: &str) -> Result<Activation> {
    Activation::ALL
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = Activation::ALL.iter().map(|a| a.name()).collect();
            Error::input(format!(
                "`{field}` = \"{name}\": expected one of {}",
                names.join(", ")
            ))
        })
}

/// The description as JSON text.
pub fn to_json(d: &ModelDescription) -> String {
    let input = match d.input {
        InputSpec::Dense { features } => json!({"kind": "dense", "features": features}),
        InputSpec::Tokens { vocab, embedding } => {
            json!({"kind": "tokens", "vocab": vocab, "embedding": embedding})
        }
    };
    let on = d.head.on.spelling();
    let layers: Vec<Value> = d
        .head
        .layers
        .iter()
        .map(|l| {
            let mut v = match l.kind {
                HeadLayerKind::BatchNorm => json!({"kind": "batchnorm", "name": l.name}),
                HeadLayerKind::LayerNorm => json!({"kind": "layernorm", "name": l.name}),
                HeadLayerKind::Dense { units, activation } => json!({
                    "kind": "dense", "units": units, "activation": activation.name(), "name": l.name,
                }),
                HeadLayerKind::Dropout { p } => {
                    json!({"kind": "dropout", "p": p.p(), "name": l.name})
                }
            };
            // Written only when set: a checkpoint without it reads as it did.
            if l.residual {
                v["residual"] = json!(true);
            }
            v
        })
        .collect();
    let loss = match d.loss {
        LossSpec::SoftmaxCrossEntropy { classes } => {
            json!({"kind": "cross_entropy", "classes": classes})
        }
        LossSpec::MeanSquaredError { outputs } => json!({"kind": "mse", "outputs": outputs}),
    };
    let mut body: Vec<Value> = d.body.iter().map(body_layer_json).collect();
    let mut model = json!({
        "input": input,
        "head": {"on": on, "layers": layers},
        "loss": loss,
    });
    // A body of one recurrent stack is written as `recurrent`, as before there was a
    // body, so such a checkpoint reads in every version.
    match (body.as_mut_slice(), d.body.as_slice()) {
        ([recurrent], [BodyLayer::Recurrent(_)]) => {
            if let Some(table) = recurrent.as_object_mut() {
                table.remove("kind");
            }
            model["recurrent"] = recurrent.take();
        }
        _ => model["body"] = json!(body),
    }
    model.to_string()
}

/// One body layer as a JSON table (`kind` names it in a `body` list; a `recurrent`
/// table is read without it).
fn body_layer_json(layer: &BodyLayer) -> Value {
    match layer {
        BodyLayer::Recurrent(r) => {
            let mut v = json!({"kind": "recurrent", "cell": r.cell.name(), "hidden": r.hidden, "layers": r.layers});
            // Written only when set, so checkpoints of models without it read as before.
            if r.dropout.is_active() {
                v["dropout"] = json!(r.dropout.p());
            }
            if r.bidirectional {
                v["bidirectional"] = json!(true);
            }
            v
        }
        BodyLayer::Conv1d(c) => json!({
            "kind": "conv1d", "name": c.name, "channels": c.channels, "kernel": c.kernel,
            "dilation": c.dilation, "padding": c.padding.spelling(),
            "activation": c.activation.name(), "residual": c.residual,
        }),
        BodyLayer::Positions(p) => match p.encoding {
            PositionEncoding::Sinusoidal => {
                json!({"kind": "positions", "name": p.name, "encoding": "sinusoidal"})
            }
            PositionEncoding::Learned { max_len } => json!({
                "kind": "positions", "name": p.name, "encoding": "learned", "max_len": max_len,
            }),
        },
        BodyLayer::Encoder(e) => json!({
            "kind": "transformer_encoder", "name": e.name, "layers": e.layers,
            "heads": e.heads, "feedforward": e.feedforward, "dropout": e.dropout.p(),
            "activation": e.activation.name(), "norm_first": e.norm_first, "causal": e.causal,
            "final_norm": e.final_norm,
        }),
    }
}

/// A JSON table and the path of keys that leads to it, for messages.
struct Table<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Table<'a> {
    fn of(path: String, v: &'a Value) -> Result<Table<'a>> {
        let map = v
            .as_object()
            .ok_or_else(|| Error::input(format!("`{path}` must be a table")))?;
        Ok(Table { path, map })
    }

    fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    fn get(&self, key: &str) -> Result<&'a Value> {
        self.map
            .get(key)
            .ok_or_else(|| Error::input(format!("`{}` is missing", self.field(key))))
    }

    fn table(&self, key: &str) -> Result<Table<'a>> {
        Table::of(self.field(key), self.get(key)?)
    }

    fn size(&self, key: &str) -> Result<usize> {
        self.get(key)?
            .as_u64()
            .and_then(|x| usize::try_from(x).ok())
            .ok_or_else(|| Error::input(format!("`{}` must be a whole number", self.field(key))))
    }

    /// A dropout probability; 0 when `key` is absent.
    fn dropout(&self, key: &str) -> Result<DropoutRate> {
        let Some(v) = self.map.get(key) else {
            return Ok(DropoutRate::NONE);
        };
        let p = v.as_f64().unwrap_or(f64::NAN);
        DropoutRate::from_f64(p).map_err(|why| Error::input(format!("`{}` {why}", self.field(key))))
    }

    /// True or false; false when `key` is absent.
    fn flag(&self, key: &str) -> Result<bool> {
        match self.map.get(key) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| {
                Error::input(format!("`{}` must be true or false", self.field(key)))
            }),
        }
    }

    fn text(&self, key: &str) -> Result<&'a str> {
        self.get(key)?
            .as_str()
            .ok_or_else(|| Error::input(format!("`{}` must be a string", self.field(key))))
    }

    fn unknown(&self, key: &str, value: &str, expected: &str) -> Error {
        Error::input(format!(
            "`{}` = \"{value}\": expected {expected}",
            self.field(key)
        ))
    }
}

/// Parses and validates a description written by [`to_json`]; errors name the key
/// (`model.head.layers[1].units`).
pub fn from_json(text: &str) -> Result<ModelDescription> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| Error::input(format!("model description: {e}")))?;
    let top = Table::of("model".into(), &v)?;
    let t = top.table("input")?;
    let input = match t.text("kind")? {
        "dense" => InputSpec::Dense {
            features: t.size("features")?,
        },
        "tokens" => InputSpec::Tokens {
            vocab: t.size("vocab")?,
            embedding: match t.get("embedding")? {
                Value::Null => None,
                _ => Some(t.size("embedding")?),
            },
        },
        other => return Err(t.unknown("kind", other, "\"dense\" or \"tokens\"")),
    };
    let body = match top.map.get("body") {
        None => vec![recurrent_from_json(&top.table("recurrent")?)?],
        Some(list) => {
            let list = list
                .as_array()
                .ok_or_else(|| Error::input("`model.body` must be a list".to_string()))?;
            let mut body = Vec::with_capacity(list.len());
            for (i, v) in list.iter().enumerate() {
                let t = Table::of(format!("model.body[{i}]"), v)?;
                let layer =
                    match t.text("kind")? {
                        "recurrent" => recurrent_from_json(&t)?,
                        "conv1d" => conv1d_from_json(&t)?,
                        "positions" => positions_from_json(&t)?,
                        "transformer_encoder" => BodyLayer::Encoder(EncoderSpec {
                            name: t.text("name")?.to_string(),
                            layers: t.size("layers")?,
                            heads: t.size("heads")?,
                            feedforward: t.size("feedforward")?,
                            dropout: t.dropout("dropout")?,
                            activation: activation_named(
                                &t.field("activation"),
                                t.text("activation")?,
                            )?,
                            norm_first: t.flag("norm_first")?,
                            causal: t.flag("causal")?,
                            final_norm: t.flag("final_norm")?,
                        }),
                        other => return Err(t.unknown(
                            "kind",
                            other,
                            "\"recurrent\", \"conv1d\", \"positions\" or \"transformer_encoder\"",
                        )),
                    };
                body.push(layer);
            }
            body
        }
    };
    let t = top.table("head")?;
    let on = t.text("on")?;
    let on = HeadOn::SPELLINGS
        .iter()
        .find(|(name, _)| *name == on)
        .map(|&(_, head_on)| head_on)
        .ok_or_else(|| t.unknown("on", on, "\"last\", \"mean\", \"max\" or \"every_step\""))?;
    let list = t
        .get("layers")?
        .as_array()
        .ok_or_else(|| Error::input(format!("`{}` must be a list", t.field("layers"))))?;
    let mut layers = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let l = Table::of(format!("{}[{i}]", t.field("layers")), item)?;
        let kind = match l.text("kind")? {
            "batchnorm" => HeadLayerKind::BatchNorm,
            "layernorm" => HeadLayerKind::LayerNorm,
            "dense" => HeadLayerKind::Dense {
                units: l.size("units")?,
                activation: activation_named(&l.field("activation"), l.text("activation")?)?,
            },
            "dropout" => HeadLayerKind::Dropout { p: l.dropout("p")? },
            other => {
                let expected = "\"batchnorm\", \"layernorm\", \"dense\" or \"dropout\"";
                return Err(l.unknown("kind", other, expected));
            }
        };
        let name = l.text("name")?.to_string();
        let residual = l.flag("residual")?;
        layers.push(HeadLayer {
            name,
            kind,
            residual,
        });
    }
    let t = top.table("loss")?;
    let loss = match t.text("kind")? {
        "cross_entropy" => LossSpec::SoftmaxCrossEntropy {
            classes: t.size("classes")?,
        },
        "mse" => LossSpec::MeanSquaredError {
            outputs: t.size("outputs")?,
        },
        other => return Err(t.unknown("kind", other, "\"cross_entropy\" or \"mse\"")),
    };
    let d = ModelDescription {
        input,
        body,
        head: HeadSpec { on, layers },
        loss,
    };
    d.validate()?;
    Ok(d)
}

/// A recurrent stack's table (`cell`, `hidden`, `layers`, `dropout`, `bidirectional`).
fn recurrent_from_json(t: &Table) -> Result<BodyLayer> {
    let cell = t.text("cell")?;
    let cell = [Cell::Lstm, Cell::Gru]
        .into_iter()
        .find(|c| c.name() == cell)
        .ok_or_else(|| t.unknown("cell", cell, "\"lstm\" or \"gru\""))?;
    Ok(BodyLayer::Recurrent(RecurrentSpec {
        cell,
        hidden: t.size("hidden")?,
        layers: t.size("layers")?,
        dropout: t.dropout("dropout")?,
        bidirectional: t.flag("bidirectional")?,
    }))
}

/// A convolution's table, as [`to_json`] writes it.
fn conv1d_from_json(t: &Table) -> Result<BodyLayer> {
    let padding = t.text("padding")?;
    let padding = ConvPadding::SPELLINGS
        .iter()
        .find(|(name, _)| *name == padding)
        .map(|&(_, p)| p)
        .ok_or_else(|| t.unknown("padding", padding, "\"causal\" or \"same\""))?;
    Ok(BodyLayer::Conv1d(Conv1dSpec {
        name: t.text("name")?.to_string(),
        channels: t.size("channels")?,
        kernel: t.size("kernel")?,
        dilation: t.size("dilation")?,
        padding,
        activation: activation_named(&t.field("activation"), t.text("activation")?)?,
        residual: t.flag("residual")?,
    }))
}

/// A positional encoding's table, as [`to_json`] writes it.
fn positions_from_json(t: &Table) -> Result<BodyLayer> {
    let encoding = match t.text("encoding")? {
        "sinusoidal" => PositionEncoding::Sinusoidal,
        "learned" => PositionEncoding::Learned {
            max_len: t.size("max_len")?,
        },
        other => return Err(t.unknown("encoding", other, "\"sinusoidal\" or \"learned\"")),
    };
    Ok(BodyLayer::Positions(PositionsSpec {
        name: t.text("name")?.to_string(),
        encoding,
    }))
}

/// The description of a format-1 checkpoint's `config`: the seed-shaped classifier's
/// sizes (`input`, `hidden`, `layers`, `dense`, `classes`, `dense_activation`).
pub fn from_v1_json(text: &str) -> Result<ModelDescription> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Error::input(format!("model configuration: {e}")))?;
    let t = Table::of("config".into(), &v)?;
    let d = SeedShape {
        features: t.size("input")?,
        hidden: t.size("hidden")?,
        layers: t.size("layers")?,
        dense: t.size("dense")?,
        classes: t.size("classes")?,
        activation: activation_named(&t.field("dense_activation"), t.text("dense_activation")?)?,
    }
    .description();
    d.validate()?;
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_survives_json_unchanged() {
        let mut d = SeedShape {
            activation: Activation::Relu,
            ..SeedShape::SEED
        }
        .description();
        assert_eq!(from_json(&to_json(&d)).unwrap(), d);
        d.head.layers.remove(1);
        assert_eq!(from_json(&to_json(&d)).unwrap(), d);
    }

    #[test]
    fn bad_json_is_refused_naming_the_key() {
        let good = to_json(&ModelDescription::seed());
        for (from, to, key) in [
            (
                "\"units\":100",
                "\"units\":-1",
                "model.head.layers[1].units",
            ),
            ("\"tanh\"", "\"swish\"", "model.head.layers[1].activation"),
            ("\"hidden\":250", "\"hidden\":0", "recurrent.hidden"),
            (
                "\"cell\":\"lstm\"",
                "\"cell\":\"rnn\"",
                "model.recurrent.cell",
            ),
            ("\"classes\":6", "\"classes\":1", "loss.classes"),
        ] {
            assert!(good.contains(from), "{from} in {good}");
            let e = from_json(&good.replace(from, to)).unwrap_err().to_string();
            assert!(e.contains(key), "{from} -> {to}: {e}");
        }
        assert!(from_json("{").is_err());
        assert!(from_json("[]").is_err());
    }
}
