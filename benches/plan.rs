//! Planner speed: planning the seed network at sequence length 2000 (inference, and
//! training with truncated BPTT 50 plus its evaluation programs). The graph has one node
//! per coarse op, not per time step, so planning time does not grow with the length.

use criterion::{criterion_group, criterion_main, Criterion};
use tensorfit::nn::{AdamConfig, Job, ModelConfig, TrainOptions};
use tensorfit::plan::Limits;
use tensorfit::session::plan_job;

fn bench(c: &mut Criterion) {
    let cfg = ModelConfig::seed();
    let limits = Limits {
        max_buffer_bytes: 1 << 31,
        alignment_bytes: 256,
        overhead_bytes: 0,
    };
    let opts = |chunk| TrainOptions {
        tbptt: 50,
        chunk,
        micro_batch: None,
        recompute: None,
        adam: AdamConfig::default(),
    };
    let infer = Job::Eval {
        batch: 100,
        seq_len: 2000,
    };
    let train = Job::Train {
        batch: 100,
        seq_len: 2000,
        eval: Some((100, 2000)),
    };
    let mut g = c.benchmark_group("plan_seed_t2000");
    g.bench_function("infer_whole", |b| {
        b.iter(|| {
            plan_job(&cfg, &opts(2000), infer, limits)
                .map(|p| p.peak_bytes())
                .ok()
        })
    });
    g.bench_function("infer_chunks_250", |b| {
        b.iter(|| {
            plan_job(&cfg, &opts(250), infer, limits)
                .map(|p| p.peak_bytes())
                .ok()
        })
    });
    g.bench_function("train_tbptt_50", |b| {
        b.iter(|| {
            plan_job(&cfg, &opts(50), train, limits)
                .map(|p| p.peak_bytes())
                .ok()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
