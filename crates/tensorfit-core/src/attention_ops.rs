//! The ops of multi-head scaled dot-product self-attention with PyTorch's
//! `nn.MultiheadAttention` semantics: [`Op::AttentionScores`], the weights of each query
//! over the keys, and its gradient [`Op::AttentionScoresBackward`]; [`Op::AttentionMix`],
//! the weights applied to the values, and its gradient [`Op::AttentionMixBackward`]. Their
//! sizes and mask ([`AttentionDims`]), shape rules, gradients and kernels' methods
//! ([`AttentionKernels`]); kept beside `op.rs` so that file stays small.
//!
//! A layer is built from them as PyTorch computes one: `qkv = x · in_proj_weightᵀ +
//! in_proj_bias`, `q`, `k`, `v` its three slices of features, `p = AttentionScores(q, k,
//! lengths)`, dropout on `p` in training, `o = AttentionMix(p, v)`, `y = o · out_projᵀ +
//! bias`. Sequences are time-major `[T, B, D]`, `D = heads·Dh`, head `h` owning features
//! `h·Dh..(h+1)·Dh` (PyTorch's split); the weights are `[B, heads, T, T]`, query `i` then
//! key `j`. Seen per head, the `[T, B, D]` tensors are `[T, B·heads, Dh]`: the
//! `(b, h)` pairs of a step lie one after the other, `Dh` features each.

use crate::args::*;
use crate::error::Result;
use crate::graph::{Graph, TensorId};
use crate::kernels::KernelTypes;
use crate::op::Op;
use crate::op_shapes::named;
use crate::seq_lengths::check_shape;
use crate::shape::{rank, same, Shape};

/// The sizes of one attention call: `steps` (T), `batch` (B), `heads` and each head's
/// features `head_dim` (Dh).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionDims {
    pub steps: usize,
    pub batch: usize,
    pub heads: usize,
    pub head_dim: usize,
}

impl AttentionDims {
    /// The sizes of `heads` heads over the sequence `x` `[T, B, D]`: an error unless `x`
    /// has rank 3, `heads ≥ 1` and `D` is a positive multiple of `heads`.
    pub fn of(heads: usize, x: &Shape) -> Result<Self, String> {
        rank(x, 3, "the sequence")?;
        let features = x.dim(2);
        if heads == 0 {
            return Err("attention needs at least one head (heads 0)".to_string());
        }
        if features == 0 || features % heads != 0 {
            return Err(format!(
                "{features} features of {x} are not a positive multiple of {heads} heads"
            ));
        }
        Ok(AttentionDims {
            steps: x.dim(0),
            batch: x.dim(1),
            heads,
            head_dim: features / heads,
        })
    }

    /// `D = heads·Dh`.
    pub fn features(&self) -> usize {
        self.heads * self.head_dim
    }

    /// The `(b, h)` pairs, `B·heads`: pair `b·heads + h` owns features
    /// `p·Dh..(p+1)·Dh` of each step's `[B·D]` row, and `probs`'s `[T, T]` block `p`.
    pub fn pairs(&self) -> usize {
        self.batch.saturating_mul(self.heads)
    }

    /// `[T, B, D]`: the queries', keys', values' and output's shape.
    pub fn sequence(&self) -> Shape {
        Shape::from([self.steps, self.batch, self.features()])
    }

    /// `[B, heads, T, T]`: the weights' shape.
    pub fn probs(&self) -> Shape {
        Shape::from([self.batch, self.heads, self.steps, self.steps])
    }

    /// `1 / sqrt(Dh)`, computed in f64 as PyTorch's `1 / math.sqrt(E)`: the one
    /// definition every backend's kernels are handed.
    pub fn scale(&self) -> f32 {
        (1.0 / (self.head_dim as f64).sqrt()) as f32
    }

    /// How many keys query `query` of a row of `length` steps attends to: the keys
    /// `0..keys` (the unmasked ones always come first), `min(length, T)`, and at most
    /// `query + 1` when `causal`. 0 only for an empty row.
    pub fn keys(&self, causal: bool, query: usize, length: usize) -> usize {
        let keys = length.min(self.steps);
        if causal {
            keys.min(query.saturating_add(1))
        } else {
            keys
        }
    }
}

/// The output shapes of the four ops, their inputs and heads checked.
pub(crate) fn attention_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match *op {
        Op::AttentionScores { heads, .. } => {
            let AttentionScoresInputs { q, k, lengths } = named(list)?;
            let d = AttentionDims::of(heads, q)?;
            same(k, q, "k")?;
            check_shape(lengths, d.batch)?;
            Ok(AttentionScoresOutputs { probs: d.probs() }.into_vec())
        }
        Op::AttentionScoresBackward { heads, .. } => {
            let AttentionScoresBackwardInputs {
                q,
                k,
                probs,
                dprobs,
            } = named(list)?;
            let d = AttentionDims::of(heads, q)?;
            same(k, q, "k")?;
            same(probs, &d.probs(), "probs")?;
            same(dprobs, &d.probs(), "dprobs")?;
            let (dq, dk) = (q.clone(), q.clone());
            Ok(AttentionScoresBackwardOutputs { dq, dk }.into_vec())
        }
        Op::AttentionMix { heads } => {
            let AttentionMixInputs { probs, v } = named(list)?;
            let d = AttentionDims::of(heads, v)?;
            same(probs, &d.probs(), "probs")?;
            Ok(AttentionMixOutputs { out: v.clone() }.into_vec())
        }
        Op::AttentionMixBackward { heads } => {
            let AttentionMixBackwardInputs { probs, v, dout } = named(list)?;
            let d = AttentionDims::of(heads, v)?;
            same(probs, &d.probs(), "probs")?;
            same(dout, v, "dout")?;
            let outputs = AttentionMixBackwardOutputs {
                dprobs: d.probs(),
                dv: v.clone(),
            };
            Ok(outputs.into_vec())
        }
        ref other => Err(format!("{} is not an attention op", other.name())),
    }
}

/// The inputs' gradients of an [`Op::AttentionScores`] node of `heads` (and `causal`)
/// with inputs `x`, output `probs` and its gradient `dprobs`: both of
/// [`Op::AttentionScoresBackward`]'s (the lengths get none).
pub(crate) fn attention_scores_vjp(
    graph: &mut Graph,
    name: &str,
    (heads, causal): (usize, bool),
    x: AttentionScoresInputs<TensorId>,
    (probs, dprobs): (TensorId, TensorId),
) -> Result<Vec<Option<TensorId>>> {
    let op = Op::AttentionScoresBackward { heads, causal };
    let (q, k) = (x.q, x.k);
    let inputs = AttentionScoresBackwardInputs {
        q,
        k,
        probs,
        dprobs,
    };
    let d = graph.apply(name, op, inputs)?;
    let grads = AttentionScoresInputs {
        q: Some(d.dq),
        k: Some(d.dk),
        // The lengths are data: no gradient.
        lengths: x.lengths.map(|_| None),
    };
    Ok(grads.into_vec())
}

/// The inputs' gradients of an [`Op::AttentionMix`] node of `heads` with inputs `x`,
/// given `out`'s gradient `dout`: both of [`Op::AttentionMixBackward`]'s.
pub(crate) fn attention_mix_vjp(
    graph: &mut Graph,
    name: &str,
    heads: usize,
    x: AttentionMixInputs<TensorId>,
    dout: TensorId,
) -> Result<Vec<Option<TensorId>>> {
    let (probs, v) = (x.probs, x.v);
    let inputs = AttentionMixBackwardInputs { probs, v, dout };
    let d = graph.apply(name, Op::AttentionMixBackward { heads }, inputs)?;
    let grads = AttentionMixInputs {
        probs: Some(d.dprobs),
        v: Some(d.dv),
    };
    Ok(grads.into_vec())
}

/// The attention ops' kernels (a supertrait of [`crate::OpKernels`]), which each backend
/// implements in its own `attention` file. `d` are the call's sizes (from its `[T, B, D]`
/// input and the op's `heads`), `causal` the op's attribute.
pub trait AttentionKernels: KernelTypes {
    fn attention_scores(
        &mut self,
        d: AttentionDims,
        causal: bool,
        i: AttentionScoresInputs<Self::In>,
        o: AttentionScoresOutputs<Self::Out>,
    ) -> Result<()>;

    fn attention_scores_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionScoresBackwardInputs<Self::In>,
        o: AttentionScoresBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn attention_mix(
        &mut self,
        d: AttentionDims,
        i: AttentionMixInputs<Self::In>,
        o: AttentionMixOutputs<Self::Out>,
    ) -> Result<()>;

    fn attention_mix_backward(
        &mut self,
        d: AttentionDims,
        i: AttentionMixBackwardInputs<Self::In>,
        o: AttentionMixBackwardOutputs<Self::Out>,
    ) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::graph::Phase;
    use crate::shape::shapes_of as shapes;

    fn scores(heads: usize, causal: bool) -> Op {
        Op::AttentionScores { heads, causal }
    }

    #[test]
    fn the_weights_are_one_t_by_t_block_per_head_of_each_row() {
        let probs = vec![Shape::from([3, 2, 5, 5])];
        let seq: &[usize] = &[5, 3, 8];
        assert_eq!(shapes(scores(2, false), &[seq, seq]).unwrap(), probs);
        assert_eq!(shapes(scores(2, true), &[seq, seq, &[3]]).unwrap(), probs);
        let back = Op::AttentionScoresBackward {
            heads: 2,
            causal: true,
        };
        let p: &[usize] = &[3, 2, 5, 5];
        let dqk = vec![Shape::from(seq), Shape::from(seq)];
        assert_eq!(shapes(back.clone(), &[seq, seq, p, p]).unwrap(), dqk);
        let mix = Op::AttentionMix { heads: 2 };
        assert_eq!(shapes(mix.clone(), &[p, seq]).unwrap(), [Shape::from(seq)]);
        let mix_back = Op::AttentionMixBackward { heads: 2 };
        let grads = vec![Shape::from(p), Shape::from(seq)];
        assert_eq!(shapes(mix_back.clone(), &[p, seq, seq]).unwrap(), grads);
        // One step, one head of one feature: T = 1 is a [1, 1] block.
        let one: &[usize] = &[1, 1, 1];
        let out = shapes(scores(1, false), &[one, one, &[1]]).unwrap();
        assert_eq!(out, [Shape::from([1, 1, 1, 1])]);
        // Mismatches.
        assert!(shapes(scores(2, false), &[seq, &[5, 3, 6]]).is_err());
        assert!(shapes(scores(2, false), &[seq, seq, &[2]]).is_err());
        assert!(shapes(back.clone(), &[seq, seq, p, &[3, 2, 5, 4]]).is_err());
        assert!(shapes(back, &[seq, seq, p]).is_err());
        assert!(shapes(mix.clone(), &[&[3, 1, 5, 5], seq]).is_err());
        assert!(shapes(mix, &[p]).is_err());
        assert!(shapes(mix_back, &[p, seq, &[5, 3, 4]]).is_err());
    }

    #[test]
    fn heads_must_divide_a_positive_number_of_features() {
        let seq: &[usize] = &[5, 3, 8];
        let err = shapes(scores(0, false), &[seq, seq]).unwrap_err();
        assert!(err.contains("heads 0"), "{err}");
        let err = shapes(scores(3, false), &[seq, seq]).unwrap_err();
        assert!(
            err.contains("8 features") && err.contains("3 heads"),
            "{err}"
        );
        let none: &[usize] = &[5, 3, 0];
        assert!(shapes(scores(1, false), &[none, none]).is_err());
        let flat: &[usize] = &[5, 8];
        assert!(shapes(Op::AttentionMix { heads: 1 }, &[&[1, 1, 5, 5], flat]).is_err());
        let d = AttentionDims::of(4, &Shape::from([7, 2, 12])).unwrap();
        assert_eq!((d.head_dim, d.features(), d.pairs()), (3, 12, 8));
        assert_eq!(d.probs(), Shape::from([2, 4, 7, 7]));
        assert_eq!(
            AttentionDims::of(4, &Shape::from([7, 2, 256]))
                .unwrap()
                .scale(),
            0.125
        );
    }

    #[test]
    fn a_query_attends_to_the_valid_keys_before_it_when_causal() {
        let d = AttentionDims::of(1, &Shape::from([5, 1, 2])).unwrap();
        let keys = |causal, len| (0..5).map(|i| d.keys(causal, i, len)).collect::<Vec<_>>();
        assert_eq!(keys(false, 5), [5; 5]);
        assert_eq!(keys(false, 3), [3; 5]);
        assert_eq!(keys(true, 5), [1, 2, 3, 4, 5]);
        assert_eq!(keys(true, 3), [1, 2, 3, 3, 3]);
        assert_eq!(keys(true, 0), [0; 5]);
        assert_eq!(keys(false, 9), [5; 5]);
    }

    #[test]
    fn each_op_is_differentiated_by_its_backward_op_and_the_lengths_get_nothing() {
        let mut g = Graph::new();
        let q = g.input("q", [4, 2, 6]);
        let k = g.input("k", [4, 2, 6]);
        let v = g.input("v", [4, 2, 6]);
        let l = g.input("lengths", [2]);
        let op = scores(3, true);
        let inputs = AttentionScoresInputs {
            q,
            k,
            lengths: Some(l),
        };
        let probs = g.apply("scores", op, inputs).unwrap().probs;
        let mix = Op::AttentionMix { heads: 3 };
        let out = g
            .apply("mix", mix, AttentionMixInputs { probs, v })
            .unwrap()
            .out;
        let seed = g.input("seed", [4, 2, 6]);
        let grads = crate::autodiff::backward(&mut g, &[(out, seed)], &[q, k, v, l]).unwrap();
        let shape_of = |t: Option<TensorId>| t.map(|t| g.shape(t).clone());
        for grad in &grads[..3] {
            assert_eq!(shape_of(*grad), Some([4, 2, 6].into()));
        }
        assert_eq!(grads[3], None);
        let backward: Vec<&crate::graph::Node> = g
            .nodes()
            .iter()
            .filter(|n| n.phase == Phase::Backward)
            .collect();
        let mix_back = backward
            .iter()
            .find(|n| n.op == Op::AttentionMixBackward { heads: 3 })
            .unwrap();
        assert_eq!(mix_back.inputs, vec![probs, v, seed]);
        let scores_back = backward
            .iter()
            .find(|n| {
                n.op == Op::AttentionScoresBackward {
                    heads: 3,
                    causal: true,
                }
            })
            .unwrap();
        assert_eq!(scores_back.inputs[..3], [q, k, probs]);
        assert_eq!(scores_back.inputs[3], mix_back.outputs[0]);
    }
}
