//! The arguments of multi-head scaled dot-product self-attention's ops: the attention
//! weights of the queries over the keys and their gradient, and the weights' mix of the
//! values and its gradient.
//!
//! A file beside `args/mod.rs` per family of ops keeps each under the size limit; the
//! macros come from `mod.rs`.

use super::{arity, arity_optional, Args, OpInputs};

signature! {
    /// [`Op::AttentionScores`](crate::Op::AttentionScores): the queries `q` and keys `k`
    /// `[T, B, D]`, and optionally each sequence's length `lengths` `[B]`.
    AttentionScoresInputs { q, k; lengths }
    /// [`Op::AttentionScores`](crate::Op::AttentionScores): `probs` `[B, heads, T, T]`.
    -> AttentionScoresOutputs { probs }
}

signature! {
    /// [`Op::AttentionScoresBackward`](crate::Op::AttentionScoresBackward): the forward's
    /// `q`, `k` `[T, B, D]`, its `probs` and their gradient `dprobs` `[B, heads, T, T]`.
    AttentionScoresBackwardInputs { q, k, probs, dprobs }
    /// [`Op::AttentionScoresBackward`](crate::Op::AttentionScoresBackward): `dq`, `dk`
    /// `[T, B, D]`.
    -> AttentionScoresBackwardOutputs { dq, dk }
}

signature! {
    /// [`Op::AttentionMix`](crate::Op::AttentionMix): `probs` `[B, heads, T, T]`, the
    /// values `v` `[T, B, D]`.
    AttentionMixInputs { probs, v }
    /// [`Op::AttentionMix`](crate::Op::AttentionMix): `out` `[T, B, D]`.
    -> AttentionMixOutputs { out }
}

signature! {
    /// [`Op::AttentionMixBackward`](crate::Op::AttentionMixBackward): the forward's
    /// `probs` `[B, heads, T, T]` and `v` `[T, B, D]`, and `out`'s gradient `dout`
    /// `[T, B, D]`.
    AttentionMixBackwardInputs { probs, v, dout }
    /// [`Op::AttentionMixBackward`](crate::Op::AttentionMixBackward): `dprobs`
    /// `[B, heads, T, T]`, `dv` `[T, B, D]`.
    -> AttentionMixBackwardOutputs { dprobs, dv }
}
