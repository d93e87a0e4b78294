//! A model as users describe it: input, recurrent stack, head and loss, as plain data.
//!
//! A description is written in TOML (`tensorfit train --model my.toml`; an optional
//! `[training]` table there holds `train`'s settings, see `description_toml`) or built in code;
//! the preset [`ModelDescription::seed`] is the network of the seed report. The file
//! format, one table per part:
//!
//! ```toml
//! [input]
//! kind = "dense"          # "dense": `features` f32 per step; "tokens": ids in 0..vocab
//! features = 152
//! # kind = "tokens"
//! # vocab = 65
//! # embedding = 32        # tokens through nn.Embedding(vocab, 32); without it, exact
//! #                       # one-hot into the first recurrent layer, never materialised
//!
//! [recurrent]
//! cell = "lstm"           # or "gru" (PyTorch's gate orders and parameter names)
//! hidden = 250
//! layers = 3
//! # dropout = 0.2        # nn.LSTM(dropout=0.2): on every layer's output but the last,
//! #                      # in training only (needs layers >= 2)
//!
//! [head]
//! on = "last"             # the last step (classification) or "every_step" (tagging, LMs)
//! layers = [              # applied in order, then the output layer `out` the loss implies
//!   { kind = "batchnorm", name = "bn1" },
//!   { kind = "dense", units = 100, activation = "tanh", name = "dense" },
//!   { kind = "batchnorm", name = "bn2" },
//!   # { kind = "layernorm" },        # nn.LayerNorm over each row's features
//!   # { kind = "dense", units = 100, residual = true },  # x + dense(x): any head layer
//!   #                                # may ask for its input added to its output
//!   # { kind = "dropout", p = 0.2 },  # nn.Dropout(0.2), in training only
//! ]
//!
//! [loss]
//! kind = "cross_entropy"  # softmax cross-entropy over `classes`, or "mse" over `outputs`
//! classes = 6
//! ```
//!
//! A head layer without a `name` is called `head.{i}` (its index in `layers`), as
//! `nn.Sequential` would name it.

use tensorfit_core::Activation;

pub use crate::layers::DropoutRate;

/// A whole model: what comes in, the layers over its steps, the head and the loss.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDescription {
    pub input: InputSpec,
    /// The layers over each sequence's steps, in order, between the input (and its
    /// embedding) and the head: a `[recurrent]` table is a body of one recurrent stack.
    pub body: Vec<BodyLayer>,
    pub head: HeadSpec,
    pub loss: LossSpec,
}

/// One layer of the body: a layer over the steps of each sequence, `[T, B, F]` in and
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyLayer {
    /// A stack of LSTM or GRU layers (one direction or both), registered as `lstm` or
    /// `gru`; a body holds at most one.
    Recurrent(RecurrentSpec),
    /// A 1-D convolution over the steps (`nn.Conv1d`), registered under its name.
    Conv1d(Conv1dSpec),
    /// Each step's position added to its features, registered under its name.
    Positions(PositionsSpec),
    /// A stack of Transformer encoder layers (`nn.TransformerEncoder`), registered
    /// under its name.
    Encoder(EncoderSpec),
}

/// Each step's position added to its features (the Transformer's positional encoding),
/// so that the layers after it can tell the steps apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionsSpec {
    pub name: String,
    pub encoding: PositionEncoding,
}

/// How a step's position is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PositionEncoding {
    /// "Attention is all you need"'s sines and cosines (the PyTorch tutorial's
    /// `PositionalEncoding`): feature `2i` of step `t` gains `sin(t · 10000^(-2i/F))`,
    /// feature `2i + 1` `cos(..)` of the same; no tensors, any length.
    Sinusoidal,
    /// A trained table `{name}.weight` `[max_len, F]` (an `nn.Embedding(max_len, F)` of
    /// the step indices, initialised as one: N(0, 1)); sequences up to `max_len` steps.
    Learned { max_len: usize },
}

/// `nn.TransformerEncoder(nn.TransformerEncoderLayer(F, heads, feedforward, dropout,
/// activation, norm_first=norm_first), layers, norm=nn.LayerNorm(F) if final_norm)` over
/// the steps, `F` its input features;
/// PyTorch's tensors and defaults. Over a padded batch the steps past a sequence's end
/// are masked as keys (PyTorch's `src_key_padding_mask`); `causal` masks the steps after
/// each step too (`is_causal`, a square subsequent mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderSpec {
    /// Its tensors are `{name}.layers.{k}.self_attn.in_proj_weight`, ... as in the
    /// `state_dict` of an `nn.TransformerEncoder` registered as `name`.
    pub name: String,
    /// Encoder layers (`num_layers`).
    pub layers: usize,
    /// Attention heads (`nhead`); the features must be a multiple of it.
    pub heads: usize,
    /// Width of each feed-forward block (`dim_feedforward`; PyTorch's default 2048).
    pub feedforward: usize,
    /// Dropout on the attention weights and after each block (PyTorch's default 0.1),
    /// in training only.
    pub dropout: DropoutRate,
    /// The feed-forward block's activation: `Relu` (PyTorch's default) or `Gelu`.
    pub activation: Activation,
    /// LayerNorm before each block (`norm_first=True`, pre-norm) instead of after it
    /// (post-norm, PyTorch's default).
    pub norm_first: bool,
    /// Each step attends to the steps up to it only.
    pub causal: bool,
    /// A LayerNorm over each step after the last layer (`nn.TransformerEncoder`'s
    /// `norm=nn.LayerNorm(F)`, the usual companion of pre-norm layers), tensors
    /// `{name}.norm.weight` and `{name}.norm.bias`.
    pub final_norm: bool,
}

impl EncoderSpec {
    /// PyTorch's defaults: `dim_feedforward` 2048, dropout 0.1, ReLU, post-norm, not
    /// causal, no final norm.
    pub fn new(name: &str, layers: usize, heads: usize) -> EncoderSpec {
        EncoderSpec {
            name: name.to_string(),
            layers,
            heads,
            feedforward: 2048,
            dropout: DropoutRate::PYTORCH_TRANSFORMER,
            activation: Activation::Relu,
            norm_first: false,
            causal: false,
            final_norm: false,
        }
    }
}

/// `nn.Conv1d(in, channels, kernel, dilation=dilation)` over each sequence's steps, the
/// sequence padded with zeros so that its length is kept, then `activation` (Keras's
/// `Conv1D(activation=)`; identity by default, as PyTorch's module has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv1dSpec {
    /// The name its tensors are registered under (`{name}.weight` `[channels, in,
    /// kernel]`, `{name}.bias` `[channels]`).
    pub name: String,
    /// Output channels (features per step out).
    pub channels: usize,
    /// Steps each output reads (`kernel_size`).
    pub kernel: usize,
    /// Steps between the ones it reads (`dilation`; 1 reads adjacent steps).
    pub dilation: usize,
    pub padding: ConvPadding,
    pub activation: Activation,
    /// The layer's input is added to its output (a TCN's residual block; its width is
    /// unchanged).
    pub residual: bool,
}

/// Where a convolution's zeros go, so that each sequence keeps its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvPadding {
    /// All `(kernel - 1) · dilation` zeros before the sequence: step `t` reads steps `t`
    /// and before only (a TCN's causal convolution).
    Causal,
    /// Half the zeros before, the rest after (PyTorch's `padding="same"`, Keras's
    /// `"same"`): step `t` reads steps around it.
    Same,
}

impl ConvPadding {
    /// Each as a model file spells it (`padding`).
    pub const SPELLINGS: [(&'static str, ConvPadding); 2] =
        [("causal", ConvPadding::Causal), ("same", ConvPadding::Same)];

    /// As a model file spells it.
    pub fn spelling(self) -> &'static str {
        Self::SPELLINGS
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("", |(name, _)| name)
    }
}

impl Conv1dSpec {
    /// The zeros before each sequence: `(kernel - 1) · dilation` causal, half of it
    /// (rounded down, as PyTorch's `"same"`) otherwise.
    pub fn left(&self) -> usize {
        let span = (self.kernel.saturating_sub(1)).saturating_mul(self.dilation);
        match self.padding {
            ConvPadding::Causal => span,
            ConvPadding::Same => span / 2,
        }
    }
}

impl BodyLayer {
    /// The recurrent stack, if this layer is one.
    pub fn recurrent(&self) -> Option<&RecurrentSpec> {
        match self {
            BodyLayer::Recurrent(r) => Some(r),
            BodyLayer::Conv1d(_) | BodyLayer::Positions(_) | BodyLayer::Encoder(_) => None,
        }
    }

    /// The recurrent stack, to change, if this layer is one.
    pub fn recurrent_mut(&mut self) -> Option<&mut RecurrentSpec> {
        match self {
            BodyLayer::Recurrent(r) => Some(r),
            BodyLayer::Conv1d(_) | BodyLayer::Positions(_) | BodyLayer::Encoder(_) => None,
        }
    }

    /// Features per step out of the layer, given `input` in.
    pub fn output_features(&self, input: usize) -> usize {
        match self {
            BodyLayer::Recurrent(r) => r.output_features(),
            BodyLayer::Conv1d(c) => c.channels,
            BodyLayer::Positions(_) | BodyLayer::Encoder(_) => input,
        }
    }
}

/// What a time step of a sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputSpec {
    /// `features` f32 values per step.
    Dense { features: usize },
    /// One token id in `0..vocab` per step. With `embedding: Some(dim)` the ids pass
    /// through `nn.Embedding(vocab, dim)` (registered as `embedding`); with `None` they
    /// are an exact one-hot input of width `vocab` to the first recurrent layer, computed
    /// as a gather of its input weights' columns and never materialised.
    Tokens {
        vocab: usize,
        embedding: Option<usize>,
    },
}

/// The recurrent cell of every layer of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cell {
    /// `torch.nn.LSTM`: gates (i, f, g, o), state (h, c), registered as `lstm`.
    Lstm,
    /// `torch.nn.GRU`: gates (r, z, n) with `b_hn` inside the reset product, state h,
    /// registered as `gru`.
    Gru,
}

/// `layers` stacked recurrent layers of `hidden` units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecurrentSpec {
    pub cell: Cell,
    pub hidden: usize,
    pub layers: usize,
    /// PyTorch's `dropout=`: on the output of every layer but the last, in training.
    pub dropout: DropoutRate,
    /// PyTorch's `bidirectional=`: each layer also runs each sequence from its own end
    /// back to its start (tensors `*_l{k}_reverse`), and its output is the two directions'
    /// outputs side by side, `2 · hidden` features. Such a layer reads every sequence
    /// whole: it cannot stream, carry a state between chunks or recompute in sub-segments.
    pub bidirectional: bool,
}

impl RecurrentSpec {
    /// Features per step out of the top layer: `hidden`, or `2 · hidden` bidirectional.
    pub fn output_features(&self) -> usize {
        match self.bidirectional {
            true => 2 * self.hidden,
            false => self.hidden,
        }
    }
}

/// Which steps of the top recurrent layer the head reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeadOn {
    /// One output per sequence (sequence classification, regression), from its steps
    /// reduced by [`Reduce`]: the last step, or their mean or maximum.
    Sequence(Reduce),
    /// Every step: one output per step (language models, tagging; DL4J's
    /// `RnnOutputLayer`).
    EveryStep,
}

impl HeadOn {
    /// Each sequence's last step (DL4J's `LastTimeStep`; a model file's `on = "last"`).
    pub const LAST_STEP: HeadOn = HeadOn::Sequence(Reduce::LastStep);

    /// Each as a model file (`head.on`) and a checkpoint spell it.
    pub const SPELLINGS: [(&'static str, HeadOn); 4] = [
        ("last", HeadOn::LAST_STEP),
        ("mean", HeadOn::Sequence(Reduce::Mean)),
        ("max", HeadOn::Sequence(Reduce::Max)),
        ("every_step", HeadOn::EveryStep),
    ];

    /// As a model file spells it.
    pub fn spelling(self) -> &'static str {
        Self::SPELLINGS
            .iter()
            .find(|(_, on)| *on == self)
            .map_or("", |(name, _)| name)
    }

    /// Whether the head gives one output per sequence (not one per step).
    pub fn per_sequence(self) -> bool {
        matches!(self, HeadOn::Sequence(_))
    }
}

/// How a head on each sequence reads its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reduce {
    /// Each sequence's own last step (after a bidirectional stack, each direction's).
    LastStep,
    /// The mean over each sequence's own steps (Keras's `GlobalAveragePooling1D`, DL4J's
    /// `GlobalPoolingLayer` with `AVG`; in PyTorch, `y` summed over the steps inside each
    /// sequence and divided by its length).
    Mean,
    /// The maximum over each sequence's own steps, per feature (Keras's
    /// `GlobalMaxPooling1D`; in PyTorch, `y.masked_fill(padding, -inf).amax(0)`).
    Max,
}

/// One layer of the head, by its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadLayerKind {
    /// `nn.BatchNorm1d` over the features (PyTorch's eps 1e-5 and momentum 0.1).
    BatchNorm,
    /// `nn.LayerNorm` over the features of each row (PyTorch's eps 1e-5).
    LayerNorm,
    /// `nn.Linear` followed by `activation`.
    Dense {
        units: usize,
        activation: Activation,
    },
    /// `nn.Dropout(p)`: in training only; no tensors.
    Dropout { p: DropoutRate },
}

/// A head layer and the name its tensors are registered under (`bn1.weight`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadLayer {
    pub name: String,
    pub kind: HeadLayerKind,
    /// The layer asks for a residual connection: its input is added to its output
    /// (`x + f(x)`, as in ResNet and the Transformer's sublayers), so its output has its
    /// input's width.
    pub residual: bool,
}

/// The layers between the recurrent stack and the output layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadSpec {
    pub on: HeadOn,
    pub layers: Vec<HeadLayer>,
}

/// The loss, which also fixes the output layer `out` (a linear layer to its width).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossSpec {
    /// Softmax cross-entropy over `classes` (labels are class ids).
    SoftmaxCrossEntropy { classes: usize },
    /// Mean squared error over `outputs` f32 targets (regression).
    MeanSquaredError { outputs: usize },
}

impl LossSpec {
    /// The width of the output layer.
    pub fn outputs(&self) -> usize {
        match *self {
            LossSpec::SoftmaxCrossEntropy { classes } => classes,
            LossSpec::MeanSquaredError { outputs } => outputs,
        }
    }

    /// Target values per output row: one class id for cross-entropy, `outputs` f32
    /// values for mean squared error.
    pub fn targets_per_row(&self) -> usize {
        match *self {
            LossSpec::SoftmaxCrossEntropy { .. } => 1,
            LossSpec::MeanSquaredError { outputs } => outputs,
        }
    }

    /// Whether the model predicts classes (so accuracy means something).
    pub fn is_classification(&self) -> bool {
        matches!(self, LossSpec::SoftmaxCrossEntropy { .. })
    }
}

impl ModelDescription {
    /// The recurrent stack of the body, if it has one.
    pub fn recurrent(&self) -> Option<&RecurrentSpec> {
        self.body.iter().find_map(BodyLayer::recurrent)
    }

    /// The recurrent stack of the body, to change, if it has one.
    pub fn recurrent_mut(&mut self) -> Option<&mut RecurrentSpec> {
        self.body.iter_mut().find_map(BodyLayer::recurrent_mut)
    }

    /// Features per step into the body: the input's features, the embedding's width,
    /// or for token ids without an embedding the vocabulary (an exact one-hot, which only
    /// a recurrent stack reads, as a gather of its weights' columns).
    pub fn body_input_features(&self) -> usize {
        match self.input {
            InputSpec::Dense { features } => features,
            InputSpec::Tokens {
                embedding: Some(dim),
                ..
            } => dim,
            InputSpec::Tokens {
                vocab,
                embedding: None,
            } => vocab,
        }
    }

    /// Features per step out of the body: what the head (or its reduction) reads.
    pub fn body_features(&self) -> usize {
        self.body
            .iter()
            .fold(self.body_input_features(), |w, l| l.output_features(w))
    }

    /// The network of the seed report: 152 one-hot features, 3 × LSTM 250, BatchNorm
    /// `bn1`, Dense `dense` 100 (tanh), BatchNorm `bn2`, softmax over 6 classes: 1,434,406
    /// trainable parameters with PyTorch's two LSTM bias vectors.
    pub fn seed() -> Self {
        crate::seed_shape::SeedShape::SEED.description()
    }

    /// A sequence classifier with nothing between its recurrent stack and its output
    /// layer: `features` f32 per step, `layers` LSTM layers of `hidden` units, the last
    /// step, softmax over `classes` (the model `scripts/lstm-classifier-toml.sh` writes,
    /// with one layer).
    pub fn lstm_classifier(features: usize, hidden: usize, layers: usize, classes: usize) -> Self {
        let input = InputSpec::Dense { features };
        ModelDescription::bare_lstm(input, (hidden, layers), HeadOn::LAST_STEP, classes)
    }

    /// A language model with nothing between its recurrent stack and its output layer:
    /// token ids in `0..vocab` (exact one-hot, no embedding), `layers` LSTM layers of
    /// `hidden` units, on every step softmax over the vocabulary (the next token).
    pub fn lstm_language_model(vocab: usize, hidden: usize, layers: usize) -> Self {
        let input = InputSpec::Tokens {
            vocab,
            embedding: None,
        };
        ModelDescription::bare_lstm(input, (hidden, layers), HeadOn::EveryStep, vocab)
    }

    /// `input` into `layers` LSTM layers of `hidden` units, no dropout, no head layers,
    /// softmax over `classes` on the steps `on` says.
    fn bare_lstm(
        input: InputSpec,
        (hidden, layers): (usize, usize),
        on: HeadOn,
        classes: usize,
    ) -> Self {
        ModelDescription {
            input,
            body: vec![BodyLayer::Recurrent(RecurrentSpec {
                cell: Cell::Lstm,
                hidden,
                layers,
                dropout: DropoutRate::NONE,
                bidirectional: false,
            })],
            head: HeadSpec {
                on,
                layers: Vec::new(),
            },
            loss: LossSpec::SoftmaxCrossEntropy { classes },
        }
    }
}
