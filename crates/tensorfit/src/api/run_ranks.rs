//! Data-parallel training over the ranks of an MPI launch (`docs/distributed.md`): a
//! [`Runner`] steps on its rank's rows of each global batch, the gradients averaged over
//! the ranks before the update, and checks at the end that every rank holds the same
//! weights.

use tensorfit_nn::{Batch, StepReport};

use super::error::Result;
use super::runner::{lengths_of, Runner};
use crate::distributed::Ranks;

impl Runner {
    /// One training step on this rank's rows of the global batch (`batch`; how its rows
    /// count was set with `Ranks::set_step`), the gradients averaged over `ranks` before
    /// the update. When the ranks' devices differ, every rank then takes rank 0's state,
    /// so that all go on from the same weights.
    ///
    /// ```
    /// // The ranks come from an MPI launch (`mpirun`, the `mpi` feature: docs/distributed.md),
    /// // which an example cannot start: this shows the calls, in functions nothing here calls.
    /// use tensorfit::distributed::Ranks;
    /// use tensorfit::{Batch, DevicePolicy, Job, Model, OptimConfig, Plan, Result, Runner};
    /// /// `model` opened for data-parallel training over `ranks`.
    /// fn open(model: &Model, ranks: &Ranks, job: Job) -> Result<Runner> {
    ///     let training = (100, OptimConfig::default());
    ///     let description = model.description().clone();
    ///     let mut request = DevicePolicy::only_cpu().request(description, job, training);
    ///     request.data_parallel = Some(ranks.data_parallel());
    ///     Plan::from_request(request)?.start_with_weights(model.parameters())
    /// }
    /// /// One step on this rank's rows of the global `batch`; the step's loss.
    /// fn step(run: &mut Runner, ranks: &mut Ranks, batch: &Batch) -> Result<f32> {
    ///     Ok(run.train_batch_on_ranks(ranks, batch)?.loss)
    /// }
    /// ```
    pub fn train_batch_on_ranks(&mut self, ranks: &mut Ranks, batch: &Batch) -> Result<StepReport> {
        let lengths = lengths_of(batch)?;
        let x = &*self.conform(&batch.x)?;
        self.check_planned(x, true)?;
        ranks.set_device(self.session.trainer.device_info().kind);
        let (labels, lengths) = (&batch.labels, lengths.as_deref());
        let report = self.step_on(|t| t.train_step_exchanging(x, labels, lengths, &mut *ranks))?;
        if ranks.devices_differ() {
            ranks.align(&mut self.session.trainer)?;
        }
        Ok(report)
    }

    /// After the last step: tells the other ranks this one ended, then fails unless every
    /// rank holds the same weights at `step`; their hash.
    ///
    /// ```
    /// // The ranks come from an MPI launch (docs/distributed.md), which an example cannot
    /// // start: this shows the call, in a function nothing here calls.
    /// use tensorfit::distributed::Ranks;
    /// use tensorfit::{Result, Runner};
    /// /// After this rank's last step (`step`): the weights' hash, the same on every rank.
    /// fn finish(run: &mut Runner, ranks: &mut Ranks, step: u64) -> Result<u64> {
    ///     run.check_same_weights(ranks, step)
    /// }
    /// ```
    pub fn check_same_weights(&mut self, ranks: &mut Ranks, step: u64) -> Result<u64> {
        ranks.end(self.session.trainer.model().trainable_parameters()?)?;
        let params = self.session.trainer.parameters()?;
        Ok(ranks.check_same_weights(&params, step)?)
    }
}
