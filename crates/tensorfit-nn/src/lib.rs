//! tensorfit-nn: the models and the training loop.
//!
//! [`ModelDescription`] is a user's model (with the `seed` preset), checked by
//! [`ModelDescription::validate`]; [`Network`] is it as typed [`layers`], each owning its tensors (PyTorch's names), its
//! forward builder and its carried state; [`model`] builds its graphs; [`programs`] the
//! graphs a run is made of, named by [`ProgramKey`]s; [`optim`] appends PyTorch's optimizers (Adam, AdamW, SGD), gradient clipping and learning-rate schedules;
//! [`Trainer`] runs truncated BPTT on any [`tensorfit_core::Backend`]; [`TemporalOrder`]
//! is the built-in task; [`ParamStore`] moves weights in and out (safetensors, PyTorch's
//! names).

#![forbid(unsafe_code)]

pub mod atomic_file;
mod batch_input;
pub mod bound;
pub mod builder;
mod builder_body;
pub mod builtin_task;
pub mod checkpoint;
pub mod description;
pub mod description_check;
pub mod description_json;
pub mod description_toml;
pub mod every_step;
pub mod layers;
pub mod markov_text;
pub mod model;
pub mod model_size;
pub mod network;
pub mod optim;
pub mod options;
pub mod padded_reach;
pub mod params;
pub mod program_runs;
pub mod programs;
pub mod pytorch_import;
mod recompute;
pub mod run_settings;
pub mod running_mean;
pub mod safetensors_file;
pub mod safetensors_write;
pub mod seed_shape;
mod sync_head;
pub mod task;
mod train_graph;
pub mod trainer;
mod update_graph;

pub use builder::{BuildError, ModelBuilder};
pub use builtin_task::BuiltinTask;
pub use checkpoint::Checkpoint;
pub use description::{
    BodyLayer, Cell, Conv1dSpec, ConvPadding, DropoutRate, EncoderSpec, HeadLayer, HeadLayerKind,
    HeadOn, HeadSpec, InputSpec, LossSpec, ModelDescription, PositionEncoding, PositionsSpec,
    RecurrentSpec, Reduce,
};
pub use description_check::InvalidDescription;
pub use description_toml::{
    DataFigures, DescriptionError, DescriptionFile, Figure, FromData, TrainingEntry, TrainingValue,
};
pub use layers::{Init, ParamKind, ParamSpec};
pub use markov_text::MarkovText;
pub use model::Mode;
pub use model_size::TRAIN_FLOPS_PER_FORWARD;
pub use network::Network;
pub use optim::{AdamConfig, Clip, OptimConfig, OptimSettings, Optimizer, Schedule, SgdConfig};
pub use options::{Job, ProgramKey, ProgramKind, TbpttMode, TrainOptions};
pub use padded_reach::Reach;
pub use params::ParamStore;
pub use programs::{PersistentKey, Program};
pub use pytorch_import::import_state_dict;
pub use recompute::recomputable;
pub use run_settings::{DataSettings, RunSettings};
pub use running_mean::RunningMean;
pub use seed_shape::SeedShape;
pub use task::{Batch, TemporalOrder};
pub use tensorfit_core::Rng;
pub use trainer::{argmax, CarriedState, EvalReport, StepReport, Trainer};
