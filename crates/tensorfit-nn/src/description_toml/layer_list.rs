//! The layers of a description file as one ordered list, `[[layers]]`, in place of the
//! `[recurrent]` and `[head]` tables:
//!
//! ```toml
//! [input]
//! kind = "tokens"
//! vocab = 65
//!
//! [[layers]]
//! kind = "embedding"     # nn.Embedding(vocab, dim): only first, only on tokens
//! dim = 32
//!
//! [[layers]]
//! kind = "lstm"          # or "gru"; nn.LSTM(hidden, num_layers = layers, dropout)
//! hidden = 250
//! layers = 2             # 1 if not given, as PyTorch's num_layers
//! dropout = 0.2
//! bidirectional = false  # true: both directions, 2 · hidden features out
//!
//! [[layers]]
//! kind = "last_step"     # each sequence's last step ("mean_pool", "max_pool": the
//!                        # mean or maximum over its steps); without it the layers below
//!                        # and the loss are on every step
//!
//! [[layers]]
//! kind = "dense"         # then "dense", "batchnorm", "dropout" as in [head]
//! units = 100
//! activation = "tanh"
//!
//! [loss]
//! kind = "cross_entropy"
//! classes = 6
//! ```
//!
//! This version builds the models the tables describe: an optional `embedding`, one
//! `lstm` or `gru`, an optional `last_step`, `mean_pool` or `max_pool`, then head layers; a layer out of that order is
//! refused at its line, saying so. Head layers without a `name` are called `head.{i}`,
//! their index after the recurrent layer and the last step, as in `[head]`: a model
//! names its tensors alike in either form, so their checkpoints are interchangeable.

use super::table::Table;
use super::{activation, default_body_name, head_layers, layer_name, tables_in, CELLS};
use crate::description::{
    BodyLayer, Cell, Conv1dSpec, ConvPadding, EncoderSpec, HeadOn, HeadSpec, InputSpec,
    PositionEncoding, PositionsSpec, RecurrentSpec, Reduce,
};
use crate::DescriptionError;

/// A kind of layer in the list, as a file spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Embedding,
    Recurrent(Cell),
    Conv1d,
    Positions,
    Encoder,
    /// `last_step`, `mean_pool`, `max_pool`: a head on each sequence.
    Reduce(Reduce),
    /// `batchnorm`, `layernorm`, `dense`, `dropout`: read as `[head]` reads them.
    Head,
}

const KINDS: [(&str, Kind); 13] = [
    ("embedding", Kind::Embedding),
    (CELLS[0].0, Kind::Recurrent(CELLS[0].1)),
    (CELLS[1].0, Kind::Recurrent(CELLS[1].1)),
    ("conv1d", Kind::Conv1d),
    ("positions", Kind::Positions),
    ("transformer_encoder", Kind::Encoder),
    ("last_step", Kind::Reduce(Reduce::LastStep)),
    ("mean_pool", Kind::Reduce(Reduce::Mean)),
    ("max_pool", Kind::Reduce(Reduce::Max)),
    ("batchnorm", Kind::Head),
    ("layernorm", Kind::Head),
    ("dense", Kind::Head),
    ("dropout", Kind::Head),
];

/// How the list spells the layer that reduces each sequence by `reduce`.
pub(super) fn reduce_kind(reduce: Reduce) -> &'static str {
    KINDS
        .iter()
        .find(|(_, kind)| *kind == Kind::Reduce(reduce))
        .map_or("", |(name, _)| name)
}

/// The order this version builds, for messages.
const ORDER: &str =
    "an optional \"embedding\", layers over the steps (at most one \"lstm\" or \"gru\", any \"conv1d\", \"positions\" and \"transformer_encoder\"), an optional \"last_step\", \"mean_pool\" or \"max_pool\", then \"dense\", \"batchnorm\", \"layernorm\" and \"dropout\" layers";

/// The body and head the `layers` array of `root` lists, with the embedding it places on
/// `input` (which must be token ids and give none itself).
pub(super) fn read(
    root: &Table,
    input: &mut InputSpec,
) -> Result<(Vec<BodyLayer>, HeadSpec), DescriptionError> {
    let tables = tables_in(root, "layers")?;
    let mut body: Vec<BodyLayer> = Vec::new();
    let mut on = HeadOn::EveryStep;
    let mut head = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        let kind = t.choice("kind", &KINDS)?;
        // What may come before this kind: each stage only after the ones before it.
        let before_head = on == HeadOn::EveryStep && head.is_empty();
        let in_order = match kind {
            Kind::Embedding => i == 0,
            Kind::Recurrent(_) => {
                before_head && !body.iter().any(|l| matches!(l, BodyLayer::Recurrent(_)))
            }
            Kind::Conv1d | Kind::Positions | Kind::Encoder => before_head,
            Kind::Reduce(_) => !body.is_empty() && before_head,
            Kind::Head => !body.is_empty(),
        };
        if !in_order {
            let message = format!(
                "`{}` ({:?}) is out of order: this version builds {ORDER}",
                t.path,
                kind_name(t)
            );
            return Err(t.file.error(t.span.start, &t.path, message));
        }
        match kind {
            Kind::Embedding => embedding(t, input)?,
            Kind::Recurrent(cell) => body.push(BodyLayer::Recurrent(stack(t, cell)?)),
            Kind::Conv1d => body.push(BodyLayer::Conv1d(conv1d(t, body.len())?)),
            Kind::Positions => body.push(BodyLayer::Positions(positions(t, body.len())?)),
            Kind::Encoder => body.push(BodyLayer::Encoder(encoder(t, body.len())?)),
            Kind::Reduce(reduce) => {
                t.known_keys(&["kind"])?;
                on = HeadOn::Sequence(reduce);
            }
            Kind::Head => head.push(t),
        }
    }
    if body.is_empty() {
        let key = root.key("layers");
        let at = root
            .table
            .get("layers")
            .map_or(root.span.start, |v| v.span().start);
        let message = format!(
            "`{key}` has no layer over the steps (\"lstm\", \"gru\", \"conv1d\", \"transformer_encoder\"): this version builds {ORDER}"
        );
        return Err(root.file.error(at, &key, message));
    }
    let layers = head_layers(head)?;
    Ok((body, HeadSpec { on, layers }))
}

fn kind_name<'a>(t: &'a Table) -> &'a str {
    t.table
        .get("kind")
        .and_then(|k| k.get_ref().as_str())
        .unwrap_or("")
}

/// `kind = "embedding"`, `dim`: placed on token `input`.
fn embedding(t: &Table, input: &mut InputSpec) -> Result<(), DescriptionError> {
    t.known_keys(&["kind", "dim"])?;
    let dim = t.size("dim")?;
    match input {
        InputSpec::Tokens {
            embedding: embedding @ None,
            ..
        } => {
            *embedding = Some(dim);
            Ok(())
        }
        InputSpec::Tokens {
            embedding: Some(_), ..
        } => Err(t.file.error(
            t.span.start,
            &t.path,
            format!(
                "`{}` and `input.embedding` both give an embedding: give it once, as this layer",
                t.path
            ),
        )),
        InputSpec::Dense { .. } => Err(t.file.error(
            t.span.start,
            &t.path,
            format!(
                "`{}`: an embedding reads token ids, and `input` is \"dense\" (give `kind = \"tokens\"` and `vocab`)",
                t.path
            ),
        )),
    }
}

/// `kind = "lstm"` or `"gru"`: `hidden`, `layers` (1 if not given), `dropout`,
/// `bidirectional`.
fn stack(t: &Table, cell: Cell) -> Result<RecurrentSpec, DescriptionError> {
    t.known_keys(&["kind", "hidden", "layers", "dropout", "bidirectional"])?;
    Ok(RecurrentSpec {
        cell,
        hidden: t.size("hidden")?,
        layers: t.optional_size("layers")?.unwrap_or(1),
        dropout: t.dropout("dropout")?,
        bidirectional: t.flag("bidirectional")?,
    })
}

/// `kind = "conv1d"`: `channels`, `kernel`, `padding` (`"causal"` or `"same"`, no
/// default: PyTorch's and Keras's own default shortens the sequence), `dilation` (1 if
/// not given), `activation` (none if not given), `residual`, `name` (`body.{index}` if
/// not given, `index` its place in the body).
fn conv1d(t: &Table, index: usize) -> Result<Conv1dSpec, DescriptionError> {
    t.known_keys(&[
        "kind",
        "channels",
        "kernel",
        "dilation",
        "padding",
        "activation",
        "residual",
        "name",
    ])?;
    t.required("padding")?;
    Ok(Conv1dSpec {
        name: body_name(t, index)?,
        channels: t.size("channels")?,
        kernel: t.size("kernel")?,
        dilation: t.optional_size("dilation")?.unwrap_or(1),
        padding: t.choice("padding", &ConvPadding::SPELLINGS)?,
        activation: activation(t)?,
        residual: t.flag("residual")?,
    })
}

/// `kind = "positions"`: `encoding` (`"sinusoidal"` or `"learned"`, no default), and
/// `max_len` for a learned one; `name`.
fn positions(t: &Table, index: usize) -> Result<PositionsSpec, DescriptionError> {
    t.known_keys(&["kind", "encoding", "max_len", "name"])?;
    t.required("encoding")?;
    let encoding = match t.choice("encoding", &[("sinusoidal", false), ("learned", true)])? {
        false => PositionEncoding::Sinusoidal,
        true => {
            t.required("max_len")?;
            PositionEncoding::Learned {
                max_len: t.size("max_len")?,
            }
        }
    };
    if encoding == PositionEncoding::Sinusoidal && t.table.contains_key("max_len") {
        let message = format!(
            "`{}`: sinusoidal positions have no table and no longest sequence",
            t.key("max_len")
        );
        return Err(t.file.error(t.span.start, &t.key("max_len"), message));
    }
    Ok(PositionsSpec {
        name: body_name(t, index)?,
        encoding,
    })
}

/// `kind = "transformer_encoder"`: `heads`, and PyTorch's defaults for `layers` (1),
/// `feedforward` (2048), `dropout` (0.1), `activation` ("relu"), `norm_first`, `causal`
/// and `final_norm` (false); `name`.
fn encoder(t: &Table, index: usize) -> Result<EncoderSpec, DescriptionError> {
    t.known_keys(&[
        "kind",
        "layers",
        "heads",
        "feedforward",
        "dropout",
        "activation",
        "norm_first",
        "causal",
        "final_norm",
        "name",
    ])?;
    let mut e = EncoderSpec::new(
        &body_name(t, index)?,
        t.optional_size("layers")?.unwrap_or(1),
        t.size("heads")?,
    );
    if let Some(ff) = t.optional_size("feedforward")? {
        e.feedforward = ff;
    }
    if t.table.contains_key("dropout") {
        e.dropout = t.dropout("dropout")?;
    }
    if t.table.contains_key("activation") {
        e.activation = activation(t)?;
    }
    e.norm_first = t.flag("norm_first")?;
    e.causal = t.flag("causal")?;
    e.final_norm = t.flag("final_norm")?;
    Ok(e)
}

/// A body layer's `name`, or `body.{index}` if not given.
fn body_name(t: &Table, index: usize) -> Result<String, DescriptionError> {
    match t.table.get("name") {
        None => Ok(default_body_name(index)),
        Some(v) => layer_name(t, v),
    }
}
