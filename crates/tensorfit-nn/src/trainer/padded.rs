//! Padded batches in the trainer: the checks on a batch's lengths, and each program's
//! share of them.
//!
//! A padded batch holds sequences of different lengths, padded at the end to the batch's
//! `T` steps. A trainer whose options say `padded` runs programs that take the lengths
//! (`model::classifier_at_lengths`): each sequence stops at its end and the head reads its
//! own last step. A sequence's steps are cut into the programs' chunks like the batch's,
//! so a chunk sees `lengths[b] - start` steps of it, clamped to the chunk (0: the
//! sequence ended before the chunk and its state carries through).

use std::ops::Range;

use tensorfit_core::seq_lengths;
use tensorfit_core::{Error, Result};

use super::Trainer;
use crate::options::ProgramKey;
use crate::padded_reach::Reach;

impl Trainer {
    /// Checks the lengths of a `[steps, batch]` batch about to run `keys`; returns them as
    /// the programs take them (`None` when they are not padded).
    ///
    /// Each length must be a whole number of steps in `1..=steps`. A trainer planned
    /// without lengths takes none shorter than `steps`. A padded trainer needs every
    /// sequence to reach the steps its head reads ([`Reach`]).
    pub(super) fn check_lengths<'l>(
        &self,
        lengths: Option<&'l [f32]>,
        batch: usize,
        steps: usize,
        keys: &[ProgramKey],
    ) -> Result<Option<&'l [f32]>> {
        let Some(lengths) = lengths else {
            return Ok(None);
        };
        if lengths.len() != batch {
            return Err(Error::input(format!(
                "{} lengths for a batch of {batch} sequences",
                lengths.len()
            )));
        }
        seq_lengths::check_lengths("lengths", lengths, steps)?;
        if let Some(b) = lengths.iter().position(|&l| l < 1.0) {
            return Err(Error::input(format!(
                "sequence {b} of the batch has no steps (lengths start at 1)"
            )));
        }
        let shortest = lengths.iter().fold(steps as f32, |m, &l| m.min(l)) as usize;
        if !self.opts.padded {
            if shortest < steps {
                return Err(Error::input(format!(
                    "a padded batch (a sequence of {shortest} of {steps} steps) on a trainer planned without lengths: plan the job with padded batches"
                )));
            }
            return Ok(None);
        }
        if let Some(reach) = Reach::of(&self.model, keys, steps) {
            if !reach.reached_by(shortest) {
                return Err(Error::input(format!(
                    "a sequence of {shortest} steps ends before the {}, and {}: batch sequences of nearer lengths, or let those programs cover at least {} steps",
                    reach.what(),
                    reach.why(),
                    reach.needed_for(shortest)
                )));
            }
        }
        Ok(Some(lengths))
    }
}

/// The lengths of rows `rows` within the chunk `steps` of their sequences (all
/// `steps.len()` when `lengths` is `None`).
pub(super) fn lengths_within(
    lengths: Option<&[f32]>,
    steps: Range<usize>,
    rows: Range<usize>,
) -> Vec<f32> {
    let n = steps.len() as f32;
    match lengths {
        Some(l) => l[rows]
            .iter()
            .map(|&len| (len - steps.start as f32).clamp(0.0, n))
            .collect(),
        None => vec![n; rows.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_sees_each_sequence_from_its_start_clamped_to_the_chunk() {
        let l = [10.0, 3.0, 7.0];
        assert_eq!(lengths_within(Some(&l), 0..5, 0..3), vec![5.0, 3.0, 5.0]);
        assert_eq!(lengths_within(Some(&l), 5..10, 0..3), vec![5.0, 0.0, 2.0]);
        assert_eq!(lengths_within(Some(&l), 5..10, 1..3), vec![0.0, 2.0]);
        assert_eq!(lengths_within(None, 5..10, 1..3), vec![5.0, 5.0]);
    }
}
