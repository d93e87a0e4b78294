//! The library's front door: everything the `tensorfit` command does, for an app.
//!
//! - [`Model`]: a model's description and weights (the seed preset, a description, a TOML
//!   file or a checkpoint), and its [`Training`] settings;
//! - [`DevicePolicy`]: which devices a job may use and how much of their memory;
//! - [`Plan`]: a job planned on every allowed device, and the choice, before anything runs;
//! - [`Runner`]: the job open on its device: [`Runner::fit`] with a per-step callback
//!   ([`Control`]), evaluate, predict, save;
//! - [`Sequences`]: labelled sequences held in memory, cut into batches;
//! - [`Stream`]: stateful inference, one time step per call;
//! - [`Error`]: what went wrong, as an app matches on it.
//!
//! A complete program (the README's "Use as a library"):
//!
//! ```
//! use tensorfit::{Control, DeviceKind, DevicePolicy, Job, Model, Sequences};
//!
//! # fn main() -> Result<(), tensorfit::Error> {
//! // 8 sequences of 20 steps of 152 features; the class is whether the first step is hot.
//! let inputs: Vec<Vec<f32>> = (0..8)
//!     .map(|i| (0..20 * 152).map(|k| if k == 0 && i % 2 == 1 { 1.0 } else { 0.0 }).collect())
//!     .collect();
//! let labels: Vec<f32> = (0..8).map(|i| (i % 2) as f32).collect();
//! let data = Sequences::new(inputs, labels, 152)?;
//!
//! let model = Model::seed();
//! let devices = DevicePolicy::auto().cap(DeviceKind::Cpu, 1 << 30);
//! let job = Job::Train { batch: 4, seq_len: 20, eval: Some((8, 20)) };
//! let mut run = model.open(job, &devices)?;
//! let fit = run.fit(data.batches(4, 2, 7), |step| {
//!     println!("step {} loss {:.3}", step.step, step.loss);
//!     if step.loss < 0.01 { Control::Stop } else { Control::Continue }
//! })?;
//! assert_eq!(fit.steps, 4);
//! let all = data.all()?;
//! let report = run.evaluate(&all.x, &all.labels)?;
//! assert!(report.loss.is_finite());
//! # Ok(())
//! # }
//! ```

mod bad_input;
mod devices;
mod discovered;
mod error;
mod model;
mod plan;
mod quiet;
mod run_carrying;
mod run_eval;
mod run_info;
mod run_ranks;
mod run_state;
mod runner;
mod sequences;
mod shapes;
mod stream;
mod train_loop;
mod train_options;
mod train_position;
mod train_report;

pub use devices::DevicePolicy;
pub use discovered::{Devices, Placement};
pub use error::{BadInput, Error, Result};
pub use model::{Model, Training, DEFAULT_WEIGHT_SEED};
pub use plan::Plan;
pub use quiet::quiet_mesa;
pub use runner::{Control, FitReport, Runner};
pub use sequences::Sequences;
pub use shapes::Shapes;
pub use stream::Stream;
pub use train_options::FitOptions;
pub use train_position::{TrainPosition, POSITION_KEY};
pub use train_report::{Event, Scores, Stopped, TrainReport, Validated};
