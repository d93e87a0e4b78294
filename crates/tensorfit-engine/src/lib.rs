//! tensorfit's engine: the decision and the session beneath the `tensorfit` front door.
//!
//! A [`Request`](decision::Request) (a model, a job, the devices allowed) goes through one
//! pipeline: [`devices`] finds the devices through the backends of [`registry`] (or [`assume`] describes absent ones) →
//! [`strategy`] lists the ways to run the job → each is planned
//! ([`decision::plan_job`], with the host's share from [`host_budget`]) → timed
//! ([`calibrate`] measures a device, [`estimate`] prices a plan) → [`decision`] chooses.
//! [`max_job`] searches the largest job that fits. [`session`] runs the choice;
//! [`recovery`] moves it when its device fails, [`job_switch`] when the batch changes
//! shape. [`distributed`] trains over MPI ranks; [`checkpoint_dir`] and [`output_lock`]
//! keep a run's files from being written by two processes; `faults` (the
//! `fault-injection` feature, for tests) makes a device fail on purpose.
//!
//! An app does not need this crate: the `tensorfit` crate's `Model`, `DevicePolicy`,
//! `Plan` and `Runner` are the front door.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod assume;
pub mod calibrate;
pub mod checkpoint_dir;
pub mod decision;
pub mod devices;
pub mod distributed;
pub mod estimate;
#[cfg(any(test, feature = "fault-injection"))]
pub mod faults;
pub mod host_budget;
pub mod job_switch;
pub mod max_job;
pub mod output_lock;
pub mod recovery;
pub mod registry;
pub mod session;
pub mod strategy;
