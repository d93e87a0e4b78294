//! [`Stream`]: stateful inference, one time step per call.

use tensorfit_core::HostTensor;

use super::discovered::Placement;
use super::error::{BadInput, Error, Result};
use super::model::Model;
use super::plan::Plan;
use crate::nn::{InputSpec, Job};
use crate::session::Session;

/// A batch of sequences fed one time step per call, the recurrent state kept on the
/// device between calls (DL4J's `rnnTimeStep`; in PyTorch, passing `(h, c)` back into
/// `nn.LSTM`). Each [`Stream::step`] returns the model's output at that step; feeding a
/// sequence step by step gives what one whole-sequence prediction gives at its end.
///
/// A stream is planned like any job (one step of its batch) and allocated once; a step
/// runs one loaded program: it plans, allocates and snapshots nothing. Unlike training, a
/// stream does not move to another device when its device fails (its state lives only
/// there): the step returns [`Error::DeviceLost`] or [`Error::OutOfMemory`].
///
/// ```
/// use tensorfit::{DevicePolicy, Model};
/// let model = Model::seed();
/// let mut stream = model.stream(2, &DevicePolicy::only_cpu()).unwrap();
/// let step = vec![0.5; 2 * 152]; // two sequences, one step of 152 features each
/// let first = stream.step(&step).unwrap();
/// let second = stream.step(&step).unwrap(); // continues from the state the first left
/// assert_ne!(first, second);
/// stream.reset().unwrap(); // both sequences start again
/// assert_eq!(stream.step(&step).unwrap(), first);
/// ```
#[derive(Debug)]
pub struct Stream {
    session: Session,
    plan: Plan,
    /// The step's input, `[1, B, F]` (`[1, B]` ids), reused by every call.
    input: HostTensor,
}

impl Stream {
    pub(crate) fn open(model: &Model, batch: usize, devices: &impl Placement) -> Result<Stream> {
        if batch == 0 {
            return Err(Error::BadInput(BadInput::of(
                "batch",
                "at least 1",
                "0",
                "a stream needs at least one sequence",
            )));
        }
        // Refused before anything is planned: a step at a time needs every layer to
        // continue from what it carries.
        model
            .description()
            .network()?
            .check_splits_in_time("as a stream of single steps")?;
        let plan = model.plan(Job::Eval { batch, seq_len: 1 }, devices)?;
        let session = plan.open_session(model)?;
        let input = match model.description().input {
            InputSpec::Dense { features } => HostTensor::zeros([1, batch, features]),
            InputSpec::Tokens { .. } => HostTensor::zeros([1, batch]),
        };
        let mut s = Stream {
            session,
            plan,
            input,
        };
        s.reset()?;
        Ok(s)
    }

    /// The number of sequences.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let stream = model.stream(3, &DevicePolicy::only_cpu())?;
    /// assert_eq!(stream.batch(), 3);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch(&self) -> usize {
        self.input.shape.dims()[1]
    }

    /// Values per sequence and step: the input features (one token id for a token model).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// assert_eq!(model.stream(1, &DevicePolicy::only_cpu())?.step_width(), 2);
    /// // A token model takes one id per step.
    /// let words = Model::new(ModelDescription::lstm_language_model(10, 8, 1), 1)?;
    /// assert_eq!(words.stream(1, &DevicePolicy::only_cpu())?.step_width(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn step_width(&self) -> usize {
        self.input.shape.dims().get(2).copied().unwrap_or(1)
    }

    /// The stream's plan.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let stream = model.stream(2, &DevicePolicy::only_cpu())?;
    /// assert_eq!(stream.plan().job(), Job::Eval { batch: 2, seq_len: 1 }); // one step of 2
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The id of the device the stream runs on.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// assert_eq!(model.stream(1, &DevicePolicy::only_cpu())?.device(), "cpu");
    /// # Ok(())
    /// # }
    /// ```
    pub fn device(&self) -> &str {
        &self.session.device
    }

    /// Advances every sequence by one step: `x` holds `batch × step_width` values,
    /// sequence after sequence. Returns the output at this step, `[batch, outputs]` row
    /// after row (softmax probabilities, or a regression's values).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Error, HostTensor, Job, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let sequence: Vec<f32> = (0..6).map(|i| i as f32 / 6.0).collect(); // 3 steps of 2 features
    /// let mut stream = model.stream(1, &DevicePolicy::only_cpu())?;
    /// let mut last = Vec::new();
    /// for step in sequence.chunks(2) {
    ///     last = stream.step(step)?;
    /// }
    /// // The last step's output is the whole sequence's prediction.
    /// let mut run = model.open(Job::Eval { batch: 1, seq_len: 3 }, &DevicePolicy::only_cpu())?;
    /// let whole = run.predict(&HostTensor::new([3, 1, 2], sequence)?)?;
    /// for (a, b) in last.iter().zip(&whole.data) {
    ///     assert!((a - b).abs() < 1e-5);
    /// }
    /// assert!(matches!(stream.step(&[0.0; 3]), Err(Error::BadInput(_)))); // not 2 values
    /// # Ok(())
    /// # }
    /// ```
    pub fn step(&mut self, x: &[f32]) -> Result<Vec<f32>> {
        if x.len() != self.input.data.len() {
            let want = self.input.data.len();
            return Err(Error::BadInput(BadInput::of(
                "x",
                format!("{want} values"),
                format!("{} values", x.len()),
                format!(
                    "a step of this stream takes {want} values ({} sequences × {}), got {}",
                    self.batch(),
                    self.step_width(),
                    x.len()
                ),
            )));
        }
        self.input.data.copy_from_slice(x);
        Ok(self.session.trainer.stream_step(&self.input)?.data)
    }

    /// Zeroes the state of every sequence: the next step starts new sequences.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut stream = model.stream(1, &DevicePolicy::only_cpu())?;
    /// let first = stream.step(&[1.0, 0.0])?;
    /// assert_ne!(stream.step(&[1.0, 0.0])?, first);
    /// stream.reset()?;
    /// assert_eq!(stream.step(&[1.0, 0.0])?, first); // a new sequence
    /// # Ok(())
    /// # }
    /// ```
    pub fn reset(&mut self) -> Result<()> {
        let batch = self.batch();
        Ok(self.session.trainer.reset_stream(batch, None)?)
    }

    /// Zeroes the state of sequence `row` only: its next step starts a new sequence,
    /// the others continue.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Model, ModelDescription};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut stream = model.stream(2, &DevicePolicy::only_cpu())?;
    /// let x = [1.0, 0.0, 1.0, 0.0]; // one step of each of the 2 sequences
    /// let first = stream.step(&x)?;
    /// let second = stream.step(&x)?;
    /// stream.reset_sequence(0)?;
    /// let third = stream.step(&x)?;
    /// assert_eq!(third[..3], first[..3]); // sequence 0 started again
    /// assert_ne!(third[3..], second[3..]); // sequence 1 went on to its third step
    /// # Ok(())
    /// # }
    /// ```
    pub fn reset_sequence(&mut self, row: usize) -> Result<()> {
        let batch = self.batch();
        Ok(self.session.trainer.reset_stream(batch, Some(row))?)
    }
}
