//! [`FitOptions`]: how [`crate::Runner::train`] runs.

use std::path::PathBuf;

use tensorfit_data::BatchOrder;

/// How [`crate::Runner::train`] runs. The defaults are the ecosystem's: batches of 32 drawn from
/// the whole shuffled epoch, the last one smaller (PyTorch's `DataLoader(shuffle=True)`,
/// `drop_last=False`; Keras' `batch_size=32`), a validation after every epoch when
/// validation data is given, no early stopping, no checkpoint files.
///
/// ```
/// # fn main() -> Result<(), tensorfit::Error> {
/// use tensorfit::{
///     BatchOrder, Control, DevicePolicy, FitOptions, Model, ModelDescription, Sequences,
/// };
/// let defaults = FitOptions::default();
/// assert_eq!((defaults.epochs, defaults.batch, defaults.order), (10, 32, BatchOrder::Shuffled));
/// # let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
/// let inputs: Vec<Vec<f32>> = (0..8).map(|i| vec![(i % 2) as f32; 6]).collect();
/// let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
/// let data = Sequences::new(inputs, labels, 2)?; // 8 sequences of 3 steps of 2 features
/// // The latest state written at the end, and continued from when the file exists.
/// let path =
///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
/// # let _ = std::fs::remove_file(&path); // left by an earlier process with this pid
/// let options = FitOptions {
///     epochs: 2,
///     batch: 4,
///     checkpoint: Some(path.clone()),
///     resume: true,
///     ..defaults
/// };
/// let mut run = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// assert_eq!(run.train(&data, None, &options, |_| Control::Continue)?.steps, 4);
/// // A second run resumes from the file: its epochs are all done.
/// let mut again = model.open(data.shapes(4), &DevicePolicy::only_cpu())?;
/// let resumed = again.train(&data, None, &options, |_| Control::Continue)?;
/// assert_eq!((resumed.steps, resumed.epochs), (4, 2));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FitOptions {
    /// Passes over the training sequences.
    pub epochs: u64,
    /// Sequences per batch (at most: an epoch's last batch may be smaller).
    pub batch: usize,
    /// How an epoch's sequences are cut into batches: the whole epoch shuffled (the
    /// default), or sequences of similar lengths together (less padding, worse
    /// convergence: see [`BatchOrder::LengthGrouped`]).
    pub order: BatchOrder,
    /// The seed of every epoch's order.
    pub seed: u64,
    /// Also validate every this many optimizer steps (besides after every epoch).
    pub validate_every: Option<u64>,
    /// Early stopping: stop after this many validations in a row without a lower
    /// validation loss (Keras' `EarlyStopping(patience=…)`). Needs validation data.
    pub patience: Option<u64>,
    /// Write the model at each new best validation loss here (the last state at the end
    /// when there is no validation data): Keras' `ModelCheckpoint(save_best_only=True)`.
    pub best_checkpoint: Option<PathBuf>,
    /// End holding the state of the best validation (weights, optimizer state and step)
    /// instead of the last step's: Keras' `restore_best_weights`.
    pub restore_best: bool,
    /// The latest state, with the run's place in its epochs, written every
    /// [`FitOptions::checkpoint_every`] steps and at the end, to resume from.
    pub checkpoint: Option<PathBuf>,
    /// See [`FitOptions::checkpoint`] (`None`: at the end only).
    pub checkpoint_every: Option<u64>,
    /// Continue from [`FitOptions::checkpoint`] when that file exists: its state, its
    /// place in its epochs, its best validation. The run then ends with the weights of a
    /// run that never stopped.
    pub resume: bool,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            epochs: 10,
            batch: 32,
            order: BatchOrder::Shuffled,
            seed: 0,
            validate_every: None,
            patience: None,
            best_checkpoint: None,
            restore_best: false,
            checkpoint: None,
            checkpoint_every: None,
            resume: false,
        }
    }
}
