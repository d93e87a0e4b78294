//! tensorfit-nn: the models and the training loop.
//!
//! [`ModelConfig`] describes the stacked-LSTM classifier (with the `seed` preset);
//! [`model`] builds its graphs; [`AdamConfig`] appends PyTorch's Adam as update nodes;
//! [`Trainer`] runs truncated BPTT on any [`tensorfit_core::Backend`]; [`TemporalOrder`]
//! is the built-in task; [`ParamStore`] moves weights in and out (safetensors, PyTorch's
//! names).

#![forbid(unsafe_code)]

pub mod adam;
pub mod atomic_file;
pub mod checkpoint;
pub mod config;
pub mod model;
pub mod params;
pub mod programs;
mod recompute;
pub mod run_settings;
pub mod safetensors_file;
pub mod task;
pub mod trainer;

pub use adam::AdamConfig;
pub use checkpoint::Checkpoint;
pub use config::{ModelConfig, ParamKind, ParamSpec};
pub use model::Mode;
pub use params::ParamStore;
pub use programs::{Program, ProgramKey, ProgramKind};
pub use run_settings::RunSettings;
pub use task::{Batch, TemporalOrder};
pub use tensorfit_core::Rng;
pub use trainer::{argmax, EvalReport, Job, StepReport, TrainOptions, Trainer};
