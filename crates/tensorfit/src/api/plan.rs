//! [`Plan`]: a job planned on every device, and the device chosen.

use serde_json::Value;
use tensorfit_plan::MemoryPlan;

use super::discovered::Placement;
use super::error::{BadInput, Error, Result};
use super::model::{Model, Training};
use super::runner::Runner;
use super::shapes::Shapes;
use crate::decision::{decide, decide_on, Decision, Request};
use crate::devices::DeviceStatus;
use crate::nn::{Job, ParamStore};
use crate::session::{start, Session};

/// A job planned on every device the policy allows: each device's memory plan and
/// estimated time, the choice, and why any device is unavailable. Nothing has run yet.
#[derive(Debug, Clone)]
pub struct Plan {
    request: Request,
    decision: Decision,
}

impl Plan {
    pub(crate) fn new(model: &Model, shapes: Shapes, devices: &impl Placement) -> Result<Plan> {
        let (job, t) = (shapes.job, model.training());
        // Full BPTT: through the training sequences' whole length (an evaluation-only job
        // has no gradients; any length serves).
        let whole = match job {
            Job::Train { seq_len, .. } | Job::Eval { seq_len, .. } => seq_len,
        };
        let tbptt = t.tbptt.unwrap_or(whole);
        let policy = devices.policy();
        let mut request = policy.request(model.description().clone(), job, (tbptt, t.optim));
        request.tbptt_mode = t.tbptt_mode;
        request.seed = t.seed;
        request.padded = shapes.padded;
        match devices.discovered() {
            Some(found) => Plan::on_devices(request, found.to_vec()),
            None => Plan::from_request(request),
        }
    }

    /// Plans a request made in full ([`crate::session::Request`]: settings a [`Model`]'s
    /// training does not hold, such as data-parallel ranks or padded batches).
    pub fn from_request(request: Request) -> Result<Plan> {
        let decision = decide(&request)?;
        Ok(Plan { request, decision })
    }

    /// Plans a request on the devices `devices` (those discovered, or devices that are not
    /// here: `tensorfit plan --assume`) instead of discovering them.
    pub fn on_devices(request: Request, devices: Vec<DeviceStatus>) -> Result<Plan> {
        let decision = decide_on(&request, devices)?;
        Ok(Plan { request, decision })
    }

    /// The job planned.
    pub fn job(&self) -> Job {
        self.request.job
    }

    /// Whether the job fits on some device the policy allows.
    pub fn fits(&self) -> bool {
        self.decision.chosen().is_some()
    }

    /// The chosen device's id (`cpu`, `wgpu:0`, `cuda:0`), if the job fits somewhere.
    pub fn device(&self) -> Option<&str> {
        self.decision.chosen().map(|c| c.candidate.device.as_str())
    }

    /// The chosen strategy in words ("whole sequence", "streamed in time chunks of 50", …).
    pub fn strategy(&self) -> Option<&str> {
        self.decision
            .chosen()
            .map(|c| c.candidate.strategy.as_str())
    }

    /// The chosen plan's peak device memory in bytes: what the run will allocate.
    pub fn peak_bytes(&self) -> Option<u64> {
        self.decision.chosen().map(|c| c.plan.peak_bytes())
    }

    /// The process's resident memory the chosen plan predicts, in bytes.
    pub fn resident_bytes(&self) -> Option<u64> {
        self.decision.planned_resident()
    }

    /// Every device's plan and the choice, as a table for people.
    pub fn table(&self) -> String {
        self.decision.table()
    }

    /// Every device's plan and the choice, as JSON (what `tensorfit plan --json` prints).
    pub fn to_json(&self) -> Value {
        self.decision.to_json()
    }

    /// The chosen device's plan of its memory: every tensor's offset and lifetime, as a
    /// table (`table(rows)`), JSON (`to_json`) or a picture (`svg`).
    pub fn memory_plan(&self) -> Option<&MemoryPlan> {
        self.decision.chosen().map(|c| c.plan)
    }

    /// The chosen device's name (`AMD EPYC (2 threads)`, `NVIDIA H200`).
    pub fn device_name(&self) -> Option<&str> {
        self.decision.chosen().map(|c| c.device.name.as_str())
    }

    /// The process's host memory the chosen plan predicts, part by part, as a table.
    pub fn host_table(&self) -> String {
        self.decision.host_table()
    }

    /// When nothing fits: the smallest plan of any device (bytes, strategy, device).
    pub fn smallest(&self) -> Option<(u64, &str, &str)> {
        self.decision
            .candidates
            .iter()
            .min_by_key(|c| c.estimated_peak_bytes)
            .map(|c| {
                (
                    c.estimated_peak_bytes,
                    c.strategy.as_str(),
                    c.device.as_str(),
                )
            })
    }

    /// The planner's full decision (internal: its fields may change between versions).
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Why the job fits nowhere, as the error an app matches on.
    pub fn nothing_fits(&self) -> Error {
        match self.decision.why_nothing_fits() {
            Ok(n) => Error::OutOfMemory {
                device: n.device,
                requested: n.requested,
                available: n.available,
                detail: n.detail,
            },
            // No device present, or only a software device that runs when asked for:
            // not a memory problem.
            Err(e) => match Error::from(e) {
                Error::BadInput(b) => Error::NoDevice(b.message),
                e => e,
            },
        }
    }

    /// Opens the chosen device and allocates exactly the chosen plan there, with `model`'s
    /// weights (the model planned, or one of the same description).
    pub fn start(&self, model: &Model) -> Result<Runner> {
        Ok(Runner::new(self.open_session(model)?, model))
    }

    /// The internal session on the chosen device, holding `model`'s weights.
    pub(crate) fn open_session(&self, model: &Model) -> Result<Session> {
        if model.description() != &self.request.cfg {
            return Err(Error::BadInput(BadInput::of(
                "model",
                format!("the model planned, {}", self.request.cfg),
                model.description().to_string(),
                format!(
                    "the plan is for the model {}, not {}",
                    self.request.cfg,
                    model.description()
                ),
            )));
        }
        self.session(model.parameters())
    }

    /// Opens the chosen device and allocates the chosen plan there, holding `params` (the
    /// weights of the model planned), training as the request says: [`Plan::start`] for
    /// a plan made from a [`Request`], whose weights are not in a [`Model`], without a
    /// copy of them.
    pub fn start_with_weights(&self, params: &ParamStore) -> Result<Runner> {
        let session = self.session(params)?;
        let r = &self.request;
        let training = Training {
            tbptt: Some(r.tbptt),
            tbptt_mode: r.tbptt_mode,
            optim: r.optim,
            seed: r.seed,
        };
        Ok(Runner::with_training(session, training, Default::default()))
    }

    /// The session on the chosen device, holding `params` (of the planned model).
    fn session(&self, params: &ParamStore) -> Result<Session> {
        if !self.fits() {
            return Err(self.nothing_fits());
        }
        Ok(start(&self.request, &self.decision, params)?)
    }
}
