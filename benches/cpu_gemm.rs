//! The CPU fast path's GEMM (`tensorfit_cpu::kernels::gemm_fast`) at the seed network's
//! shapes: the per-step products one thread runs inside the LSTM time loop (the
//! recurrent weights packed once per call, so packing is not timed; also a 1024-wide
//! layer's, whose `w_hhᵀ` of 16 MiB streams from L3), and the large
//! products over all steps (projection, weight gradients) split across rayon's threads
//! with `B` packed in the timed call, as the LSTM kernels call them.
//!
//! Prints a table of medians in GFLOP/s first (7 timed runs after one warm-up), then
//! hands the same products to criterion. On a CPU without AVX-512 the fast path does not
//! exist and the bench says so.

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use tensorfit::cpu::kernels::gemm_fast::{
    gemm_packed, gemm_packed_serial, simd, MatRef, PackedB, Token,
};

/// `[m, k] · [k, n]` (`a` transposed in memory when `trans_a`), by name.
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    trans_a: bool,
    /// One thread with `B` packed beforehand (the per-step products), or all threads
    /// packing `B` in the call (the products over all steps).
    per_step: bool,
}

const SHAPES: [Shape; 9] = [
    Shape {
        name: "step train 16x250x1000",
        m: 16,
        k: 250,
        n: 1000,
        trans_a: false,
        per_step: true,
    },
    Shape {
        name: "step infer 50x250x1000",
        m: 50,
        k: 250,
        n: 1000,
        trans_a: false,
        per_step: true,
    },
    Shape {
        name: "step dh 16x1000x250",
        m: 16,
        k: 1000,
        n: 250,
        trans_a: false,
        per_step: true,
    },
    Shape {
        name: "step wide 16x1024x4096",
        m: 16,
        k: 1024,
        n: 4096,
        trans_a: false,
        per_step: true,
    },
    Shape {
        name: "step wide 50x1024x4096",
        m: 50,
        k: 1024,
        n: 4096,
        trans_a: false,
        per_step: true,
    },
    Shape {
        name: "projection 20000x250x1000",
        m: 20000,
        k: 250,
        n: 1000,
        trans_a: false,
        per_step: false,
    },
    Shape {
        name: "dW 1000x1600x250 (A^T)",
        m: 1000,
        k: 1600,
        n: 250,
        trans_a: true,
        per_step: false,
    },
    Shape {
        name: "dx 1600x1000x250",
        m: 1600,
        k: 1000,
        n: 250,
        trans_a: false,
        per_step: false,
    },
    Shape {
        name: "square 1024",
        m: 1024,
        k: 1024,
        n: 1024,
        trans_a: false,
        per_step: false,
    },
];

/// Operands of one shape, with deterministic values; `B` packed beforehand for the
/// per-step products.
struct Operands {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    packed: Option<PackedB>,
}

impl Operands {
    fn new(s: &Shape) -> Self {
        let a: Vec<f32> = (0..s.m * s.k).map(|i| (i % 7) as f32 * 0.1).collect();
        let b: Vec<f32> = (0..s.k * s.n).map(|i| (i % 5) as f32 * 0.1).collect();
        let packed = s
            .per_step
            .then(|| PackedB::new(MatRef::row_major(&b, s.k, s.n)));
        Operands {
            a,
            b,
            c: vec![0.0; s.m * s.n],
            packed,
        }
    }

    /// One product as the LSTM kernels run it.
    fn run(&mut self, token: Token, s: &Shape) {
        let a = if s.trans_a {
            MatRef::row_major(&self.a, s.k, s.m).t()
        } else {
            MatRef::row_major(&self.a, s.m, s.k)
        };
        match &self.packed {
            Some(b) => gemm_packed_serial(token, a, b, 1.0, None, &mut self.c),
            None => {
                let b = PackedB::new(MatRef::row_major(&self.b, s.k, s.n));
                gemm_packed(token, a, &b, 0.0, None, &mut self.c);
            }
        }
    }
}

fn benches(c: &mut Criterion) {
    let Some(token) = simd() else {
        println!("cpu_gemm: skipped — this CPU has no AVX-512, so there is no fast path to time");
        return;
    };
    let mut group = c.benchmark_group("cpu_gemm");
    group.sample_size(10);
    for s in &SHAPES {
        let mut ops = Operands::new(s);
        // Per-step products are short: time 100 of them per run.
        let reps = if s.per_step { 100 } else { 1 };
        let mut run = || {
            for _ in 0..reps {
                ops.run(token, s);
            }
        };
        let ms = common::median_ms(7, || {
            run();
            Ok(())
        });
        let flops = 2.0 * (s.m * s.k * s.n * reps) as f64;
        if let Ok(ms) = ms {
            println!("{:<28} {:7.1} GFLOP/s", s.name, flops / ms / 1e6);
        }
        group.bench_function(s.name, |bench| bench.iter(|| ops.run(token, s)));
    }
    group.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
