//! [`Model`]: a model's description and weights, and how it trains.

use std::collections::HashMap;
use std::path::Path;

use tensorfit_nn::{Checkpoint, ModelDescription, OptimConfig, ParamStore, TbpttMode};

use super::discovered::Placement;
use super::error::{BadInput, Error, Result};
use super::plan::Plan;
use super::runner::Runner;
use super::shapes::Shapes;
use super::stream::Stream;
use crate::host_budget::init_params;

/// How a model trains: the truncated-BPTT length and the optimizer (with clipping and
/// learning-rate schedule).
///
/// ```
/// use tensorfit::{Model, Training};
/// assert_eq!(Training::default().tbptt, None); // through the whole sequence
/// let training = Training { tbptt: Some(20), seed: 7, ..Training::default() };
/// let model = Model::seed().with_training(training.clone());
/// assert_eq!(model.training(), &training);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    /// Truncated backpropagation through time: gradients flow through at most this many
    /// steps of a sequence. `None` (the default, as in PyTorch and Keras): through the
    /// whole sequence, the job's length; where that does not fit, the planner recomputes
    /// activations or streams rather than truncate.
    pub tbptt: Option<usize>,
    /// Whether a long sequence trains on its last `tbptt` steps (one update) or in
    /// windows of `tbptt` steps, an update each (DL4J's truncated BPTT).
    pub tbptt_mode: TbpttMode,
    /// The optimizer, gradient clipping and learning-rate schedule.
    pub optim: OptimConfig,
    /// The run's seed, from which each step's dropout masks are drawn.
    pub seed: u64,
}

impl Default for Training {
    /// Backpropagation through the whole sequence, Adam at PyTorch's defaults, seed 0.
    fn default() -> Self {
        Training {
            tbptt: None,
            tbptt_mode: TbpttMode::Last,
            optim: OptimConfig::default(),
            seed: 0,
        }
    }
}

/// A model: what it is ([`ModelDescription`]), its weights, and how it trains.
///
/// ```
/// use tensorfit::Model;
/// let model = Model::seed();
/// assert_eq!(model.description().input_features(), 152);
/// ```
#[derive(Debug, Clone)]
pub struct Model {
    description: ModelDescription,
    params: ParamStore,
    training: Training,
    /// Text kept beside the weights in a checkpoint (a character vocabulary, a run's
    /// settings), by key.
    metadata: HashMap<String, String>,
}

/// The seed of a model's weights when nothing else gives them.
pub const DEFAULT_WEIGHT_SEED: u64 = 1;

impl Model {
    /// The seed network (152 → 3 × LSTM 250 → BatchNorm → Dense 100 → BatchNorm → 6),
    /// with weights initialised from [`DEFAULT_WEIGHT_SEED`].
    ///
    /// ```
    /// use tensorfit::Model;
    /// let d = Model::seed().description().clone();
    /// assert_eq!((d.input_features(), d.recurrent().unwrap().hidden, d.recurrent().unwrap().layers), (152, 250, 3));
    /// assert_eq!(d.loss.outputs(), 6);
    /// ```
    pub fn seed() -> Model {
        // The preset is valid, so its initialisation cannot fail.
        Model::new(ModelDescription::seed(), DEFAULT_WEIGHT_SEED)
            .unwrap_or_else(|_| unreachable!("the seed preset is a valid model"))
    }

    /// `description` with weights initialised as PyTorch does, from `seed`.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Error, Model, ModelDescription};
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// let a = Model::new(description.clone(), 7)?;
    /// // The same seed, the same weights.
    /// assert_eq!(a.parameters(), Model::new(description, 7)?.parameters());
    /// // A description that fails its checks is bad input naming the field.
    /// match Model::new(ModelDescription::lstm_classifier(2, 0, 1, 3), 7) {
    ///     Err(Error::BadInput(b)) => {
    ///         assert_eq!(b.argument.as_deref(), Some("description.recurrent.hidden"))
    ///     }
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(description: ModelDescription, seed: u64) -> Result<Model> {
        description.validate().map_err(invalid)?;
        let params = init_params(&description, seed)?;
        Ok(Model::with_parameters(description, params))
    }

    /// `description` with the weights `params` (every tensor it needs, by PyTorch name;
    /// from [`ParamStore::load`] or another model).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Model, ModelDescription};
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// let trained = Model::new(description.clone(), 3)?;
    /// let copy = Model::with_weights(description, trained.parameters().clone())?;
    /// assert_eq!(copy.parameters(), trained.parameters());
    /// // The weights of another model are refused.
    /// let wider = ModelDescription::lstm_classifier(2, 16, 1, 3);
    /// assert!(Model::with_weights(wider, trained.into_parameters()).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_weights(description: ModelDescription, params: ParamStore) -> Result<Model> {
        description.validate().map_err(invalid)?;
        params.check_against(&description)?;
        Ok(Model::with_parameters(description, params))
    }

    fn with_parameters(description: ModelDescription, params: ParamStore) -> Model {
        Model {
            description,
            params,
            training: Training::default(),
            metadata: HashMap::new(),
        }
    }

    /// The model described in the TOML file `path` (as `tensorfit model` prints one),
    /// weights initialised from `seed`. Errors name the file, line and key.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Model, ModelDescription};
    /// let description = ModelDescription::lstm_classifier(2, 8, 1, 3);
    /// let path = std::env::temp_dir().join(format!("tensorfit-doc-{}.toml", std::process::id()));
    /// std::fs::write(&path, description.to_toml()).unwrap();
    /// let model = Model::from_description_file(&path, 1)?;
    /// assert_eq!(model.description(), &description);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_description_file(path: &Path, seed: u64) -> Result<Model> {
        let file = tensorfit_nn::DescriptionFile::load(path)?;
        let params = init_params(&file.model, seed)?;
        Ok(Model::with_parameters(file.model, params))
    }

    /// The model and weights of a checkpoint (written by [`Model::save`],
    /// [`Runner::save`], `tensorfit train --save` or `tensorfit import`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Error, Model, ModelDescription};
    /// let path =
    ///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// model.save(&path)?;
    /// let loaded = Model::load(&path)?;
    /// assert_eq!(loaded.description(), model.description());
    /// assert_eq!(loaded.parameters(), model.parameters());
    /// std::fs::remove_file(&path).unwrap();
    /// assert!(matches!(Model::load(&path), Err(Error::File { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn load(path: &Path) -> Result<Model> {
        let ck = Checkpoint::load(path)?;
        let mut m = Model::with_parameters(ck.config, ck.params);
        m.metadata = ck.extra;
        Ok(m)
    }

    /// Writes the model and its weights as a checkpoint (safetensors, PyTorch's names),
    /// atomically.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Checkpoint, Model, ModelDescription};
    /// let path =
    ///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// model.save(&path)?;
    /// let ck = Checkpoint::load(&path)?;
    /// assert_eq!(&ck.params, model.parameters());
    /// assert!(ck.optimizer.is_empty()); // a model: no optimizer state
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn save(&self, path: &Path) -> Result<()> {
        let ck = Checkpoint {
            config: self.description.clone(),
            params: self.params.clone(),
            optimizer: ParamStore::new(),
            step: 0,
            extra: self.metadata.clone(),
        };
        Ok(ck.save(path)?)
    }

    pub(crate) fn from_checkpoint(ck: Checkpoint, training: Training) -> Model {
        Model {
            description: ck.config,
            params: ck.params,
            training,
            metadata: ck.extra,
        }
    }

    /// What the model is.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Cell, Model, ModelDescription};
    /// let description = ModelDescription::builder().features(2).gru(8, 1).classify(3).build()?;
    /// let model = Model::new(description.clone(), 1)?;
    /// assert_eq!(model.description(), &description);
    /// assert_eq!(model.description().recurrent().unwrap().cell, Cell::Gru);
    /// # Ok(())
    /// # }
    /// ```
    pub fn description(&self) -> &ModelDescription {
        &self.description
    }

    /// Its weights and running statistics, by PyTorch name.
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Model, ModelDescription};
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let w = model.parameters().get("lstm.weight_ih_l0").unwrap();
    /// assert_eq!(w.shape.dims(), &[32, 2]); // PyTorch's layout: 4 gates × 8 units, 2 features
    /// # Ok(())
    /// # }
    /// ```
    pub fn parameters(&self) -> &ParamStore {
        &self.params
    }

    /// Its weights and running statistics, taken out of the model (no copy).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Model, ModelDescription};
    /// let params =
    ///     Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?.into_parameters();
    /// // The LSTM's two weights and two biases, the output layer's weight and bias.
    /// assert_eq!(params.len(), 6);
    /// assert_eq!(params.get("out.bias").unwrap().shape.dims(), &[3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_parameters(self) -> ParamStore {
        self.params
    }

    /// How it trains.
    ///
    /// ```
    /// use tensorfit::{Model, Training};
    /// assert_eq!(Model::seed().training(), &Training::default());
    /// ```
    pub fn training(&self) -> &Training {
        &self.training
    }

    /// The model with these training settings.
    ///
    /// ```
    /// use tensorfit::{Model, OptimConfig, Training};
    /// let training = Training { optim: OptimConfig::adam(1e-2), ..Training::default() };
    /// let model = Model::seed().with_training(training);
    /// assert_eq!(model.training().optim, OptimConfig::adam(1e-2));
    /// ```
    pub fn with_training(mut self, training: Training) -> Model {
        self.training = training;
        self
    }

    /// Text a checkpoint keeps beside the weights, by key.
    ///
    /// ```
    /// use tensorfit::Model;
    /// // A new model has none; a loaded one has its checkpoint's.
    /// assert!(Model::seed().metadata().is_empty());
    /// ```
    pub fn metadata(&self) -> &HashMap<String, String> {
        &self.metadata
    }

    /// The metadata to change before [`Model::save`] (a text's vocabulary, for
    /// example: `tensorfit::data::TextVocab::store`).
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{Model, ModelDescription};
    /// let path =
    ///     std::env::temp_dir().join(format!("tensorfit-doc-{}.safetensors", std::process::id()));
    /// let mut model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// model.metadata_mut().insert("vocab".into(), "abc".into());
    /// model.save(&path)?;
    /// assert_eq!(Model::load(&path)?.metadata()["vocab"], "abc");
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn metadata_mut(&mut self) -> &mut HashMap<String, String> {
        &mut self.metadata
    }

    /// Plans `shapes` (a [`Job`](crate::Job) read as a bound, or [`Shapes`] for padded
    /// batches: see [`crate::Sequences::shapes`]) on every device `devices` allows (a
    /// [`crate::DevicePolicy`], or [`crate::Devices`] discovered once) and chooses one,
    /// without running anything: read the plan, then [`Plan::start`] it.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Model};
    /// use tensorfit::nn::Job;
    /// let plan = Model::seed()
    ///     .plan(Job::Eval { batch: 4, seq_len: 20 }, &DevicePolicy::only_cpu())
    ///     .unwrap();
    /// assert_eq!(plan.device(), Some("cpu"));
    /// assert!(plan.peak_bytes().unwrap() > 0);
    /// ```
    pub fn plan(&self, shapes: impl Into<Shapes>, devices: &impl Placement) -> Result<Plan> {
        Plan::new(self, shapes.into(), devices)
    }

    /// Plans `shapes` and opens them on the chosen device: [`Model::plan`], then
    /// [`Plan::start`].
    ///
    /// ```
    /// # fn main() -> Result<(), tensorfit::Error> {
    /// use tensorfit::{DevicePolicy, HostTensor, Job, Model, ModelDescription};
    /// let model = Model::new(ModelDescription::lstm_classifier(2, 8, 1, 3), 1)?;
    /// let mut run = model.open(Job::Eval { batch: 2, seq_len: 4 }, &DevicePolicy::only_cpu())?;
    /// assert_eq!(run.device(), "cpu");
    /// let probs = run.predict(&HostTensor::zeros([4, 2, 2]))?; // [time, batch, features]
    /// assert_eq!(probs.shape.dims(), &[2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn open(&self, shapes: impl Into<Shapes>, devices: &impl Placement) -> Result<Runner> {
        self.plan(shapes, devices)?.start(self)
    }

    /// Opens a stream of `batch` sequences fed one step at a time, planned like any job
    /// (one step of `batch` sequences), its recurrent state starting at zero.
    ///
    /// ```
    /// use tensorfit::{DevicePolicy, Model};
    /// let mut stream = Model::seed().stream(1, &DevicePolicy::only_cpu()).unwrap();
    /// let mut x = vec![0.0; 152];
    /// x[3] = 1.0;
    /// let probs = stream.step(&x).unwrap();
    /// assert_eq!(probs.len(), 6);
    /// ```
    pub fn stream(&self, batch: usize, devices: &impl Placement) -> Result<Stream> {
        Stream::open(self, batch, devices)
    }
}

/// A description that fails its checks, as bad input naming the field at fault.
fn invalid(e: tensorfit_nn::InvalidDescription) -> Error {
    let message = e.to_string();
    Error::BadInput(match e.field() {
        Some(field) => BadInput {
            argument: Some(format!("description.{field}")),
            ..BadInput::new(message)
        },
        None => BadInput::new(message),
    })
}
