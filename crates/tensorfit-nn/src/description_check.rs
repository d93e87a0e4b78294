//! The checks a [`ModelDescription`] must pass before a network is built from it.
//!
//! Each error names the field as the description file spells it (`recurrent.hidden`,
//! `head.layers[2].units`, `loss.classes`), so a file parser can add the line it came from
//! ([`InvalidDescription::field`]).

use tensorfit_core::{Activation, Error};

use crate::description::{
    BodyLayer, Cell, DropoutRate, HeadLayerKind, InputSpec, LossSpec, ModelDescription,
    PositionEncoding, RecurrentSpec,
};

/// Largest size accepted for any one dimension: far beyond any real model, small enough
/// that products of a few of them cannot overflow.
pub const MAX_DIM: usize = 1 << 24;
/// Most steps a convolution's kernel reads.
pub const MAX_KERNEL: usize = 4096;
/// Most stacked recurrent layers accepted.
pub const MAX_LAYERS: usize = 1024;
/// Most parameters accepted (2^36: 256 GiB of f32, beyond any device).
pub const MAX_PARAMETERS: u128 = 1 << 36;

/// Why a description cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidDescription {
    /// A size outside `min..=max`.
    Size {
        field: String,
        value: usize,
        min: usize,
        max: usize,
    },
    /// The whole model is larger than any device.
    TooManyParameters { parameters: u128 },
    /// A head layer's name used twice: two layers would share tensor names.
    DuplicateName { field: String, name: String },
    /// Dropout between recurrent layers of a one-layer stack, which has none between
    /// (PyTorch warns and drops nothing; a description file says what it means).
    DropoutWithOneLayer { field: String, p: DropoutRate },
    /// A layer that asks for a residual connection changes its width: its input cannot
    /// be added to its output.
    ResidualWidth {
        field: String,
        input: usize,
        output: usize,
    },
    /// The body's layers cannot be built in this order (`reason` says why).
    Body { field: String, reason: String },
}

impl std::fmt::Display for InvalidDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidDescription::Size {
                field,
                value,
                min,
                max,
            } => write!(f, "`{field}` = {value}: must be between {min} and {max}"),
            InvalidDescription::TooManyParameters { parameters } => write!(
                f,
                "the model would have {parameters} parameters; at most {MAX_PARAMETERS} are supported"
            ),
            InvalidDescription::DuplicateName { field, name } => write!(
                f,
                "`{field}`: the name `{name}` is taken by another layer (its tensors would share names)"
            ),
            InvalidDescription::DropoutWithOneLayer { field, p } => write!(
                f,
                "`{field}` = {p}: dropout acts between recurrent layers and `recurrent.layers` = 1 has none (PyTorch warns and ignores it); remove it, or stack at least 2 layers"
            ),
            InvalidDescription::ResidualWidth {
                field,
                input,
                output,
            } => write!(
                f,
                "`{field}` = true: the layer takes {input} features and gives {output}, so its input cannot be added to its output; give it {input} units or drop `residual`"
            ),
            InvalidDescription::Body { field, reason } => write!(f, "`{field}`: {reason}"),
        }
    }
}

impl std::error::Error for InvalidDescription {}

impl InvalidDescription {
    /// The field the error is about, as the description file spells it (`None` for the
    /// parameter count, which is the whole model's).
    pub fn field(&self) -> Option<&str> {
        match self {
            InvalidDescription::Size { field, .. }
            | InvalidDescription::DuplicateName { field, .. }
            | InvalidDescription::DropoutWithOneLayer { field, .. }
            | InvalidDescription::ResidualWidth { field, .. }
            | InvalidDescription::Body { field, .. } => Some(field),
            InvalidDescription::TooManyParameters { .. } => None,
        }
    }
}

impl From<InvalidDescription> for Error {
    fn from(e: InvalidDescription) -> Error {
        Error::input(format!("model description: {e}"))
    }
}

fn size(field: &str, value: usize, min: usize, max: usize) -> Result<(), InvalidDescription> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    Err(InvalidDescription::Size {
        field: field.to_string(),
        value,
        min,
        max,
    })
}

impl ModelDescription {
    /// Checks every size, the head's names and the loss, then the parameter count; the
    /// error names the field.
    pub fn validate(&self) -> Result<(), InvalidDescription> {
        match self.input {
            InputSpec::Dense { features } => size("input.features", features, 1, MAX_DIM)?,
            InputSpec::Tokens { vocab, embedding } => {
                size("input.vocab", vocab, 1, MAX_DIM)?;
                if let Some(dim) = embedding {
                    size("input.embedding", dim, 1, MAX_DIM)?;
                }
            }
        }
        let mut names = self.validate_body()?;
        let mut width = self.body_features();
        for (i, layer) in self.head.layers.iter().enumerate() {
            let output = match layer.kind {
                HeadLayerKind::BatchNorm
                | HeadLayerKind::LayerNorm
                | HeadLayerKind::Dropout { .. } => width,
                HeadLayerKind::Dense { units, .. } => {
                    size(&format!("head.layers[{i}].units"), units, 1, MAX_DIM)?;
                    units
                }
            };
            if layer.residual && output != width {
                return Err(InvalidDescription::ResidualWidth {
                    field: format!("head.layers[{i}].residual"),
                    input: width,
                    output,
                });
            }
            width = output;
            if names.contains(&layer.name.as_str()) {
                return Err(InvalidDescription::DuplicateName {
                    field: format!("head.layers[{i}].name"),
                    name: layer.name.clone(),
                });
            }
            names.push(&layer.name);
        }
        match self.loss {
            // One class would make every loss zero: nothing to learn.
            LossSpec::SoftmaxCrossEntropy { classes } => size("loss.classes", classes, 2, MAX_DIM)?,
            LossSpec::MeanSquaredError { outputs } => size("loss.outputs", outputs, 1, MAX_DIM)?,
        }
        let parameters = self.parameter_bound();
        if parameters > MAX_PARAMETERS {
            return Err(InvalidDescription::TooManyParameters { parameters });
        }
        Ok(())
    }

    /// The body's layers: at least one, at most one recurrent stack, token ids without an
    /// embedding read by a recurrent stack first, each layer's sizes and names; the names
    /// its layers register their tensors under.
    fn validate_body(&self) -> Result<Vec<&str>, InvalidDescription> {
        let body = |reason: &str| InvalidDescription::Body {
            field: "body".into(),
            reason: reason.into(),
        };
        let Some(first) = self.body.first() else {
            return Err(body(
                "the model has no layer over the steps (give an \"lstm\" or \"gru\")",
            ));
        };
        let tokens_one_hot = matches!(
            self.input,
            InputSpec::Tokens {
                embedding: None,
                ..
            }
        );
        if tokens_one_hot && !matches!(first, BodyLayer::Recurrent(_)) {
            return Err(body("token ids without an embedding are read only by an \"lstm\" or \"gru\" first: give an \"embedding\" layer before it"));
        }
        // `out` and an embedding register `out.weight`, `embedding.weight`: no other layer
        // may take their names.
        let mut names = vec![crate::network::OUTPUT];
        if let InputSpec::Tokens {
            embedding: Some(_), ..
        } = self.input
        {
            names.push("embedding");
        }
        let mut width = self.body_input_features();
        for (i, layer) in self.body.iter().enumerate() {
            match layer {
                BodyLayer::Recurrent(r) => {
                    if self.body[..i].iter().any(|l| l.recurrent().is_some()) {
                        return Err(body("this version builds at most one \"lstm\" or \"gru\" layer (give its `layers` to stack more)"));
                    }
                    validate_recurrent(r)?;
                }
                BodyLayer::Conv1d(c) => {
                    let field = |key: &str| format!("body[{i}].{key}");
                    size(&field("channels"), c.channels, 1, MAX_DIM)?;
                    size(&field("kernel"), c.kernel, 1, MAX_KERNEL)?;
                    size(&field("dilation"), c.dilation, 1, MAX_DIM / c.kernel)?;
                    if c.residual && c.channels != width {
                        return Err(InvalidDescription::ResidualWidth {
                            field: field("residual"),
                            input: width,
                            output: c.channels,
                        });
                    }
                    names.push(&c.name);
                }
                BodyLayer::Positions(p) => {
                    if let PositionEncoding::Learned { max_len } = p.encoding {
                        size(&format!("body[{i}].max_len"), max_len, 1, MAX_DIM)?;
                    }
                    names.push(&p.name);
                }
                BodyLayer::Encoder(e) => {
                    let field = |key: &str| format!("body[{i}].{key}");
                    size(&field("layers"), e.layers, 1, MAX_LAYERS)?;
                    size(&field("heads"), e.heads, 1, MAX_DIM)?;
                    size(&field("feedforward"), e.feedforward, 1, MAX_DIM)?;
                    if width % e.heads != 0 {
                        return Err(InvalidDescription::Body {
                            field: field("heads"),
                            reason: format!("{width} features do not split into {} heads of equal width (nn.MultiheadAttention needs embed_dim divisible by num_heads)", e.heads),
                        });
                    }
                    if !matches!(e.activation, Activation::Relu | Activation::Gelu) {
                        return Err(InvalidDescription::Body {
                            field: field("activation"),
                            reason: format!("\"{}\": the feed-forward block takes \"relu\" or \"gelu\" (as nn.TransformerEncoderLayer)", e.activation.name()),
                        });
                    }
                    names.push(&e.name);
                }
            }
            if let Some(name) = names.last().filter(|_| layer.recurrent().is_none()) {
                if names[..names.len() - 1].contains(name) {
                    return Err(InvalidDescription::DuplicateName {
                        field: format!("body[{i}].name"),
                        name: name.to_string(),
                    });
                }
            }
            width = layer.output_features(width);
        }
        Ok(names)
    }

    /// The trainable parameters in u128, so an absurd description is refused instead of
    /// overflowing.
    fn parameter_bound(&self) -> u128 {
        let (input, embedding) = match self.input {
            InputSpec::Dense { features } => (features as u128, 0),
            InputSpec::Tokens { vocab, embedding } => match embedding {
                Some(dim) => (dim as u128, vocab as u128 * dim as u128),
                None => (vocab as u128, 0),
            },
        };
        let mut width = input;
        let mut body = embedding;
        for layer in &self.body {
            let (parameters, output) = match layer {
                BodyLayer::Recurrent(r) => recurrent_parameters(r, width),
                BodyLayer::Conv1d(c) => {
                    let out = c.channels as u128;
                    (out * width * c.kernel as u128 + out, out)
                }
                BodyLayer::Positions(p) => match p.encoding {
                    PositionEncoding::Sinusoidal => (0, width),
                    PositionEncoding::Learned { max_len } => (max_len as u128 * width, width),
                },
                BodyLayer::Encoder(e) => {
                    let (d, ff) = (width, e.feedforward as u128);
                    // Attention's in and out projections, two linear maps, two norms;
                    // the final norm.
                    let per_layer = (4 * d * d + 4 * d) + (2 * ff * d + ff + d) + 4 * d;
                    let last = if e.final_norm { 2 * d } else { 0 };
                    (e.layers as u128 * per_layer + last, d)
                }
            };
            body += parameters;
            width = output;
        }
        let mut head = 0;
        for layer in &self.head.layers {
            match layer.kind {
                HeadLayerKind::BatchNorm | HeadLayerKind::LayerNorm => head += 2 * width,
                HeadLayerKind::Dropout { .. } => {}
                HeadLayerKind::Dense { units, .. } => {
                    head += (width + 1) * units as u128;
                    width = units as u128;
                }
            }
        }
        body + head + (width + 1) * self.loss.outputs() as u128
    }
}

fn validate_recurrent(r: &RecurrentSpec) -> Result<(), InvalidDescription> {
    size("recurrent.hidden", r.hidden, 1, MAX_DIM)?;
    size("recurrent.layers", r.layers, 1, MAX_LAYERS)?;
    if r.layers == 1 && r.dropout.is_active() {
        return Err(InvalidDescription::DropoutWithOneLayer {
            field: "recurrent.dropout".into(),
            p: r.dropout,
        });
    }
    Ok(())
}

/// A recurrent stack's trainable parameters reading `input` features, and its output
/// features.
fn recurrent_parameters(r: &RecurrentSpec, input: u128) -> (u128, u128) {
    let (h, l) = (r.hidden as u128, r.layers as u128);
    let gates = match r.cell {
        Cell::Lstm => 4,
        Cell::Gru => 3,
    };
    // Per direction: the first layer reads the input, the others the layer below (both
    // directions' outputs when bidirectional).
    let directions = r.output_features() as u128 / h.max(1);
    let parameters = directions
        * (gates * h * (input + h)
            + 2 * gates * h
            + (l - 1) * (gates * h * (directions * h + h) + 2 * gates * h));
    (parameters, directions * h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(d: &ModelDescription) -> String {
        d.validate()
            .unwrap_err()
            .field()
            .unwrap_or("(none)")
            .to_string()
    }

    #[test]
    fn the_seed_preset_is_valid() {
        ModelDescription::seed().validate().unwrap();
    }

    #[test]
    fn a_body_of_no_layer_or_two_recurrent_stacks_is_refused_saying_why() {
        let mut d = ModelDescription::seed();
        let stack = d.body[0].clone();
        d.body.clear();
        let e = d.validate().unwrap_err();
        assert_eq!(e.field(), Some("body"));
        assert!(e.to_string().contains("no layer over the steps"), "{e}");
        d.body = vec![stack.clone(), stack];
        let e = d.validate().unwrap_err().to_string();
        assert!(e.contains("at most one \"lstm\" or \"gru\""), "{e}");
    }

    #[test]
    fn zero_sizes_are_rejected_naming_the_field() {
        let mut d = ModelDescription::seed();
        d.recurrent_mut().unwrap().hidden = 0;
        assert_eq!(field_of(&d), "recurrent.hidden");
        let mut d = ModelDescription::seed();
        d.input = InputSpec::Dense { features: 0 };
        assert_eq!(field_of(&d), "input.features");
        let mut d = ModelDescription::seed();
        d.head.layers[1].kind = HeadLayerKind::Dense {
            units: 0,
            activation: tensorfit_core::Activation::Tanh,
        };
        assert_eq!(field_of(&d), "head.layers[1].units");
        let e = d.validate().unwrap_err().to_string();
        assert!(
            e.contains("head.layers[1].units") && e.contains("= 0"),
            "{e}"
        );
    }

    #[test]
    fn dropout_between_the_layers_of_a_one_layer_stack_is_an_error() {
        let mut d = ModelDescription::seed();
        d.recurrent_mut().unwrap().dropout = DropoutRate::new(0.2).unwrap();
        d.validate().unwrap();
        d.recurrent_mut().unwrap().layers = 1;
        assert_eq!(field_of(&d), "recurrent.dropout");
        let e = d.validate().unwrap_err().to_string();
        assert!(e.contains("has none (PyTorch warns"), "{e}");
    }

    #[test]
    fn a_loss_with_one_class_does_not_fit_the_head() {
        let mut d = ModelDescription::seed();
        d.loss = LossSpec::SoftmaxCrossEntropy { classes: 1 };
        assert_eq!(field_of(&d), "loss.classes");
    }

    #[test]
    fn a_head_name_used_twice_or_taken_by_the_output_is_rejected() {
        let mut d = ModelDescription::seed();
        d.head.layers[2].name = "bn1".into();
        assert_eq!(field_of(&d), "head.layers[2].name");
        let mut d = ModelDescription::seed();
        d.head.layers[0].name = "out".into();
        assert_eq!(field_of(&d), "head.layers[0].name");
    }

    #[test]
    fn the_parameter_bound_is_the_exact_count_for_every_cell_input_and_direction() {
        let mut d = ModelDescription::seed();
        for (cell, input) in [
            (Cell::Lstm, InputSpec::Dense { features: 9 }),
            (
                Cell::Lstm,
                InputSpec::Tokens {
                    vocab: 11,
                    embedding: None,
                },
            ),
            (
                Cell::Gru,
                InputSpec::Tokens {
                    vocab: 11,
                    embedding: Some(5),
                },
            ),
            (Cell::Gru, InputSpec::Dense { features: 9 }),
        ] {
            for bidirectional in [false, true] {
                (d.recurrent_mut().unwrap().cell, d.input) = (cell, input);
                d.recurrent_mut().unwrap().bidirectional = bidirectional;
                let exact = d.trainable_parameters().unwrap() as u128;
                assert_eq!(d.parameter_bound(), exact, "{d}");
            }
        }
    }

    #[test]
    fn too_many_parameters_are_refused_before_anything_is_built() {
        let mut d = ModelDescription::seed();
        d.recurrent_mut().unwrap().hidden = MAX_DIM;
        d.recurrent_mut().unwrap().layers = 8;
        let e = d.validate().unwrap_err();
        assert!(
            matches!(e, InvalidDescription::TooManyParameters { .. }),
            "{e}"
        );
    }

    #[test]
    fn both_cells_read_token_ids_with_or_without_an_embedding() {
        for cell in [Cell::Lstm, Cell::Gru] {
            for embedding in [Some(16), None] {
                let mut d = ModelDescription::seed();
                d.recurrent_mut().unwrap().cell = cell;
                d.input = InputSpec::Tokens {
                    vocab: 65,
                    embedding,
                };
                d.validate().unwrap();
            }
        }
    }
}
