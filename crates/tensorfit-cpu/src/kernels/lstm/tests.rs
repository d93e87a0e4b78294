//! The LSTM kernels against a per-element f64 LSTM, and the fast path against the
//! reference.

use super::*;
use tensorfit_testing::{assert_close, Rng, TestRng};

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The LSTM equations one element at a time, in f64, with no GEMM and no fusion:
/// returns (y, h_n, c_n, activated gates, cells).
#[allow(clippy::type_complexity)]
fn naive_forward(
    d: LstmDims,
    p: &LstmForwardInputs<'_>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (tt, b, n_in, h) = (d.steps, d.batch, d.input, d.hidden);
    let mut hs: Vec<f64> = p.h0.iter().map(|&v| v as f64).collect();
    let mut cs: Vec<f64> = p.c0.iter().map(|&v| v as f64).collect();
    let (mut y, mut gates, mut cells) = (Vec::new(), Vec::new(), Vec::new());
    for t in 0..tt {
        let mut h_new = vec![0.0; b * h];
        let mut c_new = vec![0.0; b * h];
        for r in 0..b {
            // pre[k] for the 4H gate units of row r.
            let pre: Vec<f64> = (0..4 * h)
                .map(|k| {
                    let mut s = p.b_ih[k] as f64 + p.b_hh[k] as f64;
                    for q in 0..n_in {
                        s += p.x[(t * b + r) * n_in + q] as f64 * p.w_ih[k * n_in + q] as f64;
                    }
                    for q in 0..h {
                        s += hs[r * h + q] * p.w_hh[k * h + q] as f64;
                    }
                    s
                })
                .collect();
            let act: Vec<f64> = (0..4 * h)
                .map(|k| {
                    if k / h == 2 {
                        pre[k].tanh()
                    } else {
                        sigmoid64(pre[k])
                    }
                })
                .collect();
            for j in 0..h {
                let (i, f, g, o) = (act[j], act[h + j], act[2 * h + j], act[3 * h + j]);
                c_new[r * h + j] = f * cs[r * h + j] + i * g;
                h_new[r * h + j] = o * c_new[r * h + j].tanh();
            }
            gates.extend(act);
        }
        y.extend(&h_new);
        cells.extend(&c_new);
        (hs, cs) = (h_new, c_new);
    }
    (y, hs, cs, gates, cells)
}

type Forward = fn(LstmDims, &LstmForwardInputs<'_>, LstmForwardOutputs<'_>) -> Result<()>;

fn forward_reference(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
) -> Result<()> {
    forward_on(None, d, inp, out)
}

/// The kernel as the backend calls it (the fast path where the CPU has AVX-512) and
/// the reference, each with and without cells kept.
const FORWARDS: [(&str, Forward); 4] = [
    ("lstm_forward", lstm_forward),
    ("lstm_forward", lstm_forward),
    ("forward_reference", forward_reference),
    ("forward_reference", forward_reference),
];

#[test]
fn forward_matches_naive_per_element_lstm() {
    let mut rng = Rng::new(11);
    for round in 0..8 {
        let d = LstmDims {
            steps: rng.range(1, 5),
            batch: rng.range(1, 4),
            input: if round == 0 { 0 } else { rng.range(1, 6) },
            hidden: rng.range(1, 40), // blocks of LANES units and a padded rest
        };
        let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
        let x = rng.signed_vec(rows * d.input);
        let (h0, c0) = (rng.signed_vec(bh), rng.signed_vec(bh));
        let (w_ih, w_hh) = (rng.signed_vec(h4 * d.input), rng.signed_vec(h4 * d.hidden));
        let (b_ih, b_hh) = (rng.signed_vec(h4), rng.signed_vec(h4));
        let inp = LstmForwardInputs {
            x: &x,
            h0: &h0,
            c0: &c0,
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: &b_ih,
            b_hh: &b_hh,
        };
        let (y0, hn0, cn0, g0, cells0) = naive_forward(d, &inp);
        for ((name, forward), keep) in FORWARDS.into_iter().zip([true, false, true, false]) {
            let mut y = vec![f32::NAN; rows * d.hidden];
            let (mut h_n, mut c_n) = (vec![f32::NAN; bh], vec![f32::NAN; bh]);
            let mut gates = vec![f32::NAN; rows * h4];
            let mut cells = vec![f32::NAN; rows * d.hidden];
            let out = LstmForwardOutputs {
                y: &mut y,
                h_n: &mut h_n,
                c_n: &mut c_n,
                gates: &mut gates,
                cells: keep.then_some(&mut cells[..]),
            };
            forward(d, &inp, out).unwrap();
            let what = |t: &str| format!("{name} round {round} {d:?} keep {keep}: {t}");
            let (atol, rtol) = (1e-5, 1e-4);
            assert_close(&what("y"), &y, &y0, atol, rtol);
            assert_close(&what("h_n"), &h_n, &hn0, atol, rtol);
            assert_close(&what("c_n"), &c_n, &cn0, atol, rtol);
            if keep {
                // (Without `keep`, the gates are scratch: `Op::output_is_scratch`.)
                assert_close(&what("gates"), &gates, &g0, atol, rtol);
                assert_close(&what("cells"), &cells, &cells0, atol, rtol);
            }
        }
    }
}

#[test]
fn wide_steps_take_the_parallel_path_and_agree() {
    // B·4H = 16·4·256 ≥ PARALLEL_MIN_ELEMENTS: the fused passes run on rayon.
    let mut rng = Rng::new(5);
    let d = LstmDims {
        steps: 2,
        batch: 16,
        input: 3,
        hidden: 256,
    };
    assert!(d.batch * 4 * d.hidden >= PARALLEL_MIN_ELEMENTS);
    let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
    let x = rng.signed_vec(rows * d.input);
    let (h0, c0) = (rng.signed_vec(bh), rng.signed_vec(bh));
    let w_ih = rng.signed_vec(h4 * d.input);
    let w_hh: Vec<f32> = rng
        .signed_vec(h4 * d.hidden)
        .iter()
        .map(|v| v * 0.1)
        .collect();
    let (b_ih, b_hh) = (rng.signed_vec(h4), rng.signed_vec(h4));
    let inp = LstmForwardInputs {
        x: &x,
        h0: &h0,
        c0: &c0,
        w_ih: &w_ih,
        w_hh: &w_hh,
        b_ih: &b_ih,
        b_hh: &b_hh,
    };
    let (y0, ..) = naive_forward(d, &inp);
    for (name, forward) in FORWARDS {
        let mut y = vec![0.0; rows * d.hidden];
        let (mut h_n, mut c_n) = (vec![0.0; bh], vec![0.0; bh]);
        let mut gates = vec![0.0; rows * h4];
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut h_n,
            c_n: &mut c_n,
            gates: &mut gates,
            cells: None,
        };
        forward(d, &inp, out).unwrap();
        assert_close(name, &y, &y0, 1e-5, 1e-4);
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let d = LstmDims {
        steps: 2,
        batch: 1,
        input: 1,
        hidden: 1,
    };
    let v = [0.0f32; 8];
    let inp = LstmForwardInputs {
        x: &v[..1], // should be 2
        h0: &v[..1],
        c0: &v[..1],
        w_ih: &v[..4],
        w_hh: &v[..4],
        b_ih: &v[..4],
        b_hh: &v[..4],
    };
    let (mut y, mut hn, mut cn, mut g) = ([0.0; 2], [0.0], [0.0], [0.0; 8]);
    let out = LstmForwardOutputs {
        y: &mut y,
        h_n: &mut hn,
        c_n: &mut cn,
        gates: &mut g,
        cells: None,
    };
    assert!(lstm_forward(d, &inp, out).is_err());
}

/// Which implementation a test runs.
#[derive(Clone, Copy)]
enum Path {
    Fast(Token),
    Reference,
}

/// Runs the forward of `path` on `inp`, keeping the cells or not: (y, h_n, c_n,
/// gates, cells).
fn run_forward(path: Path, d: LstmDims, inp: &LstmForwardInputs<'_>, keep: bool) -> [Vec<f32>; 5] {
    let (rows, state) = (d.steps * d.batch, d.batch * d.hidden);
    let [mut y, mut h_n, mut c_n, mut gates, mut cells] = [
        vec![f32::NAN; rows * d.hidden],
        vec![f32::NAN; state],
        vec![f32::NAN; state],
        vec![f32::NAN; rows * 4 * d.hidden],
        vec![f32::NAN; rows * d.hidden],
    ];
    let out = LstmForwardOutputs {
        y: &mut y,
        h_n: &mut h_n,
        c_n: &mut c_n,
        gates: &mut gates,
        cells: keep.then_some(&mut cells[..]),
    };
    match path {
        Path::Fast(token) => fast::forward(token, d, inp, out),
        Path::Reference => forward_on(None, d, inp, out),
    }
    .unwrap();
    [y, h_n, c_n, gates, cells]
}

/// Runs the backward of `path`: (dgates, dh0, dc0, dw_ih, dw_hh, db, dx).
fn run_backward(
    path: Path,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    input_grad: bool,
) -> [Vec<f32>; 7] {
    let (rows, h4, state) = (d.steps * d.batch, 4 * d.hidden, d.batch * d.hidden);
    let mut g = [
        vec![f32::NAN; rows * h4],
        vec![f32::NAN; state],
        vec![f32::NAN; state],
        vec![f32::NAN; h4 * d.input],
        vec![f32::NAN; h4 * d.hidden],
        vec![f32::NAN; h4],
        vec![f32::NAN; rows * d.input],
    ];
    let [dgates, dh0, dc0, dw_ih, dw_hh, db, dx] = &mut g;
    let out = LstmBackwardOutputs {
        dgates,
        dh0,
        dc0,
        dw_ih,
        dw_hh,
        db,
        dx: input_grad.then_some(&mut dx[..]),
    };
    match path {
        Path::Fast(token) => fast::backward(token, d, inp, out),
        Path::Reference => backward_on(None, d, inp, out),
    }
    .unwrap();
    g
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

#[test]
fn the_fast_path_matches_the_reference_forward_and_backward() {
    let Some(token) = gemm_fast::simd() else {
        eprintln!("skipped: this CPU has no AVX-512, so the fast path cannot run");
        return;
    };
    let mut rng = Rng::new(21);
    for round in 0..6 {
        let d = LstmDims {
            steps: rng.range(1, 6),
            // Round 0 is wide enough for the rows to be split across threads.
            batch: if round == 0 { 32 } else { rng.range(1, 9) },
            input: rng.range(1, 7),
            hidden: if round == 0 { 130 } else { rng.range(1, 40) },
        };
        let (rows, bh, h4) = (d.steps * d.batch, d.batch * d.hidden, 4 * d.hidden);
        let x = rng.signed_vec(rows * d.input);
        let (h0, c0) = (rng.signed_vec(bh), rng.signed_vec(bh));
        let w_ih = rng.signed_vec(h4 * d.input);
        let w_hh: Vec<f32> = rng
            .signed_vec(h4 * d.hidden)
            .iter()
            .map(|v| v * 0.3)
            .collect();
        let (b_ih, b_hh) = (rng.signed_vec(h4), rng.signed_vec(h4));
        let inp = LstmForwardInputs {
            x: &x,
            h0: &h0,
            c0: &c0,
            w_ih: &w_ih,
            w_hh: &w_hh,
            b_ih: &b_ih,
            b_hh: &b_hh,
        };
        let (atol, rtol) = (1e-5, 1e-4);
        for keep in [true, false] {
            let fast = run_forward(Path::Fast(token), d, &inp, keep);
            let want = run_forward(Path::Reference, d, &inp, keep);
            // Without cells the gates are scratch (`Op::output_is_scratch`).
            let compared = if keep { 5 } else { 3 };
            let names = ["y", "h_n", "c_n", "gates", "cells"];
            for k in 0..compared {
                let what = format!("round {round} {d:?} keep {keep}: {}", names[k]);
                assert_close(&what, &fast[k], &f64s(&want[k]), atol, rtol);
            }
        }
        let [y, _, _, gates, cells] = run_forward(Path::Reference, d, &inp, true);
        let (dy, dh_n, dc_n) = (
            rng.signed_vec(rows * d.hidden),
            rng.signed_vec(bh),
            rng.signed_vec(bh),
        );
        let inp = LstmBackwardInputs {
            x: &x,
            h0: &h0,
            c0: &c0,
            w_ih: &w_ih,
            w_hh: &w_hh,
            y: &y,
            gates: &gates,
            cells: &cells,
            dy: &dy,
            dh_n: &dh_n,
            dc_n: &dc_n,
        };
        for input_grad in [true, false] {
            let fast = run_backward(Path::Fast(token), d, &inp, input_grad);
            let want = run_backward(Path::Reference, d, &inp, input_grad);
            let names = ["dgates", "dh0", "dc0", "dw_ih", "dw_hh", "db", "dx"];
            let compared = if input_grad { 7 } else { 6 };
            for k in 0..compared {
                let what = format!("round {round} {d:?}: {}", names[k]);
                assert_close(&what, &fast[k], &f64s(&want[k]), 1e-4, 1e-3);
            }
        }
    }
}
