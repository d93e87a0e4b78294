//! tensorfit-plan: how much memory a run takes, exactly, before it runs; and which
//! device should run it.
//!
//! [`liveness`](mod@liveness) reads each tensor's lifetime off a scheduled graph; [`arena`] places
//! tensors at offsets so that tensors alive at the same time never share bytes;
//! [`MemoryPlan`] is the result for a whole run (persistent tensors, shared scratch
//! arenas, backend overhead), printable as a table, as JSON and as a picture ([`svg`]);
//! [`policy`] compares plans with device capacities and picks the fastest that fits. No
//! backend code is here: the planner is testable anywhere.

#![forbid(unsafe_code)]

pub mod arena;
pub mod liveness;
pub mod memory;
pub mod policy;
pub mod size;
pub mod svg;

pub use liveness::{liveness, Category, Lifetime, Liveness};
pub use memory::{Entry, Limits, MemoryPlan, ProgramPlan, ProgramSpec};
pub use policy::{choose, usable_bytes, Candidate, DEFAULT_MARGIN};
pub use size::{format_bytes, format_seconds, parse_size};
