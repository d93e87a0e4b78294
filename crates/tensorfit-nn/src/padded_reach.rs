//! How far every sequence of a padded batch must reach for a step's programs to read it:
//! the one rule the trainer checks each batch against, and that a run over files checks
//! every batch against before its first step (every length is known from the scan).
//!
//! A step's programs cut the batch's `T` steps into chunks (`options.rs`); a sequence that
//! ends in a chunk carries its state through the later ones, and nothing reads it there.
//! - A head on the last step trains on each sequence's own last step in the last program
//!   (the truncated-BPTT segment): every sequence must end inside it. Evaluation reads the
//!   top layer's final state instead (`model::classifier_at_lengths`), which a sequence
//!   that ended in an earlier chunk carries through the later ones: any length runs.
//! - A head on every step reads every step of the programs that score (training windows,
//!   evaluation chunks), masked past each sequence's end (its labels `IGNORE_LABEL`).
//!   Only the chunks that just advance the state come before them (truncated BPTT in mode
//!   `last`: the steps before the segment): a sequence that ends there would have no label
//!   counted at all. Windowed truncated BPTT and evaluation score from step 0: any length
//!   runs.

use crate::description::{HeadOn, ModelDescription};
use crate::options::{ProgramKey, ProgramKind};

/// The steps of a padded batch that every sequence must reach into: a sequence of at most
/// `start` steps ends before them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// The first step every sequence must have (a length above it).
    pub start: usize,
    /// The batch's padded steps.
    pub steps: usize,
    /// What reads there: the last program (a head on the last step) or the first that
    /// scores (a head on every step).
    pub program: ProgramKind,
    /// The model's head.
    pub head: HeadOn,
}

impl Reach {
    /// The reach of `keys`, one step's programs over `steps` steps, for `model`'s head;
    /// `None` when a sequence of any length runs.
    pub fn of(model: &ModelDescription, keys: &[ProgramKey], steps: usize) -> Option<Reach> {
        let (start, program) = match model.head.on {
            HeadOn::Sequence(_) => {
                // The head runs in the last program but a split step's update (which
                // reads no steps).
                let last = keys.iter().rev().find(|k| k.kind != ProgramKind::Update)?;
                if last.kind == ProgramKind::Eval {
                    return None;
                }
                (steps.saturating_sub(last.steps), last.kind)
            }
            HeadOn::EveryStep => {
                let carried: usize = keys
                    .iter()
                    .take_while(|k| k.kind == ProgramKind::Carry)
                    .map(|k| k.steps)
                    .sum();
                let first = keys.iter().find(|k| k.kind != ProgramKind::Carry)?;
                (carried, first.kind)
            }
        };
        (start > 0).then_some(Reach {
            start,
            steps,
            program,
            head: model.head.on,
        })
    }

    /// Whether a sequence of `length` steps reaches.
    pub fn reached_by(&self, length: usize) -> bool {
        length > self.start
    }

    /// The steps the programs that read would have to cover for a sequence of `shortest`
    /// steps to reach them: from its last step to the batch's end.
    pub fn needed_for(&self, shortest: usize) -> usize {
        self.steps.saturating_sub(shortest.max(1)) + 1
    }

    /// What the steps `start..steps` are, for messages: "last truncated-BPTT segment
    /// (--tbptt) of steps 4..7".
    pub fn what(&self) -> String {
        let what = match self.program {
            ProgramKind::Eval | ProgramKind::EvalCarry | ProgramKind::Carry => {
                "last evaluation chunk (the plan streams in chunks)"
            }
            ProgramKind::Train
            | ProgramKind::TrainCarry
            | ProgramKind::Grads
            | ProgramKind::Update
            | ProgramKind::HeadInput
            | ProgramKind::Head
            | ProgramKind::StackGrads => "last truncated-BPTT segment (--tbptt)",
        };
        format!("{what} of steps {}..{}", self.start, self.steps)
    }

    /// Why a sequence must reach there, for messages.
    pub fn why(&self) -> &'static str {
        match self.head {
            HeadOn::Sequence(_) => "the head reads each sequence's last step there",
            HeadOn::EveryStep => {
                "the head reads every step, masked past each sequence's end, but in truncated-BPTT mode `last` only the segment's steps have a loss: none of its labels would count"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{TbpttMode, TrainOptions};

    fn opts(tbptt: usize, mode: TbpttMode) -> TrainOptions {
        TrainOptions {
            tbptt,
            tbptt_mode: mode,
            chunk: 3,
            padded: true,
            ..TrainOptions::default()
        }
    }

    #[test]
    fn a_head_on_the_last_step_needs_every_sequence_to_end_in_the_last_segment() {
        let m = ModelDescription::seed();
        let keys = opts(3, TbpttMode::Last).train_programs(&m, 2, 7);
        let r = Reach::of(&m, &keys, 7).unwrap();
        assert_eq!((r.start, r.program), (4, ProgramKind::Train));
        assert!(!r.reached_by(4) && r.reached_by(5));
        assert_eq!(r.needed_for(4), 4);
        // Windows of 3 over 7 steps: the last is 1 step.
        let keys = opts(3, TbpttMode::Windows).train_programs(&m, 2, 7);
        assert_eq!(Reach::of(&m, &keys, 7).unwrap().start, 6);
        // Evaluation in chunks of 3 reads the final state, carried through the chunks.
        let keys = opts(3, TbpttMode::Last).eval_programs(&m, 2, 7);
        assert_eq!(Reach::of(&m, &keys, 7), None);
        // One program over the whole batch: any length.
        let keys = opts(7, TbpttMode::Last).train_programs(&m, 2, 7);
        assert_eq!(Reach::of(&m, &keys, 7), None);
    }

    #[test]
    fn a_head_on_every_step_needs_a_sequence_to_reach_only_the_first_scored_step() {
        let m = ModelDescription::lstm_language_model(5, 4, 1);
        let keys = opts(3, TbpttMode::Last).train_programs(&m, 2, 7);
        let r = Reach::of(&m, &keys, 7).unwrap();
        assert_eq!((r.start, r.program), (4, ProgramKind::Train));
        // Windows and evaluation chunks score from step 0.
        let keys = opts(3, TbpttMode::Windows).train_programs(&m, 2, 7);
        assert_eq!(Reach::of(&m, &keys, 7), None);
        let keys = opts(3, TbpttMode::Last).eval_programs(&m, 2, 7);
        assert_eq!(Reach::of(&m, &keys, 7), None);
    }
}
