//! Per-sequence lengths of a padded batch: the one reading of a length stored as `f32`
//! (as labels are), the one check of a batch of lengths, and the rules every backend's
//! masked recurrent kernels share.
//!
//! A recurrent op given `lengths` `[B]` treats row `b` as a sequence of `L = lengths[b]`
//! steps padded to `T` (PyTorch's `pack_padded_sequence`). The kernels keep their
//! per-step passes, skipping the rows past their end ([`past_end`]):
//! - forward, step `t ≥ L`: the cell state carries (`c_t = c_{t-1}`), `y[t, b] = 0` and
//!   the stored gates are zero. `h_n[b] = y[L - 1, b]` (step [`last_step`]; `h0` for
//!   `L = 0`): the CPU and CUDA gather it after the loop, wgpu writes it at that step.
//!   `c_n` needs nothing more: the carried state is the row's own.
//! - backward, step `t ≥ L`: `dgates[t, b] = 0` and both running gradients carry. The
//!   running `dh` of a row inside its sequence is read, then zeroed, and the step's GEMM
//!   *adds* `dgates[t] · w_hh` to it: a padded row keeps `dh_n` untouched until its last
//!   step reads it, and `dh0 = dh_n` for `L = 0`, with no extra pass.
//!
//! The CPU kernels check every length with [`check_lengths`] and return
//! [`Error::Input`] naming the row. A GPU kernel cannot return an error from a launch: it
//! reads a length as it is, so the host must check the lengths it uploads (the data
//! pipeline, once it passes them). There, a length above `T` runs every step and leaves
//! `h_n` at `h0`, `SliceTime` reads zeros for it, `ReverseTime` passes its row
//! through unchanged (as an empty row's), and `MeanTime`, `MaxTime` and `MeanTimeBackward`
//! pool it as an empty row.

use crate::error::{Error, Result};
use crate::op::same;
use crate::shape::Shape;

/// Whether step `t` lies past the end of a sequence of `length` steps.
pub fn past_end(t: usize, length: f32) -> bool {
    t as f32 >= length
}

/// The step a sequence of `length` steps ends at, `length - 1`; none for an empty one.
pub fn last_step(length: f32) -> Option<usize> {
    (length >= 1.0).then(|| length as usize - 1)
}

/// The step of a sequence of `length` steps that a read of step `t` finds: `t`, or its
/// last step if it ends before `t`; none for an empty sequence (`Op::SliceTime` and
/// `Op::ScatterTime` with lengths).
pub fn step_at(t: usize, length: f32) -> Option<usize> {
    last_step(length).map(|last| last.min(t))
}

/// The step of `x` that step `t` of `Op::ReverseTime` reads in a row of `length` steps:
/// `length - 1 - t` inside the sequence, `t` itself in the padding after it (and for an
/// empty sequence).
pub fn reversed_step(t: usize, length: f32) -> usize {
    match last_step(length) {
        Some(last) if t <= last => last - t,
        _ => t,
    }
}

/// Each batch row's length, or none (every row runs every step): what a host kernel
/// consults per row.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowLengths<'a>(pub Option<&'a [f32]>);

impl<'a> RowLengths<'a> {
    /// Whether row `row` is past its end at step `t`.
    pub fn past_end(&self, t: usize, row: usize) -> bool {
        self.0.is_some_and(|l| past_end(t, l[row]))
    }

    /// The lengths of rows `rows` only (row 0 of the result is `rows.start`).
    pub fn rows(&self, rows: std::ops::Range<usize>) -> RowLengths<'a> {
        RowLengths(self.0.map(|l| &l[rows]))
    }
}

/// An op's optional `lengths` must be `[B]` (checked when the graph is built).
pub(crate) fn check_shape(
    lengths: Option<&Shape>,
    batch: usize,
) -> std::result::Result<(), String> {
    match lengths {
        Some(l) => same(l, &Shape::from([batch]), "lengths"),
        None => Ok(()),
    }
}

/// Checks every length of `lengths` (the tensor called `what`) is a whole number in
/// `0..=steps`; the first bad one is an error naming its batch row.
pub fn check_lengths(what: &str, lengths: &[f32], steps: usize) -> Result<()> {
    let ok = |v: f32| v.fract() == 0.0 && v >= 0.0 && v as f64 <= steps as f64;
    match lengths.iter().position(|&v| !ok(v)) {
        None => Ok(()),
        Some(b) => Err(Error::Input(format!(
            "length {} of batch row {b} in `{what}` is not a whole number of steps in 0..={steps}",
            lengths[b]
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_outside_the_steps_or_not_whole_is_an_error_naming_its_row() {
        check_lengths("lengths", &[0.0, 3.0, 5.0], 5).unwrap();
        for bad in [6.0, -1.0, 2.5, f32::NAN] {
            let msg = check_lengths("lengths", &[1.0, bad], 5)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("batch row 1") && msg.contains("`lengths`"),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_reversed_row_starts_at_its_own_end_and_its_padding_stays() {
        let steps = |length: f32| (0..5).map(|t| reversed_step(t, length)).collect::<Vec<_>>();
        assert_eq!(steps(5.0), [4, 3, 2, 1, 0]);
        assert_eq!(steps(3.0), [2, 1, 0, 3, 4]);
        assert_eq!(steps(1.0), [0, 1, 2, 3, 4]);
        assert_eq!(steps(0.0), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_sequence_ends_at_its_last_step_and_is_padding_after() {
        assert_eq!(
            (last_step(3.0), last_step(1.0), last_step(0.0)),
            (Some(2), Some(0), None)
        );
        assert!(!past_end(2, 3.0) && past_end(3, 3.0) && past_end(0, 0.0));
    }
}
