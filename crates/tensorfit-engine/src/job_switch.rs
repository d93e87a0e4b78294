//! A session asked for another shape: a session's plan is made for a bound (its
//! request's job read as maxima: `Trainer::with_bound`), so a shape within the bound runs
//! on it as it is, with no new planning. A shape outside it is planned once, for the
//! smallest bound that holds both the old bound and the new shape, and the move is
//! recorded ([`Replan`]) for the caller to report.

use tensorfit_core::Result;
use tensorfit_nn::bound::describe;
use tensorfit_nn::{Checkpoint, Job};

use crate::decision::{decide, Decision, Request};
use crate::session::{start, Session};

/// A replan for a shape outside the plan's bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Replan {
    /// The shape that asked for it.
    pub shape: Job,
    /// The bound planned before.
    pub from: Job,
    /// The bound planned now (holds `from` and `shape`).
    pub to: Job,
}

impl std::fmt::Display for Replan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "replanned for a shape outside the bound: {} (the bound was {}; it is now {})",
            describe(self.shape),
            describe(self.from),
            describe(self.to)
        )
    }
}

/// The smallest bound that holds every shape of `a` and of `b`: the larger of each
/// batch and length; training when either trains (with the evaluations of both).
pub fn widen(a: Job, b: Job) -> Job {
    let max = |x: (usize, usize), y: (usize, usize)| (x.0.max(y.0), x.1.max(y.1));
    let either = |x: Option<(usize, usize)>, y: Option<(usize, usize)>| match (x, y) {
        (Some(x), Some(y)) => Some(max(x, y)),
        (x, y) => x.or(y),
    };
    let ((ta, ea), (tb, eb)) = (a.parts(), b.parts());
    match (either(ta, tb), either(ea, eb)) {
        (Some((batch, seq_len)), eval) => Job::Train {
            batch,
            seq_len,
            eval,
        },
        (None, Some((batch, seq_len))) => Job::Eval { batch, seq_len },
        // Every job has a training or an evaluation shape.
        (None, None) => a,
    }
}

impl Session {
    /// The bound this session is planned for (its request's job, read as maxima).
    pub fn job(&self) -> Job {
        self.req.job
    }

    /// Makes the session run `job` (another batch size or sequence length). Nothing
    /// happens when the plan's bound holds it (`Trainer::serves`). Otherwise the session
    /// is planned again, once, for the bound that holds both the current bound and `job`
    /// ([`widen`]), on the same devices and flags, the training state (parameters,
    /// optimizer, schedule, step) moved onto the new plan, and the move recorded in
    /// [`Session::replans`].
    pub fn switch_job(&mut self, job: Job) -> Result<()> {
        // Within the bound's batch and length (every step of a run asks: no program
        // look-up), or held by the plan's programs.
        if widen(self.req.job, job) == self.req.job || self.trainer.serves(job) {
            return Ok(());
        }
        let bound = widen(self.req.job, job);
        // The session's one host copy of the state, carried to the new plan and kept there.
        let snapshot = self.take_state()?;
        let mut req = self.req.clone();
        req.job = bound;
        // Planned with this session's memory given back, as recovery does.
        self.trainer.release_memory()?;
        let decision = decide(&req)?;
        let replan = Replan {
            shape: job,
            from: self.req.job,
            to: bound,
        };
        *self = self.restart(&req, &decision, &snapshot)?;
        self.replans.push(replan);
        self.snapshot = Some(snapshot);
        Ok(())
    }

    /// A new session for `req` on the plan `decision` chose, holding the training state
    /// of `snapshot` and this session's schedule, fallbacks and replans.
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
        next.replans = std::mem::take(&mut self.replans);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_widened_bound_holds_both_jobs() {
        let train = |batch, seq_len, eval| Job::Train {
            batch,
            seq_len,
            eval,
        };
        let eval = |batch, seq_len| Job::Eval { batch, seq_len };
        assert_eq!(
            widen(train(8, 20, None), train(4, 30, Some((8, 5)))),
            train(8, 30, Some((8, 5)))
        );
        assert_eq!(
            widen(train(8, 20, Some((2, 40))), eval(16, 10)),
            train(8, 20, Some((16, 40)))
        );
        assert_eq!(widen(eval(16, 10), eval(4, 12)), eval(16, 12));
        assert_eq!(
            widen(eval(16, 10), train(4, 12, None)),
            train(4, 12, Some((16, 10)))
        );
    }
}
