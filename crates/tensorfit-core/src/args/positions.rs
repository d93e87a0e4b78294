//! The position ops' arguments: a table of positions added to each step of a sequence,
//! its gradient, and the sinusoidal table.
//!
//! A file beside `args/mod.rs` per family of ops keeps each under the size limit; the
//! macros come from `mod.rs`.

use std::marker::PhantomData;

use super::{arity, Args, OpInputs};

signature! {
    /// [`Op::AddTimeRows`](crate::Op::AddTimeRows): `x` `[T, B, D]`, `table` `[N, D]`
    /// (`N >= T`).
    AddTimeRowsInputs { x, table }
    /// [`Op::AddTimeRows`](crate::Op::AddTimeRows): `out` `[T, B, D]`.
    -> AddTimeRowsOutputs { out }
}

signature! {
    /// [`Op::SumBatchToRows`](crate::Op::SumBatchToRows): `dout` `[T, B, D]`.
    SumBatchToRowsInputs { dout }
    /// [`Op::SumBatchToRows`](crate::Op::SumBatchToRows): `dtable` `[rows, D]`.
    -> SumBatchToRowsOutputs { dtable }
}

/// [`Op::Sinusoids`](crate::Op::Sinusoids) has no inputs (as [`super::FillInputs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinusoidsInputs<T>(pub PhantomData<T>);

impl<T> Default for SinusoidsInputs<T> {
    fn default() -> Self {
        SinusoidsInputs(PhantomData)
    }
}

impl<T> Args<T> for SinusoidsInputs<T> {
    const NAMES: &'static [&'static str] = &[];

    fn from_vec(what: &str, items: Vec<T>) -> Result<Self, String> {
        let [] = arity(what, items)?;
        Ok(SinusoidsInputs(PhantomData))
    }

    fn into_vec(self) -> Vec<T> {
        Vec::new()
    }
}

args_struct! {
    /// [`Op::Sinusoids`](crate::Op::Sinusoids): `table` `[steps, dim]`.
    SinusoidsOutputs { table }
}

impl<T> OpInputs<T> for SinusoidsInputs<T> {
    type Outputs = SinusoidsOutputs<T>;
}
