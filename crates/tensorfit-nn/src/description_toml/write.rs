//! [`ModelDescription::to_toml`]: a description as the file that reads back to it.

use super::{default_body_name, default_head_name, CELLS};
use crate::description::{
    BodyLayer, Conv1dSpec, EncoderSpec, HeadLayer, HeadLayerKind, HeadOn, InputSpec, LossSpec,
    ModelDescription, PositionEncoding, PositionsSpec, RecurrentSpec,
};

impl ModelDescription {
    /// The description as a file that [`ModelDescription::from_toml`] reads back to it,
    /// in `[recurrent]` and `[head]` tables (head layers named `head.{i}` are written
    /// without their name), or as the `[[layers]]` list when its body is more than one
    /// recurrent stack, which the tables cannot say.
    pub fn to_toml(&self) -> String {
        let [BodyLayer::Recurrent(r)] = self.body.as_slice() else {
            return self.to_toml_as_list();
        };
        let mut s = self.input_table(true);
        s += "\n[recurrent]\n";
        let mut keys = recurrent_keys(r);
        keys[0] = format!("cell = \"{}\"", spelling(&CELLS, r.cell));
        for key in keys {
            s += &key;
            s += "\n";
        }
        s += &format!("\n[head]\non = \"{}\"\n", self.head.on.spelling());
        if !self.head.layers.is_empty() {
            s += "layers = [\n";
            for (i, layer) in self.head.layers.iter().enumerate() {
                s += &format!("  {{ {} }},\n", head_layer_keys(i, layer).join(", "));
            }
            s += "]\n";
        }
        s + &self.loss_table()
    }

    /// The same file with its layers as one ordered `[[layers]]` list (the embedding if
    /// any, the body's layers, the reduction of each sequence, the head's layers).
    pub fn to_toml_as_list(&self) -> String {
        let mut s = self.input_table(false);
        let layer = |keys: &[String]| format!("\n[[layers]]\n{}\n", keys.join("\n"));
        if let InputSpec::Tokens {
            embedding: Some(dim),
            ..
        } = self.input
        {
            s += &layer(&["kind = \"embedding\"".into(), format!("dim = {dim}")]);
        }
        for (i, body_layer) in self.body.iter().enumerate() {
            let keys = match body_layer {
                BodyLayer::Recurrent(r) => recurrent_keys(r),
                BodyLayer::Conv1d(c) => conv1d_keys(c, i),
                BodyLayer::Positions(p) => positions_keys(p, i),
                BodyLayer::Encoder(e) => encoder_keys(e, i),
            };
            s += &layer(&keys);
        }
        if let HeadOn::Sequence(reduce) = self.head.on {
            let kind = super::layer_list::reduce_kind(reduce);
            s += &layer(&[format!("kind = \"{kind}\"")]);
        }
        for (i, l) in self.head.layers.iter().enumerate() {
            s += &layer(&head_layer_keys(i, l));
        }
        s + &self.loss_table()
    }

    /// `[input]`; with `embedding`, the token embedding's size in it.
    fn input_table(&self, embedding: bool) -> String {
        let mut s = String::from("[input]\n");
        match self.input {
            InputSpec::Dense { features } => {
                s += &format!("kind = \"dense\"\nfeatures = {features}\n");
            }
            InputSpec::Tokens {
                vocab,
                embedding: dim,
            } => {
                s += &format!("kind = \"tokens\"\nvocab = {vocab}\n");
                if let Some(dim) = dim.filter(|_| embedding) {
                    s += &format!("embedding = {dim}\n");
                }
            }
        }
        s
    }

    fn loss_table(&self) -> String {
        match self.loss {
            LossSpec::SoftmaxCrossEntropy { classes } => {
                format!("\n[loss]\nkind = \"cross_entropy\"\nclasses = {classes}\n")
            }
            LossSpec::MeanSquaredError { outputs } => {
                format!("\n[loss]\nkind = \"mse\"\noutputs = {outputs}\n")
            }
        }
    }
}

/// Head layer `i`'s keys, `kind = ...` first; its name only when not the default.
fn head_layer_keys(i: usize, layer: &HeadLayer) -> Vec<String> {
    let mut keys = match layer.kind {
        HeadLayerKind::BatchNorm => vec!["kind = \"batchnorm\"".to_string()],
        HeadLayerKind::LayerNorm => vec!["kind = \"layernorm\"".to_string()],
        HeadLayerKind::Dense { units, activation } => vec![
            "kind = \"dense\"".into(),
            format!("units = {units}"),
            format!("activation = \"{}\"", activation.name()),
        ],
        HeadLayerKind::Dropout { p } => vec!["kind = \"dropout\"".into(), format!("p = {p}")],
    };
    if layer.name != default_head_name(i) {
        keys.push(format!("name = {}", toml_string(&layer.name)));
    }
    if layer.residual {
        keys.push("residual = true".into());
    }
    keys
}

/// How `value` is spelt in a file (every value is in its table).
fn spelling<T: PartialEq>(choices: &[(&'static str, T)], value: T) -> &'static str {
    choices
        .iter()
        .find(|(_, c)| *c == value)
        .map_or("", |(name, _)| name)
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if c.is_control() => out += &format!("\\u{:04X}", c as u32),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A recurrent stack's keys as a `[[layers]]` entry writes them (`kind` first; the
/// `[recurrent]` table spells it `cell`).
fn recurrent_keys(r: &RecurrentSpec) -> Vec<String> {
    let mut keys = vec![
        format!("kind = \"{}\"", spelling(&CELLS, r.cell)),
        format!("hidden = {}", r.hidden),
        format!("layers = {}", r.layers),
    ];
    if r.dropout.is_active() {
        keys.push(format!("dropout = {}", r.dropout));
    }
    if r.bidirectional {
        keys.push("bidirectional = true".into());
    }
    keys
}

/// A convolution's keys as a `[[layers]]` entry writes them, `i` its place in the body
/// (a default name and defaults left out).
fn conv1d_keys(c: &Conv1dSpec, i: usize) -> Vec<String> {
    let mut keys = vec![
        "kind = \"conv1d\"".to_string(),
        format!("channels = {}", c.channels),
        format!("kernel = {}", c.kernel),
        format!("padding = \"{}\"", c.padding.spelling()),
    ];
    if c.dilation != 1 {
        keys.push(format!("dilation = {}", c.dilation));
    }
    if c.activation != tensorfit_core::Activation::Identity {
        keys.push(format!("activation = \"{}\"", c.activation.name()));
    }
    if c.name != default_body_name(i) {
        keys.push(format!("name = {}", toml_string(&c.name)));
    }
    if c.residual {
        keys.push("residual = true".into());
    }
    keys
}

/// A positional encoding's keys as a `[[layers]]` entry writes them.
fn positions_keys(p: &PositionsSpec, i: usize) -> Vec<String> {
    let mut keys = vec!["kind = \"positions\"".to_string()];
    match p.encoding {
        PositionEncoding::Sinusoidal => keys.push("encoding = \"sinusoidal\"".into()),
        PositionEncoding::Learned { max_len } => {
            keys.push("encoding = \"learned\"".into());
            keys.push(format!("max_len = {max_len}"));
        }
    }
    if p.name != default_body_name(i) {
        keys.push(format!("name = {}", toml_string(&p.name)));
    }
    keys
}

/// A Transformer encoder's keys as a `[[layers]]` entry writes them (PyTorch's defaults
/// left out).
fn encoder_keys(e: &EncoderSpec, i: usize) -> Vec<String> {
    let default = EncoderSpec::new(&e.name, e.layers, e.heads);
    let mut keys = vec![
        "kind = \"transformer_encoder\"".to_string(),
        format!("layers = {}", e.layers),
        format!("heads = {}", e.heads),
    ];
    if e.feedforward != default.feedforward {
        keys.push(format!("feedforward = {}", e.feedforward));
    }
    if e.dropout != default.dropout {
        keys.push(format!("dropout = {}", e.dropout));
    }
    if e.activation != default.activation {
        keys.push(format!("activation = \"{}\"", e.activation.name()));
    }
    if e.norm_first {
        keys.push("norm_first = true".into());
    }
    if e.causal {
        keys.push("causal = true".into());
    }
    if e.final_norm {
        keys.push("final_norm = true".into());
    }
    if e.name != default_body_name(i) {
        keys.push(format!("name = {}", toml_string(&e.name)));
    }
    keys
}
