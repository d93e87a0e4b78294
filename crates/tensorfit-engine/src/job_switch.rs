//! A session moved onto the plan of another job: data files whose sequences have several
//! lengths (batched strictly by length, with no padding) need a plan per shape, and a
//! session planned for one shape runs only that shape's programs.

use tensorfit_core::Result;
use tensorfit_nn::{Checkpoint, Job};

use crate::decision::{decide, Decision, Request};
use crate::session::{start, Session};

impl Session {
    /// The job this session is planned for.
    pub fn job(&self) -> Job {
        self.req.job
    }

    /// Replans the session for `job` (another batch size or sequence length) on the same
    /// devices and flags, and moves the training state (parameters, optimizer, schedule,
    /// step) onto the new plan. Nothing happens when `job` is the current one.
    pub fn switch_job(&mut self, job: Job) -> Result<()> {
        if job == self.req.job {
            return Ok(());
        }
        // The session's one host copy of the state, carried to the new plan and kept there.
        let snapshot = self.take_state()?;
        let mut req = self.req.clone();
        req.job = job;
        // Planned with this session's memory given back, as recovery does.
        self.trainer.release_memory()?;
        let decision = decide(&req)?;
        *self = self.restart(&req, &decision, &snapshot)?;
        self.snapshot = Some(snapshot);
        Ok(())
    }

    /// A new session for `req` on the plan `decision` chose, holding the training state
    /// of `snapshot` and this session's schedule and fallbacks.
    pub(crate) fn restart(
        &mut self,
        req: &Request,
        decision: &Decision,
        snapshot: &Checkpoint,
    ) -> Result<Session> {
        let mut next = start(req, decision, &snapshot.params)?;
        // An inference plan holds no optimizer state.
        if matches!(req.job, Job::Train { .. }) {
            next.trainer
                .restore_optimizer(&snapshot.optimizer, snapshot.step)?;
        }
        // Reduce-on-plateau's state changes only between steps.
        next.trainer.restore_schedule(self.trainer.schedule_state());
        next.fallbacks = std::mem::take(&mut self.fallbacks);
        // The process holds this run's batches, state copies and reader by now: its
        // resident memory at the replan would count them twice.
        next.process_bytes = self.process_bytes;
        next.planned_resident_bytes = decision
            .planned_resident_from(self.process_bytes)
            .unwrap_or(0)
            .max(self.planned_resident_bytes);
        Ok(next)
    }
}
