//! Batches that continue the batch before them (the windows of a long text, each row a
//! stream of its own): a [`Runner`] planned to carry the recurrent state across batches
//! starts each from the state the previous one left.

use tensorfit_nn::{Batch, CarriedState, EvalReport, StepReport};

use super::error::Result;
use super::runner::{lengths_of, Runner};

impl Runner {
    /// [`Runner::train_batch`] from `state` (zeros after [`CarriedState::reset`]), which
    /// then holds the state the batch ended in: the batch's rows continue the rows of the
    /// batch `state` came from. The run must be planned to carry the state across batches
    /// (`Request::carry_across`).
    pub fn train_batch_carrying(
        &mut self,
        batch: &Batch,
        state: &mut CarriedState,
    ) -> Result<StepReport> {
        let lengths = lengths_of(batch)?;
        let x = &*self.conform(&batch.x)?;
        self.check_planned(x, true)?;
        let (labels, lengths) = (&batch.labels, lengths.as_deref());
        self.step_on(|t| t.train_step_carrying(x, labels, lengths, state))
    }

    /// [`Runner::evaluate_batch`] from `state`, which then holds the state the batch ended
    /// in (any run: evaluations always leave it).
    pub fn evaluate_batch_carrying(
        &mut self,
        batch: &Batch,
        state: &mut CarriedState,
    ) -> Result<EvalReport> {
        let lengths = lengths_of(batch)?;
        let x = &*self.conform(&batch.x)?;
        self.check_planned(x, false)?;
        let (labels, lengths) = (&batch.labels, lengths.as_deref());
        self.step_on(|t| t.evaluate_carrying(x, labels, lengths, state))
    }
}
