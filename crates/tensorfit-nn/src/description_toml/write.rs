//! [`ModelDescription::to_toml`]: a description as the file that reads back to it.

use super::{default_head_name, CELLS, HEAD_ON};
use crate::description::{HeadLayerKind, InputSpec, LossSpec, ModelDescription};

impl ModelDescription {
    /// The description as a file that [`ModelDescription::from_toml`] reads back to it
    /// (head layers named `head.{i}` are written without their name).
    pub fn to_toml(&self) -> String {
        let mut s = String::from("[input]\n");
        match self.input {
            InputSpec::Dense { features } => {
                s += &format!("kind = \"dense\"\nfeatures = {features}\n");
            }
            InputSpec::Tokens { vocab, embedding } => {
                s += &format!("kind = \"tokens\"\nvocab = {vocab}\n");
                if let Some(dim) = embedding {
                    s += &format!("embedding = {dim}\n");
                }
            }
        }
        let r = &self.recurrent;
        s += &format!(
            "\n[recurrent]\ncell = \"{}\"\nhidden = {}\nlayers = {}\n",
            spelling(&CELLS, r.cell),
            r.hidden,
            r.layers
        );
        if r.dropout.is_active() {
            s += &format!("dropout = {}\n", r.dropout);
        }
        s += &format!("\n[head]\non = \"{}\"\n", spelling(&HEAD_ON, self.head.on));
        if !self.head.layers.is_empty() {
            s += "layers = [\n";
            for (i, layer) in self.head.layers.iter().enumerate() {
                s += &match layer.kind {
                    HeadLayerKind::BatchNorm => "  { kind = \"batchnorm\"".to_string(),
                    HeadLayerKind::Dense { units, activation } => format!(
                        "  {{ kind = \"dense\", units = {units}, activation = \"{}\"",
                        activation.name()
                    ),
                    HeadLayerKind::Dropout { p } => format!("  {{ kind = \"dropout\", p = {p}"),
                };
                if layer.name != default_head_name(i) {
                    s += &format!(", name = {}", toml_string(&layer.name));
                }
                s += " },\n";
            }
            s += "]\n";
        }
        s += &match self.loss {
            LossSpec::SoftmaxCrossEntropy { classes } => {
                format!("\n[loss]\nkind = \"cross_entropy\"\nclasses = {classes}\n")
            }
            LossSpec::MeanSquaredError { outputs } => {
                format!("\n[loss]\nkind = \"mse\"\noutputs = {outputs}\n")
            }
        };
        s
    }
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
