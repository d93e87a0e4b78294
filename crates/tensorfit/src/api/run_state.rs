//! A [`Runner`]'s training state as a program that keeps its own checkpoints handles it:
//! the host copy to write, a checkpoint's optimizer and schedule to continue from, the
//! weights, and the validation metric the schedule watches.

use tensorfit_nn::optim::ScheduleState;
use tensorfit_nn::{Checkpoint, ModelDescription, ParamStore};

use super::error::Result;
use super::runner::Runner;

impl Runner {
    /// What the model is.
    pub fn description(&self) -> &ModelDescription {
        self.session.trainer.model()
    }

    /// The training state on the host — the model, its weights, the optimizer's state,
    /// the step — brought up to date from the device, with the learning-rate schedule's
    /// state as its only metadata (`extra`): add entries of your own and
    /// [`Checkpoint::save`] it. It is the copy the run keeps to recover a step when its
    /// device fails, so writing it costs no copy more ([`Runner::save`] writes it with
    /// the model's metadata).
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
    pub fn restore_training(&mut self, ck: &Checkpoint) -> Result<()> {
        self.session
            .trainer
            .restore_optimizer(&ck.optimizer, ck.step)?;
        if let Some(state) = ScheduleState::load(&ck.extra)? {
            self.session.trainer.restore_schedule(state);
        }
        Ok(())
    }

    /// The weights and running statistics on the device now, by PyTorch name.
    pub fn parameters(&mut self) -> Result<ParamStore> {
        Ok(self.session.trainer.parameters()?)
    }

    /// Tells the learning-rate schedule a validation loss (lower is better):
    /// reduce-on-plateau's step, nothing for the other schedules. [`Runner::train`] does
    /// this after each validation. Returns whether the learning rate was reduced.
    pub fn observe_validation(&mut self, loss: f64) -> bool {
        self.session.trainer.observe(loss)
    }
}
