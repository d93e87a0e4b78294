//! A [`Runner`]'s training state as a program that keeps its own checkpoints handles it:
//! the host copy to write, a checkpoint's optimizer and schedule to continue from, the
//! weights, and the validation metric the schedule watches.

use tensorfit_nn::optim::ScheduleState;
use tensorfit_nn::{Checkpoint, ModelDescription, ParamStore};

use super::error::Result;
use super::runner::Runner;

impl Runner {
    /// What the model is.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(run.description(), model.description());
    /// # Ok(())
    /// # }
    /// ```
    pub fn description(&self) -> &ModelDescription {
        self.session.trainer.model()
    }

    /// The training state on the host — the model, its weights, the optimizer's state,
    /// the step — brought up to date from the device, with the learning-rate schedule's
    /// state as its only metadata (`extra`): add entries of your own and
    /// [`Checkpoint::save`] it. It is the copy the run keeps to recover a step when its
    /// device fails, so writing it costs no copy more ([`Runner::save`] writes it with
    /// the model's metadata).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Checkpoint, DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// let state = run.state()?;
    /// assert_eq!(state.step, 1);
    /// assert!(!state.optimizer.is_empty()); // Adam's moments
    /// state.extra.insert("my.note".into(), "after step 1".into());
    /// let path =
    ///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
    /// state.save(&path)?;
    /// assert_eq!(Checkpoint::load(&path)?.extra["my.note"], "after step 1");
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn state(&mut self) -> Result<&mut Checkpoint> {
        let schedule = self.session.trainer.schedule_state();
        let state = self.session.state()?;
        state.extra.clear();
        schedule.store(&mut state.extra);
        Ok(state)
    }

    /// Continues training from `ck`, a checkpoint of this model written by
    /// [`Runner::state`] (or `tensorfit train`): its optimizer's state, its step and its
    /// schedule's state. The weights are those the run was opened with (open it with
    /// the checkpoint's model, [`crate::Model::load`], to continue from its weights too).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let (job, cpu) =
    ///     (Job::Train { batch: 2, seq_len: 3, eval: None }, DevicePolicy::only_cpu());
    /// let (x, labels) = (HostTensor::new([3, 2, 2], vec![0.5; 12])?, [0.0, 1.0]);
    /// let mut run = model.open(job, &cpu)?;
    /// run.train_step(&x, &labels)?;
    /// run.train_step(&x, &labels)?;
    /// let ck = run.state()?.clone();
    /// // Another run, from the checkpoint's weights, then its optimizer, step and schedule.
    /// let mut resumed =
    ///     Model::with_weights(ck.config.clone(), ck.params.clone())?.open(job, &cpu)?;
    /// resumed.restore_training(&ck)?;
    /// assert_eq!(resumed.train_step(&x, &labels)?, run.train_step(&x, &labels)?);
    /// assert_eq!(resumed.parameters()?, run.parameters()?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn restore_training(&mut self, ck: &Checkpoint) -> Result<()> {
        self.session
            .trainer
            .restore_optimizer(&ck.optimizer, ck.step)?;
        self.restore_schedule(ck)
    }

    /// The learning-rate schedule's state `ck` keeps, if any, restored.
    pub(super) fn restore_schedule(&mut self, ck: &Checkpoint) -> Result<()> {
        if let Some(state) = ScheduleState::load(&ck.extra)? {
            self.session.trainer.restore_schedule(state);
        }
        Ok(())
    }

    /// The weights and running statistics on the device now, by PyTorch name.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// let x = HostTensor::zeros([3, 2, 2]); // [time, batch, features]
    /// run.train_step(&x, &[0.0, 1.0])?;
    /// let now = run.parameters()?;
    /// assert_eq!(now.len(), model.parameters().len());
    /// assert_ne!(now.get("out.weight"), model.parameters().get("out.weight")); // updated
    /// # Ok(())
    /// # }
    /// ```
    pub fn parameters(&mut self) -> Result<ParamStore> {
        Ok(self.session.trainer.parameters()?)
    }

    /// Tells the learning-rate schedule a validation loss (lower is better):
    /// reduce-on-plateau's step, nothing for the other schedules. [`Runner::train`] does
    /// this after each validation. Returns whether the learning rate was reduced.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::nn::optim::schedule::Decay;
    /// use tensorfit::nn::optim::Schedule;
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription, OptimConfig, Training};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// // Reduce-on-plateau: halve the learning rate after one validation without a lower loss.
    /// let decay =
    ///     Decay::Plateau { factor: 0.5, patience: 0, threshold: 0.0, cooldown: 0, min_lr: 0.0 };
    /// let optim = OptimConfig {
    ///     schedule: Schedule { decay, ..Schedule::default() },
    ///     ..OptimConfig::default()
    /// };
    /// let model = model.with_training(Training { optim, ..Training::default() });
    /// let mut run = model
    ///     .open(Job::Train { batch: 2, seq_len: 3, eval: None }, &DevicePolicy::only_cpu())?;
    /// assert!(!run.observe_validation(0.5)); // the best so far
    /// assert!(run.observe_validation(0.7)); // worse: the rate is halved
    /// # Ok(())
    /// # }
    /// ```
    pub fn observe_validation(&mut self, loss: f64) -> bool {
        self.session.trainer.observe(loss)
    }
}
