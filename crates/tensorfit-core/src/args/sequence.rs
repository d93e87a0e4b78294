//! The time ops' arguments: a step out of a sequence and back, a sequence reversed, the
//! features of two tensors side by side, and the reductions over the steps.
//!
//! A file beside `args/mod.rs` per family of ops keeps each under the size limit; the
//! macros come from `mod.rs`.

use super::{arity, arity_optional, Args, OpInputs};

signature! {
    /// [`Op::SliceTime`](crate::Op::SliceTime): `x` `[T, B, F]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    SliceTimeInputs { x; lengths }
    /// [`Op::SliceTime`](crate::Op::SliceTime): `out` `[B, F]`.
    -> SliceTimeOutputs { out }
}

signature! {
    /// [`Op::ScatterTime`](crate::Op::ScatterTime): `x` `[B, F]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    ScatterTimeInputs { x; lengths }
    /// [`Op::ScatterTime`](crate::Op::ScatterTime): `out` `[steps, B, F]`.
    -> ScatterTimeOutputs { out }
}

signature! {
    /// [`Op::ReverseTime`](crate::Op::ReverseTime): `x` `[T, B, F]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    ReverseTimeInputs { x; lengths }
    /// [`Op::ReverseTime`](crate::Op::ReverseTime): `y` `[T, B, F]`.
    -> ReverseTimeOutputs { y }
}

signature! {
    /// [`Op::ConcatFeatures`](crate::Op::ConcatFeatures): `a` `[.., Fa]`, `b` `[.., Fb]`.
    ConcatFeaturesInputs { a, b }
    /// [`Op::ConcatFeatures`](crate::Op::ConcatFeatures): `out` `[.., Fa + Fb]`.
    -> ConcatFeaturesOutputs { out }
}

signature! {
    /// [`Op::SliceFeatures`](crate::Op::SliceFeatures): `x` `[.., F]`.
    SliceFeaturesInputs { x }
    /// [`Op::SliceFeatures`](crate::Op::SliceFeatures): `out` `[.., width]`.
    -> SliceFeaturesOutputs { out }
}

signature! {
    /// [`Op::MeanTime`](crate::Op::MeanTime): `x` `[T, B, F]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    MeanTimeInputs { x; lengths }
    /// [`Op::MeanTime`](crate::Op::MeanTime): `out` `[B, F]`.
    -> MeanTimeOutputs { out }
}

signature! {
    /// [`Op::MeanTimeBackward`](crate::Op::MeanTimeBackward): `dout` `[B, F]`, and the
    /// forward's `lengths` `[B]` if it had them.
    MeanTimeBackwardInputs { dout; lengths }
    /// [`Op::MeanTimeBackward`](crate::Op::MeanTimeBackward): `dx` `[steps, B, F]`.
    -> MeanTimeBackwardOutputs { dx }
}

signature! {
    /// [`Op::MaxTime`](crate::Op::MaxTime): `x` `[T, B, F]`, and optionally each
    /// sequence's length `lengths` `[B]`.
    MaxTimeInputs { x; lengths }
    /// [`Op::MaxTime`](crate::Op::MaxTime): `out` `[B, F]` and the step `at` `[B, F]`
    /// each maximum was found at.
    -> MaxTimeOutputs { out, at }
}

signature! {
    /// [`Op::MaxTimeBackward`](crate::Op::MaxTimeBackward): `dout` `[B, F]` and the
    /// forward's `at` `[B, F]`.
    MaxTimeBackwardInputs { dout, at }
    /// [`Op::MaxTimeBackward`](crate::Op::MaxTimeBackward): `dx` `[steps, B, F]`.
    -> MaxTimeBackwardOutputs { dx }
}
