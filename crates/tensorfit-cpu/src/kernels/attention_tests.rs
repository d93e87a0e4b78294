//! The attention kernels: the reference against a naive f64 computation of the formulas,
//! the fast path against the reference (with and without AVX-512, on one thread and on
//! several), the masks, and bad input.

use super::*;
use tensorfit_core::{Error, Shape};
use tensorfit_testing::{assert_close, Rng, TestRng};

/// The sizes of `heads` heads over `[T, B, D]`.
fn dims(t: usize, b: usize, features: usize, heads: usize) -> AttentionDims {
    AttentionDims::of(heads, &Shape::from([t, b, features])).unwrap()
}

/// `probs` of the formula in f64: softmax over `j < keys(i)` of `q_i · k_j / sqrt(Dh)`.
fn naive_scores(d: &AttentionDims, causal: bool, ends: &[usize], q: &[f32], k: &[f32]) -> Vec<f64> {
    let (t, dh) = (d.steps, d.head_dim);
    let mut probs = vec![0.0; d.probs().numel()];
    for p in 0..d.pairs() {
        for i in 0..t {
            let n = d.keys(causal, i, ends[p / d.heads]);
            let s: Vec<f64> = (0..n)
                .map(|j| {
                    let dot: f64 = (0..dh)
                        .map(|f| q[head(d, i, p) + f] as f64 * k[head(d, j, p) + f] as f64)
                        .sum();
                    dot / (dh as f64).sqrt()
                })
                .collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = s.iter().map(|v| (v - max).exp()).sum();
            for (j, v) in s.iter().enumerate() {
                probs[(p * t + i) * t + j] = (v - max).exp() / sum;
            }
        }
    }
    probs
}

/// `(out, dprobs, dv, dq, dk)` of the formulas in f64, for the weights `probs`, the
/// gradients `dout` at `out` and `dprobs_in` at the weights.
#[allow(clippy::type_complexity)]
fn naive_rest(
    d: &AttentionDims,
    (q, k, v): (&[f32], &[f32], &[f32]),
    probs: &[f32],
    (dout, dprobs_in): (&[f32], &[f32]),
) -> [Vec<f64>; 5] {
    let (t, dh) = (d.steps, d.head_dim);
    let seq = d.sequence().numel();
    let (mut out, mut dv, mut dq, mut dk) = (
        vec![0.0; seq],
        vec![0.0; seq],
        vec![0.0; seq],
        vec![0.0; seq],
    );
    let mut dprobs = vec![0.0; probs.len()];
    let at = |p: usize, i: usize, j: usize| (p * t + i) * t + j;
    for p in 0..d.pairs() {
        for i in 0..t {
            let r: f64 = (0..t)
                .map(|j| probs[at(p, i, j)] as f64 * dprobs_in[at(p, i, j)] as f64)
                .sum();
            for j in 0..t {
                let w = probs[at(p, i, j)] as f64;
                let ds = w * (dprobs_in[at(p, i, j)] as f64 - r) / (dh as f64).sqrt();
                for f in 0..dh {
                    let (qi, kj) = (head(d, i, p) + f, head(d, j, p) + f);
                    out[qi] += w * v[kj] as f64;
                    dprobs[at(p, i, j)] += dout[qi] as f64 * v[kj] as f64;
                    dv[kj] += w * dout[qi] as f64;
                    dq[qi] += ds * k[kj] as f64;
                    dk[kj] += ds * q[qi] as f64;
                }
            }
        }
    }
    [out, dprobs, dv, dq, dk]
}

/// Random `q`, `k`, `v`, `dout` `[T, B, D]` and `dprobs` `[B, heads, T, T]`.
fn inputs(d: &AttentionDims, rng: &mut Rng) -> [Vec<f32>; 5] {
    let seq = d.sequence().numel();
    let mut draw = |n: usize, scale: f32| -> Vec<f32> {
        rng.signed_vec(n).into_iter().map(|v| v * scale).collect()
    };
    [
        draw(seq, 2.0),
        draw(seq, 2.0),
        draw(seq, 1.0),
        draw(seq, 1.0),
        draw(d.probs().numel(), 1.0),
    ]
}

/// Every kernel's outputs for one case: `(probs, out, dprobs, dv, dq, dk)`, by the
/// reference, or by the fast path with `token` (`fast`).
fn run(
    d: AttentionDims,
    causal: bool,
    lengths: Option<&[f32]>,
    [q, k, v, dout, dp]: &[Vec<f32>; 5],
    fast: Option<Option<gemm_fast::Token>>,
) -> [Vec<f32>; 6] {
    let (seq, block) = (d.sequence().numel(), d.probs().numel());
    let mut probs = vec![f32::NAN; block];
    let mut out = vec![f32::NAN; seq];
    let mut dprobs = vec![f32::NAN; block];
    let (mut dv, mut dq, mut dk) = (out.clone(), out.clone(), out.clone());
    match fast {
        None => {
            attention_scores(d, causal, lengths, q, k, &mut probs).unwrap();
            attention_mix(d, &probs, v, &mut out).unwrap();
            attention_mix_backward(d, (&probs, v, dout), &mut dprobs, &mut dv).unwrap();
            attention_scores_backward(d, (q, k), (&probs, dp), &mut dq, &mut dk).unwrap();
        }
        Some(token) => {
            fast::attention_scores(token, d, causal, lengths, (q, k), &mut probs).unwrap();
            fast::attention_mix(token, d, &probs, v, &mut out).unwrap();
            let inputs = (&probs[..], &v[..], &dout[..]);
            fast::attention_mix_backward(token, d, inputs, &mut dprobs, &mut dv).unwrap();
            let inputs = (&q[..], &k[..], &probs[..], &dp[..]);
            fast::attention_scores_backward(token, d, inputs, &mut dq, &mut dk).unwrap();
        }
    }
    [probs, out, dprobs, dv, dq, dk]
}

const NAMES: [&str; 6] = ["probs", "out", "dprobs", "dv", "dq", "dk"];

/// A case: `(T, B, D, heads, causal, lengths)`.
type Case = (usize, usize, usize, usize, bool, Option<Vec<f32>>);

/// The cases.
fn cases() -> Vec<Case> {
    vec![
        (5, 3, 6, 3, false, Some(vec![5.0, 0.0, 2.0])),
        (5, 3, 6, 3, true, Some(vec![1.0, 5.0, 3.0])),
        (4, 2, 4, 1, true, None),
        (1, 2, 3, 1, false, Some(vec![1.0, 0.0])),
        (7, 1, 8, 2, false, None),
        (20, 2, 34, 2, true, Some(vec![13.0, 20.0])),
    ]
}

#[test]
fn the_reference_computes_the_formulas() {
    let mut rng = Rng::new(31);
    for (t, b, f, heads, causal, lengths) in cases() {
        let d = dims(t, b, f, heads);
        let x = inputs(&d, &mut rng);
        let got = run(d, causal, lengths.as_deref(), &x, None);
        let ends: Vec<usize> = match &lengths {
            Some(l) => l.iter().map(|&v| v as usize).collect(),
            None => vec![t; b],
        };
        let what = format!("T{t} B{b} D{f} heads {heads} causal {causal} {lengths:?}");
        let probs = naive_scores(&d, causal, &ends, &x[0], &x[1]);
        assert_close(&format!("{what} probs"), &got[0], &probs, 1e-6, 1e-5);
        let [q, k, v, dout, dp] = &x;
        let want = naive_rest(&d, (q, k, v), &got[0], (dout, dp));
        for (n, want) in want.iter().enumerate() {
            let name = NAMES[n + 1];
            assert_close(&format!("{what} {name}"), &got[n + 1], want, 1e-5, 1e-5);
        }
    }
}

#[test]
fn masked_keys_are_exact_zeros_and_a_row_of_no_keys_is_all_zeros() {
    let mut rng = Rng::new(32);
    let d = dims(4, 3, 4, 2);
    let x = inputs(&d, &mut rng);
    let lengths = [2.0, 0.0, 4.0];
    for fast in [None, Some(None), Some(gemm_fast::simd())] {
        for causal in [false, true] {
            let probs = &run(d, causal, Some(&lengths), &x, fast)[0];
            for p in 0..d.pairs() {
                for i in 0..4 {
                    let row = &probs[(p * 4 + i) * 4..][..4];
                    let n = d.keys(causal, i, lengths[p / 2] as usize);
                    assert!(row[n..].iter().all(|&w| w == 0.0), "{p} {i} {row:?}");
                    assert!(row[..n].iter().all(|&w| w > 0.0), "{p} {i} {row:?}");
                    let sum: f32 = row.iter().sum();
                    let want = if n == 0 { 0.0 } else { 1.0 };
                    assert!((sum - want).abs() < 1e-6, "{p} {i} {row:?}");
                }
            }
        }
    }
}

#[test]
fn the_fast_path_matches_the_reference_with_and_without_avx512() {
    let mut rng = Rng::new(33);
    let mut all = cases();
    // Longer than one packed block of the GEMM's inner dimension (256).
    all.push((300, 2, 8, 2, false, Some(vec![300.0, 170.0])));
    for (t, b, f, heads, causal, lengths) in all {
        let d = dims(t, b, f, heads);
        let x = inputs(&d, &mut rng);
        let want = run(d, causal, lengths.as_deref(), &x, None);
        for token in [None, gemm_fast::simd()] {
            let got = run(d, causal, lengths.as_deref(), &x, Some(token));
            for (n, (got, want)) in got.iter().zip(&want).enumerate() {
                let what = format!(
                    "T{t} B{b} D{f} heads {heads} causal {causal} avx512 {}: {}",
                    token.is_some(),
                    NAMES[n]
                );
                assert_close(&what, got, want, 1e-5, 1e-4);
            }
        }
    }
}

#[test]
fn the_fast_path_gives_the_same_bits_on_one_thread_and_on_several() {
    let mut rng = Rng::new(34);
    let d = dims(33, 5, 12, 3);
    let x = inputs(&d, &mut rng);
    let lengths = [33.0, 0.0, 7.0, 1.0, 20.0];
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| run(d, true, Some(&lengths), &x, Some(gemm_fast::simd())))
    };
    let one = on(1);
    for (n, (a, b)) in one.iter().zip(&on(3)).enumerate() {
        let same = a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{}", NAMES[n]);
    }
}

#[test]
fn a_bad_length_is_an_input_error_naming_the_op_and_its_row_and_nothing_is_written() {
    let mut rng = Rng::new(35);
    let d = dims(3, 2, 2, 1);
    let [q, k, ..] = inputs(&d, &mut rng);
    for bad in [4.0, -1.0, 1.5, f32::NAN] {
        let lengths = [3.0, bad];
        for fast in [false, true] {
            let mut probs = vec![f32::NAN; d.probs().numel()];
            let result = if fast {
                let qk = (&q[..], &k[..]);
                fast::attention_scores(gemm_fast::simd(), d, false, Some(&lengths), qk, &mut probs)
            } else {
                attention_scores(d, false, Some(&lengths), &q, &k, &mut probs)
            };
            let err = result.unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Input(_)), "{msg}");
            assert!(
                msg.contains("attention_scores") && msg.contains("batch row 1"),
                "{msg}"
            );
            assert!(probs.iter().all(|v| v.is_nan()));
        }
    }
    let mut probs = vec![0.0; d.probs().numel()];
    assert!(attention_scores(d, false, Some(&[3.0]), &q, &k, &mut probs).is_err());
    assert!(attention_scores(d, false, None, &q[1..], &k, &mut probs).is_err());
    assert!(attention_mix(d, &probs[1..], &q, &mut k.clone()).is_err());
    let mut short = vec![0.0; q.len() - 1];
    assert!(fast::attention_mix(None, d, &probs, &q, &mut short).is_err());
    let no_heads = AttentionDims { head_dim: 0, ..d };
    assert!(attention_mix(no_heads, &probs, &[], &mut []).is_err());
}

#[test]
fn no_steps_or_no_rows_are_nothing_to_do() {
    for d in [dims(0, 2, 4, 2), dims(3, 0, 4, 2)] {
        let x = inputs(&d, &mut Rng::new(36));
        for fast in [None, Some(gemm_fast::simd())] {
            let got = run(d, true, None, &x, fast);
            assert!(got.iter().all(Vec::is_empty));
        }
    }
}
