//! The arguments of the ops a 1-D convolution over time is built from: the columns of
//! its taps and their gradient, and the reshape of its weight.
//!
//! A file beside `args/mod.rs` per family of ops keeps each under the size limit; the
//! macros come from `mod.rs`.

use super::{arity, arity_optional, Args, OpInputs};

signature! {
    /// [`Op::UnfoldTime`](crate::Op::UnfoldTime): `x` `[T, B, C]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    UnfoldTimeInputs { x; lengths }
    /// [`Op::UnfoldTime`](crate::Op::UnfoldTime): `cols` `[T, B, C·K]`.
    -> UnfoldTimeOutputs { cols }
}

signature! {
    /// [`Op::FoldTime`](crate::Op::FoldTime): `dcols` `[T, B, C·K]`, and the forward's
    /// `lengths` `[B]` if it had them.
    FoldTimeInputs { dcols; lengths }
    /// [`Op::FoldTime`](crate::Op::FoldTime): `dx` `[T, B, C]`.
    -> FoldTimeOutputs { dx }
}

signature! {
    /// [`Op::Reshape`](crate::Op::Reshape): `x` of any shape.
    ReshapeInputs { x }
    /// [`Op::Reshape`](crate::Op::Reshape): `out` of the op's `shape`.
    -> ReshapeOutputs { out }
}
