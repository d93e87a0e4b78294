//! Times the attention kernels, the fast path (what the backend runs) against the
//! reference, at a Transformer encoder's shape: B = 32, T = 128, D = 256, 4 heads.
//!
//! ```sh
//! RAYON_NUM_THREADS=2 cargo run --release -p tensorfit-cpu --example attention_timing
//! ```
//!
//! Prints the median of 15 timed runs (after one warm-up) of each kernel on the kernel
//! threads, and the worst difference between the two paths' outputs.

use std::time::Instant;

use tensorfit_core::{AttentionDims, Result, Shape};
use tensorfit_cpu::kernels::{attention as reference, attention_fast as fast, gemm_fast};
use tensorfit_cpu::threads::kernel_pool;

const RUNS: usize = 15;

/// The median of `RUNS` timed calls of `f` (after one untimed), in milliseconds.
fn median_ms(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[RUNS / 2])
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn worst(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

fn main() -> Result<()> {
    let (t, b, features, heads) = (128, 32, 256, 4);
    let d = AttentionDims::of(heads, &Shape::from([t, b, features]))
        .map_err(tensorfit_core::Error::Graph)?;
    let seq = d.sequence().numel();
    let block = d.probs().numel();
    let (q, k, v, dout, dp) = (
        values(seq, 1),
        values(seq, 2),
        values(seq, 3),
        values(seq, 4),
        values(block, 5),
    );
    let token = gemm_fast::simd();
    let pool = kernel_pool()?;
    println!(
        "attention kernels at B {b}, T {t}, D {features}, {heads} heads; {} kernel threads; AVX-512 {}",
        pool.current_num_threads(),
        token.is_some()
    );
    println!(
        "{:<28} {:>12} {:>12} {:>8} {:>12}",
        "kernel", "reference ms", "fast ms", "speed-up", "max |diff|"
    );
    for lengths in [None, Some(vec![100.0f32; b])] {
        let l = lengths.as_deref();
        let tag = if l.is_some() { " (L 100)" } else { "" };
        let (mut p_ref, mut p_fast) = (vec![0.0; block], vec![0.0; block]);
        let (mut o_ref, mut o_fast) = (vec![0.0; seq], vec![0.0; seq]);
        let (mut dp_ref, mut dp_fast) = (vec![0.0; block], vec![0.0; block]);
        let (mut dv_ref, mut dv_fast) = (vec![0.0; seq], vec![0.0; seq]);
        let (mut dq_ref, mut dq_fast) = (vec![0.0; seq], vec![0.0; seq]);
        let (mut dk_ref, mut dk_fast) = (vec![0.0; seq], vec![0.0; seq]);
        let rows: Vec<(String, f64, f64, f32)> = pool.install(|| -> Result<_> {
            let scores = (
                median_ms(|| reference::attention_scores(d, false, l, &q, &k, &mut p_ref))?,
                median_ms(|| fast::attention_scores(token, d, false, l, (&q, &k), &mut p_fast))?,
            );
            let mix = (
                median_ms(|| reference::attention_mix(d, &p_ref, &v, &mut o_ref))?,
                median_ms(|| fast::attention_mix(token, d, &p_ref, &v, &mut o_fast))?,
            );
            let inputs = (&p_ref[..], &v[..], &dout[..]);
            let mix_back = (
                median_ms(|| {
                    reference::attention_mix_backward(d, inputs, &mut dp_ref, &mut dv_ref)
                })?,
                median_ms(|| {
                    fast::attention_mix_backward(token, d, inputs, &mut dp_fast, &mut dv_fast)
                })?,
            );
            let qk = (&q[..], &k[..]);
            let pdp = (&p_ref[..], &dp[..]);
            let inputs = (&q[..], &k[..], &p_ref[..], &dp[..]);
            let scores_back = (
                median_ms(|| {
                    reference::attention_scores_backward(d, qk, pdp, &mut dq_ref, &mut dk_ref)
                })?,
                median_ms(|| {
                    fast::attention_scores_backward(token, d, inputs, &mut dq_fast, &mut dk_fast)
                })?,
            );
            Ok(vec![
                (
                    format!("attention_scores{tag}"),
                    scores.0,
                    scores.1,
                    worst(&p_ref, &p_fast),
                ),
                (
                    format!("attention_mix{tag}"),
                    mix.0,
                    mix.1,
                    worst(&o_ref, &o_fast),
                ),
                (
                    format!("attention_mix_backward{tag}"),
                    mix_back.0,
                    mix_back.1,
                    worst(&dp_ref, &dp_fast).max(worst(&dv_ref, &dv_fast)),
                ),
                (
                    format!("attention_scores_backward{tag}"),
                    scores_back.0,
                    scores_back.1,
                    worst(&dq_ref, &dq_fast).max(worst(&dk_ref, &dk_fast)),
                ),
            ])
        })?;
        let (mut total_ref, mut total_fast) = (0.0, 0.0);
        for (name, r, f, diff) in rows {
            println!(
                "{name:<28} {r:>12.3} {f:>12.3} {:>7.1}x {diff:>12.2e}",
                r / f
            );
            total_ref += r;
            total_fast += f;
        }
        println!(
            "{:<28} {total_ref:>12.3} {total_fast:>12.3} {:>7.1}x",
            format!("all four{tag}"),
            total_ref / total_fast
        );
    }
    Ok(())
}
