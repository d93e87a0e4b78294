//! What a [`Runner`] can say about its run: the plan it runs on and how that changed
//! (recoveries, replans), and moving it onto a bound that holds another shape.

use tensorfit_nn::Job;

use super::error::Result;
use super::runner::Runner;

impl Runner {
    /// The bound the run is planned for now (the job opened, widened by any replan).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(run.bound(), Job::Eval { batch: 2, seq_len: 3 });
    /// run.hold(Job::Eval { batch: 2, seq_len: 8 })?; // a longer evaluation: planned again
    /// assert_eq!(run.bound(), Job::Eval { batch: 2, seq_len: 8 });
    /// # Ok(())
    /// # }
    /// ```
    pub fn bound(&self) -> Job {
        self.session.job()
    }

    /// The process's resident memory the plan predicts, in bytes (after a replan or a
    /// recovery, the most of any plan the run ran under).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let plan = model.plan(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let run = plan.start(&model)?;
    /// assert_eq!(Some(run.planned_resident_bytes()), plan.resident_bytes());
    /// # Ok(())
    /// # }
    /// ```
    pub fn planned_resident_bytes(&self) -> u64 {
        self.session.planned_resident_bytes
    }

    /// Every recovery so far (a step moved to another plan or device when its device ran
    /// out of memory or was lost), in words, oldest first.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// assert!(run.fallbacks().is_empty()); // the CPU did not fail
    /// # Ok(())
    /// # }
    /// ```
    pub fn fallbacks(&self) -> Vec<String> {
        self.session
            .fallbacks
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Every replan so far for a shape outside the plan's bound, in words, oldest first
    /// (empty when the run was planned once: every shape within the bound runs on it).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// assert!(run.replans().is_empty());
    /// run.hold(Job::Eval { batch: 2, seq_len: 8 })?;
    /// assert_eq!(run.replans().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn replans(&self) -> Vec<String> {
        self.session
            .replans
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Makes the run's bound hold `shape` (a training step's or an evaluation's batch and
    /// length): nothing happens when it does; otherwise the run is planned again, once,
    /// for the bound that holds both, its training state moved onto the new plan, and the
    /// replan recorded ([`Runner::replans`]). Returns the replans this call made, in
    /// words. [`Runner::train`] does this for every batch.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Job, Model};
    /// let mut run = Model::seed().open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu()).unwrap();
    /// assert!(run.hold(Job::Eval { batch: 1, seq_len: 3 }).unwrap().is_empty());
    /// assert_eq!(run.hold(Job::Eval { batch: 4, seq_len: 3 }).unwrap().len(), 1);
    /// assert_eq!(run.bound(), Job::Eval { batch: 4, seq_len: 3 });
    /// ```
    pub fn hold(&mut self, shape: Job) -> Result<Vec<String>> {
        let before = self.session.replans.len();
        self.session.switch_job(shape)?;
        Ok(self.session.replans[before..]
            .iter()
            .map(ToString::to_string)
            .collect())
    }
}
