//! Planner speed: planning the seed network at sequence length 2000 (inference, and
//! training with truncated BPTT 50 plus its evaluation programs). The graph has one node
//! per coarse op, not per time step, so planning time does not grow with the length.

use criterion::{criterion_group, criterion_main, Criterion};
use tensorfit::nn::{Job, ModelDescription, TrainOptions};
use tensorfit::plan::Limits;
use tensorfit::session::plan_job;

fn bench(c: &mut Criterion) {
    let cfg = ModelDescription::seed();
    let limits = Limits {
        max_buffer_bytes: 1 << 31,
        alignment_bytes: 256,
        overhead_bytes: 0,
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
    for (id, chunk, job) in [
        ("infer_whole", 2000, infer),
        ("infer_chunks_250", 250, infer),
        ("train_tbptt_50", 50, train),
    ] {
        let opts = TrainOptions {
            tbptt: 50,
            chunk,
            ..TrainOptions::default()
        };
        g.bench_function(id, |b| {
            b.iter(|| {
                plan_job(&cfg, &opts, job, limits)
                    .map(|p| p.peak_bytes())
                    .ok()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
