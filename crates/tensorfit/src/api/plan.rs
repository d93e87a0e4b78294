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
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
/// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let job = Job::Train { batch: 8, seq_len: 20, eval: None };
/// let plan = model.plan(job, &DevicePolicy::only_cpu())?;
/// assert!(plan.fits());
/// println!("{}", plan.table()); // each device's plan, and the choice
/// let run = plan.start(&model)?; // only now is memory allocated
/// assert_eq!(Some(run.planned_peak_bytes()), plan.peak_bytes());
/// # Ok(())
/// # }
/// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, ModelDescription, OptimConfig, Plan};
    /// let job = Job::Train { batch: 4, seq_len: 10, eval: None };
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// let request =
    ///     DevicePolicy::only_cpu().request(description, job, (10, OptimConfig::default()));
    /// let alone = Plan::from_request(request.clone())?;
    /// // A file reader holding 64 MiB of batches ahead: the process's memory, not the device's.
    /// let reading =
    ///     Plan::from_request(tensorfit::Request { read_ahead_bytes: 64 << 20, ..request })?;
    /// assert_eq!(reading.peak_bytes(), alone.peak_bytes());
    /// assert!(reading.resident_bytes().unwrap() >= alone.resident_bytes().unwrap() + (64 << 20));
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_request(request: Request) -> Result<Plan> {
        let decision = decide(&request)?;
        Ok(Plan { request, decision })
    }

    /// Plans a request on the devices `devices` (those discovered, or devices that are not
    /// here: `tensorfit plan --assume`) instead of discovering them.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Job, ModelDescription, OptimConfig, Plan, Request};
    /// // A machine of 4 GiB, not this one (`tensorfit plan --assume cpu=4GiB`).
    /// let small = tensorfit::assume::parse(&["cpu=4GiB".to_string()])?;
    /// let job = Job::Train { batch: 256, seq_len: 100, eval: None };
    /// let request = Request::new(ModelDescription::seed(), job, (100, OptimConfig::default()));
    /// let plan = Plan::on_devices(request, small)?;
    /// assert_eq!(plan.device(), Some("cpu=4gib (assumed)"));
    /// assert!(plan.peak_bytes().unwrap() <= 4 << 30);
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_devices(request: Request, devices: Vec<DeviceStatus>) -> Result<Plan> {
        let decision = decide_on(&request, devices)?;
        Ok(Plan { request, decision })
    }

    /// The job planned.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(plan.job(), Job::Eval { batch: 4, seq_len: 10 });
    /// # Ok(())
    /// # }
    /// ```
    pub fn job(&self) -> Job {
        self.request.job
    }

    /// Whether the job fits on some device the policy allows.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model};
    /// let tight = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20);
    /// let plan = Model::seed().plan(Job::Eval { batch: 1, seq_len: 10 }, &tight)?;
    /// assert!(!plan.fits()); // the weights alone need more
    /// assert!(Model::seed()
    ///     .plan(Job::Eval { batch: 1, seq_len: 10 }, &DevicePolicy::only_cpu())?
    ///     .fits());
    /// # Ok(())
    /// # }
    /// ```
    pub fn fits(&self) -> bool {
        self.decision.chosen().is_some()
    }

    /// The chosen device's id (`cpu`, `wgpu:0`, `cuda:0`), if the job fits somewhere.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(plan.device(), Some("cpu"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn device(&self) -> Option<&str> {
        self.decision.chosen().map(|c| c.candidate.device.as_str())
    }

    /// The chosen strategy in words ("whole sequence", "streamed in time chunks of 50", …).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(plan.strategy(), Some("whole sequence"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn strategy(&self) -> Option<&str> {
        self.decision
            .chosen()
            .map(|c| c.candidate.strategy.as_str())
    }

    /// The chosen plan's peak device memory in bytes: what the run will allocate.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let cap = 64 << 20;
    /// let policy = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, cap);
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &policy)?;
    /// let peak = plan.peak_bytes().unwrap();
    /// assert!(peak > 0 && peak <= cap);
    /// # Ok(())
    /// # }
    /// ```
    pub fn peak_bytes(&self) -> Option<u64> {
        self.decision.chosen().map(|c| c.plan.peak_bytes())
    }

    /// The process's resident memory the chosen plan predicts, in bytes.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// // The process's memory holds the device plan's (the CPU's memory is the host's) and more.
    /// assert!(plan.resident_bytes().unwrap() > plan.peak_bytes().unwrap());
    /// # Ok(())
    /// # }
    /// ```
    pub fn resident_bytes(&self) -> Option<u64> {
        self.decision.planned_resident()
    }

    /// Every device's plan and the choice, as a table for people.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert!(plan.table().contains("cpu"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn table(&self) -> String {
        self.decision.table()
    }

    /// Every device's plan and the choice, as JSON (what `tensorfit plan --json` prints).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// let json = plan.to_json();
    /// assert_eq!(json["chosen"]["device"], "cpu");
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_json(&self) -> Value {
        self.decision.to_json()
    }

    /// The chosen device's plan of its memory: every tensor's offset and lifetime, as a
    /// table (`table(rows)`), JSON (`to_json`) or a picture (`svg`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// let memory = plan.memory_plan().unwrap();
    /// assert_eq!(Some(memory.peak_bytes()), plan.peak_bytes());
    /// assert!(memory.svg("evaluation").starts_with("<svg"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn memory_plan(&self) -> Option<&MemoryPlan> {
        self.decision.chosen().map(|c| c.plan)
    }

    /// The chosen device's name (`AMD EPYC (2 threads)`, `NVIDIA H200`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert!(plan.device_name().is_some_and(|name| !name.is_empty()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn device_name(&self) -> Option<&str> {
        self.decision.chosen().map(|c| c.device.name.as_str())
    }

    /// The process's host memory the chosen plan predicts, part by part, as a table.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// assert!(!plan.host_table().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn host_table(&self) -> String {
        self.decision.host_table()
    }

    /// When nothing fits: the smallest plan of any device (bytes, strategy, device).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model};
    /// let tight = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20);
    /// let plan = Model::seed().plan(Job::Eval { batch: 1, seq_len: 10 }, &tight)?;
    /// assert!(!plan.fits());
    /// let (bytes, _strategy, device) = plan.smallest().unwrap();
    /// assert_eq!(device, "cpu");
    /// assert!(bytes > 1 << 20);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// let decision = plan.decision();
    /// assert!(decision.chosen.is_some());
    /// assert!(decision.candidates.iter().all(|c| c.device == "cpu"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Why the job fits nowhere, as the error an app matches on.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::Error;
    /// use tensorfit::{DeviceKind, DevicePolicy, Job, Model};
    /// let tight = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, 1 << 20);
    /// let plan = Model::seed().plan(Job::Eval { batch: 1, seq_len: 10 }, &tight)?;
    /// match plan.nothing_fits() {
    ///     Error::OutOfMemory { device, requested, available, .. } => {
    ///         assert_eq!(device, "cpu");
    ///         assert!(requested > available);
    ///     }
    ///     other => panic!("{other}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Error, Job, Model, ModelDescription};
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 4, seq_len: 10 }, &DevicePolicy::only_cpu())?;
    /// let run = plan.start(&model)?;
    /// assert_eq!(Some(run.device()), plan.device());
    /// // A model of another description is refused.
    /// let other = Model::new(ModelDescription::lstm_classifier(2, 16, 1, 3), 1)?;
    /// match plan.start(&other) {
    ///     Err(Error::BadInput(b)) => assert_eq!(b.argument.as_deref(), Some("model")),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription, OptimConfig, Plan};
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// // Weights that are not in a Model (read from a file, say).
    /// let params = Model::new(description.clone(), 1)?.into_parameters();
    /// let job = Job::Eval { batch: 2, seq_len: 4 };
    /// let request =
    ///     DevicePolicy::only_cpu().request(description, job, (4, OptimConfig::default()));
    /// let mut run = Plan::from_request(request)?.start_with_weights(&params)?;
    /// assert_eq!(run.parameters()?, params);
    /// # Ok(())
    /// # }
    /// ```
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
