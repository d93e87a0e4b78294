//! The builder's layers over the steps besides a recurrent stack: convolutions,
//! positions and Transformer encoders (beside `builder.rs`, which holds the rest).

use tensorfit_core::Activation;

use crate::builder::{GivenBody, ModelBuilder};
use crate::description::{Conv1dSpec, ConvPadding, EncoderSpec, PositionEncoding, PositionsSpec};

impl ModelBuilder {
    /// A 1-D convolution over the steps (`nn.Conv1d(in, channels, kernel)` then
    /// `activation`), each sequence padded with zeros as `padding` says so that it keeps
    /// its length; `dilation` 1 unless [`ModelBuilder::dilation`] says. Layers over the
    /// steps (`conv1d`, `lstm`, `gru`) run in the order they are added.
    ///
    /// ```
    /// use tensorfit_core::Activation;
    /// use tensorfit_nn::{ConvPadding, ModelDescription};
    ///
    /// // A TCN classifier: two causal convolutions of 16 channels, the second dilated
    /// // and residual, then the mean over each sequence's steps.
    /// let model = ModelDescription::builder()
    ///     .features(3)
    ///     .conv1d(16, 3, ConvPadding::Causal, Activation::Relu)
    ///     .conv1d(16, 3, ConvPadding::Causal, Activation::Relu)
    ///     .dilation(2)
    ///     .residual()
    ///     .mean_pool()
    ///     .classify(4)
    ///     .build()
    ///     .unwrap();
    /// let names: Vec<String> = model.param_specs().unwrap().into_iter().map(|p| p.name).collect();
    /// assert_eq!(names[..2], ["body.0.weight", "body.0.bias"]);
    /// assert_eq!(model.trainable_parameters().unwrap(), (16 * 3 * 3 + 16) + (16 * 16 * 3 + 16) + (16 * 4 + 4));
    /// ```
    pub fn conv1d(
        mut self,
        channels: usize,
        kernel: usize,
        padding: ConvPadding,
        activation: Activation,
    ) -> Self {
        self.last_in_body = true;
        self.body.push(GivenBody::Conv1d(Conv1dSpec {
            name: String::new(),
            channels,
            kernel,
            dilation: 1,
            padding,
            activation,
            residual: false,
        }));
        self
    }

    /// Each step's position added to its features (a Transformer's positional
    /// encoding): sines and cosines, or a trained table of `max_len` rows.
    pub fn positions(mut self, encoding: PositionEncoding) -> Self {
        self.last_in_body = true;
        self.body.push(GivenBody::Positions(PositionsSpec {
            name: String::new(),
            encoding,
        }));
        self
    }

    /// `nn.TransformerEncoder` of `layers` `nn.TransformerEncoderLayer`s of `heads`
    /// heads over the features so far, with PyTorch's defaults (feed-forward 2048,
    /// dropout 0.1, ReLU, post-norm) unless [`ModelBuilder::feedforward`],
    /// [`ModelBuilder::encoder_dropout`], [`ModelBuilder::encoder_activation`],
    /// [`ModelBuilder::norm_first`], [`ModelBuilder::causal`] or
    /// [`ModelBuilder::final_norm`] say otherwise.
    ///
    /// ```
    /// use tensorfit_nn::{ModelDescription, PositionEncoding};
    ///
    /// // A Transformer classifier: token embeddings of 32, sinusoidal positions, two
    /// // pre-norm encoder layers of 4 heads, the mean over each sequence's steps.
    /// let model = ModelDescription::builder()
    ///     .embedded_tokens(100, 32)
    ///     .positions(PositionEncoding::Sinusoidal)
    ///     .transformer_encoder(2, 4)
    ///     .feedforward(64)
    ///     .norm_first()
    ///     .final_norm()
    ///     .named("encoder")
    ///     .mean_pool()
    ///     .classify(3)
    ///     .build()
    ///     .unwrap();
    /// let names: Vec<String> = model.param_specs().unwrap().into_iter().map(|p| p.name).collect();
    /// assert_eq!(names[1], "encoder.layers.0.self_attn.in_proj_weight");
    /// ```
    pub fn transformer_encoder(mut self, layers: usize, heads: usize) -> Self {
        self.last_in_body = true;
        let spec = EncoderSpec::new("", layers, heads);
        let p = spec.dropout.p();
        self.body.push(GivenBody::Encoder(spec, p));
        self
    }

    /// The feed-forward width of the encoder added last (`dim_feedforward`).
    pub fn feedforward(mut self, width: usize) -> Self {
        if let Some(GivenBody::Encoder(e, _)) = self.body.last_mut() {
            e.feedforward = width;
        }
        self
    }

    /// The dropout probability of the encoder added last (`dropout`).
    pub fn encoder_dropout(mut self, p: f32) -> Self {
        if let Some(GivenBody::Encoder(_, given)) = self.body.last_mut() {
            *given = p;
        }
        self
    }

    /// The feed-forward activation of the encoder added last (`activation`).
    pub fn encoder_activation(mut self, f: Activation) -> Self {
        if let Some(GivenBody::Encoder(e, _)) = self.body.last_mut() {
            e.activation = f;
        }
        self
    }

    /// LayerNorm before each block of the encoder added last (`norm_first=True`).
    pub fn norm_first(mut self) -> Self {
        if let Some(GivenBody::Encoder(e, _)) = self.body.last_mut() {
            e.norm_first = true;
        }
        self
    }

    /// A LayerNorm after the last layer of the encoder added last
    /// (`nn.TransformerEncoder(..., norm=nn.LayerNorm(F))`).
    pub fn final_norm(mut self) -> Self {
        if let Some(GivenBody::Encoder(e, _)) = self.body.last_mut() {
            e.final_norm = true;
        }
        self
    }

    /// Each step of the encoder added last attends to the steps up to it only.
    pub fn causal(mut self) -> Self {
        if let Some(GivenBody::Encoder(e, _)) = self.body.last_mut() {
            e.causal = true;
        }
        self
    }

    /// The dilation of the convolution added last: it reads every `d`-th step.
    pub fn dilation(mut self, d: usize) -> Self {
        if let Some(GivenBody::Conv1d(c)) = self.body.last_mut() {
            c.dilation = d;
        }
        self
    }
}
