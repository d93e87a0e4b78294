//! The session: a job running on the device its [`Decision`] chose.
//!
//! [`start`] opens the chosen device and allocates exactly the chosen plan's arenas
//! there; the [`Session`]'s training steps and evaluations then survive the device
//! failing ([`crate::recovery`]).

use tensorfit_core::{Error, Result};
use tensorfit_nn::{Checkpoint, ParamStore, Trainer};
use tensorfit_plan::MemoryPlan;

pub use crate::decision::{decide, decide_on, plan_bound, plan_job, Choice, Decision, Request};
use crate::devices::{open_device, parse_id};
pub use crate::job_switch::Replan;
pub use crate::recovery::Fallback;
pub use crate::strategy::{strategies, Strategy};

/// A job running on its chosen device. Its training steps and evaluations survive the
/// device failing when they run through [`Session::with_recovery`]
/// (`session.with_recovery(|t| t.train_step(x, labels))`, with any of [`Trainer`]'s
/// steps): before each, the training state is copied to the host; on out-of-memory (or a
/// lost device) the session frees what it held, replans with the device's capacity as it
/// is now (or without the device), restores the state on the new plan and repeats the
/// step. [`Session::fallbacks`] records each move.
#[derive(Debug)]
pub struct Session {
    /// The trainer bound to the chosen device's plan.
    pub trainer: Trainer,
    /// The device it runs on (`cpu`, `wgpu:0`).
    pub device: String,
    /// The strategy in words.
    pub strategy: String,
    /// The memory plan of the run.
    pub plan: MemoryPlan,
    /// Every recovery so far, oldest first.
    pub fallbacks: Vec<Fallback>,
    /// Every replan for a shape outside the plan's bound so far, oldest first
    /// ([`Session::switch_job`]); empty when the run was planned once.
    pub replans: Vec<Replan>,
    pub(crate) req: Request,
    /// The host copy of the state taken before the last step, kept so the next snapshot
    /// reuses its memory.
    pub(crate) snapshot: Option<Checkpoint>,
    /// The process's resident memory the plan predicts (see `Decision::host_json`): after
    /// a replan (another batch shape, a recovery), the most of any plan the run ran
    /// under, as the measured peak (VmHWM) is the run's.
    pub planned_resident_bytes: u64,
    /// This process's resident memory when the run was first planned, before it held
    /// any of the job's memory (`Decision::process_bytes`): what a replan predicts from.
    pub(crate) process_bytes: u64,
}

/// Opens the chosen device and allocates the chosen plan's arenas there.
pub fn start(req: &Request, decision: &Decision, params: &ParamStore) -> Result<Session> {
    let choice = decision.chosen().ok_or_else(|| decision.nothing_fits())?;
    let id = &choice.candidate.device;
    let (kind, index) = parse_id(id).ok_or_else(|| {
        Error::input(format!(
            "{id} is not a device here: it can be planned, not run"
        ))
    })?;
    let backend = open_device(kind, index, &req.caps)?;
    // A test may ask for a failure by the environment (`crate::faults::from_env`): only
    // in a build with the `fault-injection` feature, which no release turns on.
    #[cfg(feature = "fault-injection")]
    let backend = crate::faults::from_env(backend)?;
    start_on(req, decision, params, backend)
}

/// As [`start`], on a backend the caller opened (for example one wrapped to inject
/// faults).
pub fn start_on(
    req: &Request,
    decision: &Decision,
    params: &ParamStore,
    backend: Box<dyn tensorfit_core::Backend>,
) -> Result<Session> {
    let choice = decision.chosen().ok_or_else(|| decision.nothing_fits())?;
    // The plan was made for the request's job as a bound: every shape within it runs.
    let trainer = Trainer::with_bound(
        backend,
        req.cfg.clone(),
        params,
        choice.options.clone(),
        choice.plan.layout(),
        req.job,
    )?;
    Ok(Session {
        trainer,
        device: choice.candidate.device.clone(),
        strategy: choice.candidate.strategy.clone(),
        plan: choice.plan.clone(),
        fallbacks: Vec::new(),
        replans: Vec::new(),
        req: req.clone(),
        snapshot: None,
        planned_resident_bytes: decision.planned_resident().unwrap_or(0),
        process_bytes: decision.process_bytes,
    })
}

impl Session {
    /// The training state on the host: the copy the session keeps to recover a step
    /// (`with_recovery`), brought up to date. A checkpoint is written from it and a
    /// change of job carries it, so a run holds one host copy of its state, as the host
    /// plan counts (`HostNeed::state`). Its `extra` is the caller's to fill.
    pub fn state(&mut self) -> Result<&mut Checkpoint> {
        let state = self.take_state()?;
        Ok(self.snapshot.insert(state))
    }

    /// The kept host copy of the state, brought up to date and taken out of the session
    /// (made on first use).
    pub(crate) fn take_state(&mut self) -> Result<Checkpoint> {
        match self.snapshot.take() {
            Some(mut s) => {
                self.trainer.checkpoint_into(&mut s)?;
                Ok(s)
            }
            None => self.trainer.checkpoint(),
        }
    }

    /// The measured peak, comparable with the plan's estimate: the most bytes the backend
    /// had allocated for tensors, plus the memory it holds itself (its reported overhead:
    /// context, library workspaces, parameter rings), which the plan also counts.
    pub fn measured_peak_bytes(&self) -> u64 {
        self.trainer.memory().peak + self.trainer.device_info().overhead_bytes
    }
}
