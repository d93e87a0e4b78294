//! [`Shapes`]: what a plan is made for, the job's bound and whether its batches come
//! padded.

use tensorfit_nn::Job;

use super::sequences::Sequences;
use crate::job_switch::widen;

/// What a plan is made for: a job read as a bound (every batch of up to its sequences, of
/// up to its steps, runs on the plan as planned, on its own extent) and whether batches
/// come padded (sequences of different lengths, each with its length: the plan's
/// programs mask the steps past each sequence's end). A [`Job`] alone is a bound for
/// sequences of one length; [`Sequences::shapes`] gives the shapes of an app's data.
///
/// ```
/// use tensorfit::{Job, Shapes};
/// let fixed: Shapes = Job::Eval { batch: 4, seq_len: 20 }.into();
/// assert!(!fixed.padded);
/// let ragged = Shapes::padded(Job::Eval { batch: 4, seq_len: 20 });
/// assert!(ragged.padded);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shapes {
    /// The bound: training steps and evaluations of up to these batch sizes and lengths.
    pub job: Job,
    /// Batches come padded, with each sequence's length.
    pub padded: bool,
}

impl Shapes {
    /// Padded batches within `job`.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, Job, Model, ModelDescription, Shapes};
    /// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let shapes = Shapes::padded(Job::Eval { batch: 4, seq_len: 10 });
    /// assert_eq!(shapes.job, Job::Eval { batch: 4, seq_len: 10 });
    /// let run = model.open(shapes, &DevicePolicy::only_cpu())?;
    /// assert!(run.padded()); // takes batches with their lengths
    /// # Ok(())
    /// # }
    /// ```
    pub fn padded(job: Job) -> Shapes {
        Shapes { job, padded: true }
    }

    /// These shapes widened to hold `data`'s evaluation in batches of up to `batch` too
    /// (a validation set longer than the training set, or ragged where it is not).
    ///
    /// ```
    /// use tensorfit::{Job, Sequences};
    /// let train = Sequences::new(vec![vec![0.0; 3]; 4], vec![0.0; 4], 1).unwrap();
    /// let val = Sequences::new(vec![vec![0.0; 5], vec![0.0; 2]], vec![0.0; 2], 1).unwrap();
    /// let shapes = train.shapes(4).holding(&val, 2);
    /// assert_eq!(shapes.job, Job::Train { batch: 4, seq_len: 3, eval: Some((4, 5)) });
    /// assert!(shapes.padded);
    /// ```
    pub fn holding(self, data: &Sequences, batch: usize) -> Shapes {
        let eval = Job::Eval {
            batch,
            seq_len: data.steps(),
        };
        Shapes {
            job: widen(self.job, eval),
            padded: self.padded || data.is_ragged(),
        }
    }
}

impl From<Job> for Shapes {
    /// A bound for sequences of one length: batches are not padded.
    fn from(job: Job) -> Shapes {
        Shapes { job, padded: false }
    }
}
