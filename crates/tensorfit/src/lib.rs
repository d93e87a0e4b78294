//! tensorfit: train and run recurrent sequence models (LSTM and GRU stacks) on whatever
//! device they fit, chosen before anything runs.
//!
//! Apps start at [`api`], the front door, whose types are re-exported here: [`Model`]
//! (described with [`ModelBuilder`] or a TOML file), [`DevicePolicy`], [`Plan`],
//! [`Runner`], [`Sequences`], [`Stream`] and [`Error`] (with [`BadInput`]). They are the
//! stable surface; `Runner` and `Stream` are `Send`. The modules below are the engine
//! beneath it, public for the `tensorfit` command and the tests: an app does not need
//! them (see `docs/api.md`).
//!
//! This facade re-exports the workspace's crates under one name, with the engine's
//! modules (`tensorfit-engine`: the decision and the session, which plan a job on every
//! device and run it on the fastest one where it fits):
//! - [`core`]: graphs of coarse ops, autodiff, schedule, the `Backend` trait;
//! - [`cpu`]: the reference backend (rayon + matrixmultiply);
//! - [`nn`]: the seed model, Adam, the truncated-BPTT trainer, the built-in task;
//! - [`data`]: users' files read into batches;
//! - [`plan`]: the memory planner and the device-choice policy;
//! - [`registry`]: the backends this build knows, and providers an app adds;
//! - [`devices`], [`calibrate`], [`strategy`], [`estimate`], [`decision`]: discovery,
//!   throughput, strategies, time estimates and the choice; [`session`], [`recovery`]: the
//!   run on the chosen device and its moves when that device fails; [`job_switch`]: the
//!   same run moved onto the plan of another batch size or sequence length;
//! - [`distributed`]: data-parallel training over the ranks of an MPI launch;
//! - [`checkpoint_dir`]: a training run's checkpoint directory, locked while in use;
//!   [`output_lock`]: an output file, written by one process at a time.
//!
//! The `tensorfit` command is the `tensorfit-cli` package at the repository's root
//! (`src/main.rs`, one module per subcommand in `src/cli/`), built on this crate.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[warn(missing_docs)]
pub mod api;

pub use tensorfit_engine::{
    assume, calibrate, checkpoint_dir, decision, devices, distributed, estimate, host_budget,
    job_switch, max_job, output_lock, recovery, registry, session, strategy,
};

pub use tensorfit_core as core;
pub use tensorfit_cpu as cpu;
pub use tensorfit_data as data;
pub use tensorfit_nn as nn;
pub use tensorfit_plan as plan;

pub use api::{
    quiet_mesa, BadInput, Control, DevicePolicy, Devices, Error, Event, FitOptions, FitReport,
    Model, Placement, Plan, Result, Runner, Scores, Sequences, Shapes, Stopped, Stream,
    TrainPosition, TrainReport, Training, Validated, POSITION_KEY,
};
/// The types the front door's signatures take and give, at the root: an app describes a
/// model, plans, trains and predicts with `tensorfit::*` alone.
pub use tensorfit_core::{Activation, DeviceKind, HostTensor};
pub use tensorfit_data::BatchOrder;
pub use tensorfit_engine::calibrate::Calibration;
/// The full planning request (what [`Plan::from_request`] plans: a model's job with the
/// settings a [`Training`] does not hold — padded or carried batches, data-parallel
/// ranks, the reader's host memory) and the devices [`Plan::on_devices`] plans on.
pub use tensorfit_engine::decision::Request;
/// The devices' figures and memory caps the front door's signatures take and give.
pub use tensorfit_engine::devices::{DeviceStatus, MemoryCaps};
pub use tensorfit_nn::{
    Batch, BuildError, CarriedState, Cell, Checkpoint, ConvPadding, EvalReport, Job, ModelBuilder,
    ModelDescription, OptimConfig, ParamStore, PositionEncoding, StepReport, TbpttMode,
};
