//! Helpers shared by this crate's integration tests and its bench.

pub mod generate;
