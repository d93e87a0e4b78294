//! The seed network on the wgpu backend, the same workloads as `seed_cpu` (see
//! `common/mod.rs`). Without a GPU adapter the bench prints why and measures nothing; on
//! a software adapter (lavapipe) the figures are a smoke test only.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use tensorfit::core::Backend;
use tensorfit_wgpu::WgpuBackend;

fn benches(c: &mut Criterion) {
    match WgpuBackend::new() {
        Ok(b) => println!("wgpu adapter: {}", b.info().name),
        Err(e) => {
            println!("seed_wgpu: skipped — {e}");
            return;
        }
    }
    let open = || Ok(Box::new(WgpuBackend::new()?) as Box<dyn Backend>);
    common::seed_benches(c, "seed_wgpu", open);
}

criterion_group!(group, benches);
criterion_main!(group);
