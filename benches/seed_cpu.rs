//! The seed network on the CPU backend (see `common/mod.rs` for the workloads and the
//! figures printed). The CPU backend is synchronous, so each timed call includes all of
//! its work.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use tensorfit::core::Backend;
use tensorfit::cpu::CpuBackend;

fn benches(c: &mut Criterion) {
    let open = || Ok(Box::new(CpuBackend::new()) as Box<dyn Backend>);
    common::seed_benches(c, "seed_cpu", open);
}

criterion_group!(group, benches);
criterion_main!(group);
