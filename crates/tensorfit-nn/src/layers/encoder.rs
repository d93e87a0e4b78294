//! [`Encoder`]: PyTorch's `nn.TransformerEncoder` of `nn.TransformerEncoderLayer`s over
//! the steps (time-major `[T, B, F]`, PyTorch's `batch_first=False`), with its tensors'
//! names, shapes and initialisation.
//!
//! Each layer is self-attention then a feed-forward block, each added to its input and
//! normalised (after the addition by default, before the block with `norm_first`):
//! - attention: `qkv = x · in_proj_weightᵀ + in_proj_bias`, split into `q`, `k`, `v`
//!   (`Op::SliceFeatures`); `Op::AttentionScores` gives every head's softmax weights
//!   `[B, heads, T, T]` (keys past a sequence's end masked, PyTorch's
//!   `src_key_padding_mask`; with `causal` the steps after the query too), which drop out
//!   in training; `Op::AttentionMix` sums the values by them; `out_proj` maps back;
//! - feed-forward: `linear2(dropout(activation(linear1(x))))`;
//! - each block's output drops out before it is added (`dropout1`, `dropout2`);
//!
//! and with `final_norm`, a LayerNorm `{name}.norm` after the last layer.
//!
//! The backward comes from the ops' autodiff.

use tensorfit_core::args::{AttentionMixInputs, AttentionScoresInputs, SliceFeaturesInputs};
use tensorfit_core::{Activation, Graph, Op, Result, Shape, TensorId};

use super::dropout::{body_site, dropout};
use super::head::residual_add;
use super::layer::{wrong_tensors, Context, Layer, LayerTraits};
use super::{
    BodyPartTensors, Dense, Init, LayerNorm, LinearTensors, ParamSpec, StateSlot, Tensors,
};
use crate::description::EncoderSpec;

/// A stack of encoder layers reading `features` per step, the body's layer `index` (its
/// dropout sites), registered as `spec.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoder {
    pub spec: EncoderSpec,
    pub features: usize,
    pub index: usize,
}

/// One encoder layer's tensors, in the order of PyTorch's `state_dict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderLayerTensors<T> {
    /// `self_attn.in_proj_weight` `[3F, F]` and `in_proj_bias` `[3F]`.
    pub in_proj: LinearTensors<T>,
    /// `self_attn.out_proj.weight` `[F, F]` and `.bias` `[F]`.
    pub out_proj: LinearTensors<T>,
    /// `linear1` `[feedforward, F]`, `linear2` `[F, feedforward]`.
    pub linear1: LinearTensors<T>,
    pub linear2: LinearTensors<T>,
    /// `norm1`, `norm2`: LayerNorm weight and bias `[F]`.
    pub norm1: LinearTensors<T>,
    pub norm2: LinearTensors<T>,
}

impl<T> EncoderLayerTensors<T> {
    pub fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> EncoderLayerTensors<U> {
        EncoderLayerTensors {
            in_proj: self.in_proj.map(&mut f),
            out_proj: self.out_proj.map(&mut f),
            linear1: self.linear1.map(&mut f),
            linear2: self.linear2.map(&mut f),
            norm1: self.norm1.map(&mut f),
            norm2: self.norm2.map(&mut f),
        }
    }
}

impl<T> Tensors<T> for EncoderLayerTensors<T> {
    fn items(&self) -> Vec<&T> {
        let mut v = self.in_proj.items();
        v.extend(self.out_proj.items());
        v.extend(self.linear1.items());
        v.extend(self.linear2.items());
        v.extend(self.norm1.items());
        v.extend(self.norm2.items());
        v
    }
}

/// Tensors per encoder layer.
const PER_LAYER: usize = 12;

impl Encoder {
    /// The final LayerNorm's `{name}.norm.weight` and `.bias` `[F]` (ones and zeros), if
    /// the encoder has one.
    pub fn final_norm(&self) -> Option<LinearTensors<ParamSpec>> {
        let name = format!("{}.norm", self.spec.name);
        let norm = LayerNorm {
            name,
            features: self.features,
        };
        self.spec.final_norm.then(|| norm.specs())
    }

    /// The table, layer by layer: PyTorch's initialisation (`in_proj_weight` Xavier
    /// uniform, the attention's biases zero, the linear maps' default, norms 1 and 0).
    pub fn specs(&self) -> Vec<EncoderLayerTensors<ParamSpec>> {
        let (f, ff) = (self.features, self.spec.feedforward);
        let xavier = Init::Uniform {
            bound: (6.0 / (f + 3 * f) as f32).sqrt(),
        };
        (0..self.spec.layers)
            .map(|k| {
                let at = |what: &str| format!("{}.layers.{k}.{what}", self.spec.name);
                let t = |what: &str, shape: &[usize], init| {
                    ParamSpec::trainable(at(what), Shape(shape.to_vec()), init)
                };
                let linear = |what: &str, out: usize, inp: usize| LinearTensors {
                    weight: t(&format!("{what}.weight"), &[out, inp], Init::fan(inp)),
                    bias: t(&format!("{what}.bias"), &[out], Init::fan(inp)),
                };
                let norm = |what: &str| {
                    LayerNorm {
                        name: at(what),
                        features: f,
                    }
                    .specs()
                };
                EncoderLayerTensors {
                    in_proj: LinearTensors {
                        weight: t("self_attn.in_proj_weight", &[3 * f, f], xavier),
                        bias: t("self_attn.in_proj_bias", &[3 * f], Init::Constant(0.0)),
                    },
                    out_proj: LinearTensors {
                        weight: t("self_attn.out_proj.weight", &[f, f], Init::fan(f)),
                        bias: t("self_attn.out_proj.bias", &[f], Init::Constant(0.0)),
                    },
                    linear1: linear("linear1", ff, f),
                    linear2: linear("linear2", f, ff),
                    norm1: norm("norm1"),
                    norm2: norm("norm2"),
                }
            })
            .collect()
    }

    /// Forward FLOPs over `steps` steps of `batch` sequences: the four projections and
    /// the feed-forward maps per step, and the scores and the mix over every pair of
    /// steps.
    pub fn forward_flops(&self, batch: usize, steps: usize) -> f64 {
        let (f, ff) = (self.features as f64, self.spec.feedforward as f64);
        let rows = (batch * steps) as f64;
        let per_layer = 2.0 * rows * (4.0 * f * f + 2.0 * f * ff) + 4.0 * rows * steps as f64 * f;
        self.spec.layers as f64 * per_layer
    }

    /// The dropout of `x` at this layer's site `k` (in training; `x` itself otherwise).
    fn drop(
        &self,
        g: &mut Graph,
        name: &str,
        x: TensorId,
        cx: &Context,
        k: u32,
    ) -> Result<TensorId> {
        let site = body_site(self.index, k);
        dropout(g, name, x, (self.spec.dropout, cx.dropout_key), site, 0)
    }

    /// Self-attention over `x`, layer `l`'s tensors `t`.
    fn attention(
        &self,
        g: &mut Graph,
        (prefix, l): (&str, usize),
        x: TensorId,
        t: &EncoderLayerTensors<TensorId>,
        cx: &Context,
    ) -> Result<TensorId> {
        let f = self.features;
        let linear = |name: String, output| Dense {
            name,
            input: f,
            output,
            activation: Activation::Identity,
        };
        let qkv = linear(format!("{prefix}.self_attn.in_proj"), 3 * f).forward(g, x, &t.in_proj)?;
        let mut part = |what: &str, start| -> Result<TensorId> {
            let op = Op::SliceFeatures { start, width: f };
            let inputs = SliceFeaturesInputs { x: qkv };
            Ok(g.apply(&format!("{prefix}.self_attn.{what}"), op, inputs)?
                .out)
        };
        let (q, k, v) = (part("q", 0)?, part("k", f)?, part("v", 2 * f)?);
        let heads = self.spec.heads;
        let scores = Op::AttentionScores {
            heads,
            causal: self.spec.causal,
        };
        let inputs = AttentionScoresInputs {
            q,
            k,
            lengths: cx.lengths,
        };
        let probs = g
            .apply(&format!("{prefix}.self_attn.scores"), scores, inputs)?
            .probs;
        let site = 4 * l as u32;
        let probs = self.drop(g, &format!("{prefix}.self_attn.dropout"), probs, cx, site)?;
        let inputs = AttentionMixInputs { probs, v };
        let mix = Op::AttentionMix { heads };
        let o = g
            .apply(&format!("{prefix}.self_attn.mix"), mix, inputs)?
            .out;
        linear(format!("{prefix}.self_attn.out_proj"), f).forward(g, o, &t.out_proj)
    }

    /// The feed-forward block over `x`.
    fn feed_forward(
        &self,
        g: &mut Graph,
        (prefix, l): (&str, usize),
        x: TensorId,
        t: &EncoderLayerTensors<TensorId>,
        cx: &Context,
    ) -> Result<TensorId> {
        let (f, ff) = (self.features, self.spec.feedforward);
        let linear1 = Dense {
            name: format!("{prefix}.linear1"),
            input: f,
            output: ff,
            activation: self.spec.activation,
        };
        let h = linear1.forward(g, x, &t.linear1)?;
        let h = self.drop(g, &format!("{prefix}.dropout"), h, cx, 4 * l as u32 + 1)?;
        let linear2 = Dense {
            name: format!("{prefix}.linear2"),
            input: ff,
            output: f,
            activation: Activation::Identity,
        };
        linear2.forward(g, h, &t.linear2)
    }
}

/// `nn.LayerNorm(F)` of `x` with `t`'s weight and bias, registered as `name`.
fn norm(
    g: &mut Graph,
    name: String,
    x: TensorId,
    t: &LinearTensors<TensorId>,
    cx: &mut Context,
) -> Result<TensorId> {
    let features = g.shape(x).0.last().copied().unwrap_or(0);
    LayerNorm { name, features }.forward(g, x, &[t.weight, t.bias], cx)
}

impl Layer for Encoder {
    fn kind(&self) -> &'static str {
        "transformer_encoder"
    }

    fn name(&self) -> &str {
        &self.spec.name
    }

    fn table(&self) -> Vec<ParamSpec> {
        BodyPartTensors::Encoder(self.specs(), self.final_norm()).to_vec()
    }

    fn output_features(&self, _input: usize) -> usize {
        self.features
    }

    /// Every step attends to every step of its sequence (up to it, causal): the layer
    /// reads each sequence whole.
    fn traits(&self) -> LayerTraits {
        LayerTraits {
            mixes_rows: false,
            mixes_steps: true,
            carries_state: false,
            splits_in_time: false,
            random: self.spec.dropout.is_active(),
        }
    }

    fn state_slots(&self) -> Vec<StateSlot> {
        Vec::new()
    }

    fn forward(
        &self,
        g: &mut Graph,
        mut x: TensorId,
        tensors: &[TensorId],
        cx: &mut Context,
    ) -> Result<TensorId> {
        let want = self.table().len();
        if tensors.len() != want {
            return Err(wrong_tensors(self, want, tensors.len()));
        }
        let (layers, last) = tensors.split_at(PER_LAYER * self.spec.layers);
        for (l, t) in layers.chunks_exact(PER_LAYER).enumerate() {
            let pair = |i: usize| LinearTensors {
                weight: t[i],
                bias: t[i + 1],
            };
            let t = EncoderLayerTensors {
                in_proj: pair(0),
                out_proj: pair(2),
                linear1: pair(4),
                linear2: pair(6),
                norm1: pair(8),
                norm2: pair(10),
            };
            let prefix = format!("{}.layers.{l}", self.spec.name);
            let p = prefix.as_str();
            let site = |k: u32| 4 * l as u32 + k;
            x = match self.spec.norm_first {
                // x + drop(attn(norm1(x))), then x + drop(ff(norm2(x))).
                true => {
                    let n = norm(g, format!("{p}.norm1"), x, &t.norm1, cx)?;
                    let a = self.attention(g, (p, l), n, &t, cx)?;
                    let a = self.drop(g, &format!("{p}.dropout1"), a, cx, site(2))?;
                    let x = residual_add(g, &format!("{p}.self_attn"), (x, a))?;
                    let n = norm(g, format!("{p}.norm2"), x, &t.norm2, cx)?;
                    let h = self.feed_forward(g, (p, l), n, &t, cx)?;
                    let h = self.drop(g, &format!("{p}.dropout2"), h, cx, site(3))?;
                    residual_add(g, &format!("{p}.feed_forward"), (x, h))?
                }
                // norm1(x + drop(attn(x))), then norm2(x + drop(ff(x))).
                false => {
                    let a = self.attention(g, (p, l), x, &t, cx)?;
                    let a = self.drop(g, &format!("{p}.dropout1"), a, cx, site(2))?;
                    let s = residual_add(g, &format!("{p}.self_attn"), (x, a))?;
                    let x = norm(g, format!("{p}.norm1"), s, &t.norm1, cx)?;
                    let h = self.feed_forward(g, (p, l), x, &t, cx)?;
                    let h = self.drop(g, &format!("{p}.dropout2"), h, cx, site(3))?;
                    let s = residual_add(g, &format!("{p}.feed_forward"), (x, h))?;
                    norm(g, format!("{p}.norm2"), s, &t.norm2, cx)?
                }
            };
        }
        match last {
            &[weight, bias] => {
                let t = LinearTensors { weight, bias };
                norm(g, format!("{}.norm", self.spec.name), x, &t, cx)
            }
            _ => Ok(x),
        }
    }
}
