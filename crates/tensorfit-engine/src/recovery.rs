//! Recovery: a step that fails on its device moves to another plan or device.
//!
//! Before each training step or evaluation the session copies the training state to the
//! host; on out-of-memory (or a lost device) it frees what it held, replans with the
//! device's capacity as it is now (or without the device), restores the state on the new
//! plan and repeats the step. [`Fallback`] records each move.

use tensorfit_core::{Error, Result};
use tensorfit_nn::{Checkpoint, Trainer};

use crate::decision::decide;
use crate::session::Session;

/// A move to another plan or device after the device failed during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The optimizer step that was being taken (repeated on the new plan).
    pub step: u64,
    /// The device and strategy that failed.
    pub from: String,
    /// The device and strategy the step moved to.
    pub to: String,
    /// What went wrong.
    pub error: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {}: {}; moved from {} to {} without losing the training state, and repeated the step",
            self.step, self.error, self.from, self.to
        )
    }
}

/// How many times one step may move before the session gives up.
const MAX_FALLBACKS_PER_STEP: usize = 3;

impl Session {
    /// Runs `run` on the trainer, recovering from device failures (see the module
    /// documentation): a failed `run` is repeated on the new plan, so it must start from
    /// what it was given (a text's `CarriedState` is replaced only on success; a
    /// data-parallel step passes its exchange the same step again).
    pub fn with_recovery<T>(
        &mut self,
        mut run: impl FnMut(&mut Trainer) -> Result<T>,
    ) -> Result<T> {
        let snapshot = self.take_state()?;
        for _ in 0..MAX_FALLBACKS_PER_STEP {
            match run(&mut self.trainer) {
                Err(e) if e.is_device_failure() => self.recover(&snapshot, e)?,
                other => {
                    self.snapshot = Some(snapshot);
                    return other;
                }
            }
        }
        run(&mut self.trainer)
    }

    /// Frees the failed device's memory, replans and restores `snapshot` on the new plan.
    fn recover(&mut self, snapshot: &Checkpoint, error: Error) -> Result<()> {
        let info = self.trainer.device_info();
        let held = self.trainer.memory().allocated;
        let mut req = self.req.clone();
        match &error {
            Error::DeviceLost { .. } => req.exclude.push(info.kind),
            _ => {
                // What this device can give once our own buffers are freed.
                let now = info
                    .free_bytes
                    .unwrap_or(info.total_bytes)
                    .saturating_add(held)
                    .min(info.total_bytes);
                let cap = req.caps.get(info.kind).map_or(now, |c| c.min(now));
                req.caps.0.insert(info.kind, cap);
            }
        }
        // The failed device may refuse even this; its memory is what we are giving up.
        let _ = self.trainer.release_memory();
        let decision = decide(&req)?;
        if decision.chosen.is_none() {
            return Err(Error::input(format!(
                "{error}; and no plan fits any more: {}",
                decision.nothing_fits()
            )));
        }
        // The failed step left the schedule's state as it was before it.
        let mut next = self.restart(&req, &decision, snapshot)?;
        let fallback = Fallback {
            step: snapshot.step + 1,
            from: format!("{} ({})", self.device, self.strategy),
            to: format!("{} ({})", next.device, next.strategy),
            error: error.to_string(),
        };
        next.fallbacks.push(fallback);
        *self = next;
        Ok(())
    }
}
