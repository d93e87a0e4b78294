//! Batches that continue the batch before them (the windows of a long text, each row a
//! stream of its own): a [`Runner`] planned to carry the recurrent state across batches
//! starts each from the state the previous one left.

use tensorfit_nn::{Batch, CarriedState, EvalReport, StepReport};

use super::error::{BadInput, Error, Result};
use super::runner::{lengths_of, Runner};

impl Runner {
    /// [`Runner::train_batch`] from `state` (zeros after [`CarriedState::reset`]), which
    /// then holds the state the batch ended in: the batch's rows continue the rows of the
    /// batch `state` came from. The run must be planned to carry the state across batches
    /// (`Request::carry_across`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{
    ///     Batch, CarriedState, DevicePolicy, HostTensor, Job, Model, ModelDescription,
    /// };
    /// use tensorfit::{OptimConfig, Plan};
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let job = Job::Train { batch: 2, seq_len: 4, eval: None };
    /// let description = model.description().clone();
    /// let mut request =
    ///     DevicePolicy::only_cpu().request(description, job, (4, OptimConfig::default()));
    /// request.carry_across = true; // each batch continues the one before it
    /// let mut run = Plan::from_request(request)?.start_with_weights(model.parameters())?;
    /// let window = Batch::new(HostTensor::new([4, 2, 2], vec![0.5; 16])?, vec![0.0, 2.0]);
    /// let mut state = CarriedState::new();
    /// run.train_batch_carrying(&window, &mut state)?;
    /// assert!(!state.is_zero()); // where the rows ended: the next batch starts there
    /// assert_eq!(run.train_batch_carrying(&window, &mut state)?.step, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn train_batch_carrying(
        &mut self,
        batch: &Batch,
        state: &mut CarriedState,
    ) -> Result<StepReport> {
        if !self.session.trainer.options().carry_across {
            return Err(Error::BadInput(BadInput::of(
                "state",
                "a run planned to carry the state across batches",
                "a run that starts every batch from zeros",
                "this run was not planned to carry the state from one batch into the next: plan it with `Request::carry_across` set",
            )));
        }
        let lengths = lengths_of(batch)?;
        let x = &*self.conform(&batch.x)?;
        self.check_planned(x, true)?;
        let (labels, lengths) = (&batch.labels, lengths.as_deref());
        self.step_on(|t| t.train_step_carrying(x, labels, lengths, state))
    }

    /// [`Runner::evaluate_batch`] from `state`, which then holds the state the batch ended
    /// in (any run: evaluations always leave it).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{
    ///     Batch, CarriedState, DevicePolicy, HostTensor, Job, Model, ModelDescription,
    /// };
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 1, seq_len: 4 }, &DevicePolicy::only_cpu())?;
    /// let steps: Vec<f32> = (0..8).map(|i| i as f32 / 8.0).collect(); // 4 steps of 2 features
    /// let whole =
    ///     run.evaluate_batch(&Batch::new(HostTensor::new([4, 1, 2], steps.clone())?, vec![1.0]))?;
    /// // The same sequence in two halves, the state carried from the first to the second.
    /// let mut state = CarriedState::new();
    /// let first = Batch::new(HostTensor::new([2, 1, 2], steps[..4].to_vec())?, vec![1.0]);
    /// let second = Batch::new(HostTensor::new([2, 1, 2], steps[4..].to_vec())?, vec![1.0]);
    /// run.evaluate_batch_carrying(&first, &mut state)?;
    /// let end = run.evaluate_batch_carrying(&second, &mut state)?;
    /// for (a, b) in end.probs.data.iter().zip(&whole.probs.data) {
    ///     assert!((a - b).abs() < 1e-5);
    /// }
    /// # Ok(())
    /// # }
    /// ```
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
