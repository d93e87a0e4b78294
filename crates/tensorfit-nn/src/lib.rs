//! tensorfit-nn: the models and the training loop.
//!
//! [`ModelConfig`] describes the stacked-LSTM classifier (with the `seed` preset);
//! [`Network`] is it as typed [`layers`], each owning its tensors (PyTorch's names), its
//! forward builder and its carried state; [`model`] builds its graphs; [`programs`] the
//! graphs a run is made of, named by [`ProgramKey`]s; [`optim`] appends PyTorch's optimizers (Adam, AdamW, SGD), gradient clipping and learning-rate schedules;
//! [`Trainer`] runs truncated BPTT on any [`tensorfit_core::Backend`]; [`TemporalOrder`]
//! is the built-in task; [`ParamStore`] moves weights in and out (safetensors, PyTorch's
//! names).

#![forbid(unsafe_code)]

pub mod atomic_file;
pub mod checkpoint;
pub mod config;
pub mod description;
pub mod layers;
pub mod model;
pub mod network;
pub mod optim;
pub mod options;
pub mod params;
pub mod programs;
mod recompute;
pub mod run_settings;
pub mod safetensors_file;
pub mod task;
mod train_graph;
pub mod trainer;

pub use checkpoint::Checkpoint;
pub use config::{ModelConfig, TRAIN_FLOPS_PER_FORWARD};
pub use description::{
    Cell, HeadLayer, HeadLayerKind, HeadOn, HeadSpec, InputSpec, LossSpec, ModelDescription,
    RecurrentSpec,
};
pub use layers::{Init, ParamKind, ParamSpec};
pub use model::Mode;
pub use network::Network;
pub use optim::{AdamConfig, Clip, OptimConfig, OptimSettings, Optimizer, Schedule, SgdConfig};
pub use options::{Job, ProgramKey, ProgramKind, TrainOptions};
pub use params::ParamStore;
pub use programs::{PersistentKey, Program};
pub use run_settings::RunSettings;
pub use task::{Batch, TemporalOrder};
pub use tensorfit_core::Rng;
pub use trainer::{argmax, EvalReport, StepReport, Trainer};
