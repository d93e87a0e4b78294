//! The LSTM kernels against a per-element f64 LSTM, and the fast path against the
//! reference.

use super::*;
use tensorfit_core::args::Args;
use tensorfit_core::LSTM_SCRATCH_STEPS;
use tensorfit_testing::{assert_close, Rng, TestRng};

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The LSTM equations one element at a time, in f64, with no GEMM and no fusion:
/// returns (y, h_n, c_n, activated gates, cells).
fn naive_forward(d: LstmDims, p: &LstmForwardInputs<'_>) -> [Vec<f64>; 5] {
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
    [y, hs, cs, gates, cells]
}

type Forward = fn(LstmDims, &LstmForwardInputs<'_>, LstmForwardOutputs<'_>) -> Result<()>;

fn forward_reference(
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    out: LstmForwardOutputs<'_>,
) -> Result<()> {
    forward_on(None, d, inp, out, &mut Packer::fresh())
}

/// The kernel as the backend calls it (the fast path where the CPU has AVX-512) and
/// the reference, each with and without cells kept.
const FORWARDS: [(&str, Forward); 4] = [
    ("lstm_forward", lstm_forward),
    ("lstm_forward", lstm_forward),
    ("forward_reference", forward_reference),
    ("forward_reference", forward_reference),
];

/// A layer's random inputs (`w_hh` scaled by `recurrent_scale`, to keep long runs away
/// from saturation).
struct Layer {
    x: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
    w_ih: Vec<f32>,
    w_hh: Vec<f32>,
    b_ih: Vec<f32>,
    b_hh: Vec<f32>,
}

impl Layer {
    fn random(rng: &mut Rng, d: LstmDims, recurrent_scale: f32) -> Layer {
        let (bh, h4) = (d.step_state(), d.gate_width());
        Layer {
            x: rng.signed_vec(d.x_len()),
            h0: rng.signed_vec(bh),
            c0: rng.signed_vec(bh),
            w_ih: rng.signed_vec(h4 * d.input),
            w_hh: (rng.signed_vec(h4 * d.hidden).iter())
                .map(|v| v * recurrent_scale)
                .collect(),
            b_ih: rng.signed_vec(h4),
            b_hh: rng.signed_vec(h4),
        }
    }

    fn inputs(&self) -> LstmForwardInputs<'_> {
        LstmForwardInputs {
            x: &self.x,
            h0: &self.h0,
            c0: &self.c0,
            w_ih: &self.w_ih,
            w_hh: &self.w_hh,
            b_ih: &self.b_ih,
            b_hh: &self.b_hh,
            lengths: None,
        }
    }
}

#[test]
fn forward_matches_naive_per_element_lstm() {
    let mut rng = Rng::new(11);
    for round in 0..8 {
        let d = LstmDims {
            // Some rounds run longer than the LSTM_SCRATCH_STEPS steps of gates an
            // inference pass holds, so its chunked input projection is covered.
            steps: if round % 3 == 2 {
                rng.range(LSTM_SCRATCH_STEPS + 1, 3 * LSTM_SCRATCH_STEPS)
            } else {
                rng.range(1, 5)
            },
            batch: rng.range(1, 4),
            input: if round == 0 { 0 } else { rng.range(1, 6) },
            hidden: rng.range(1, 40), // blocks of LANES units and a padded rest
            tokens: false,
        };
        let layer = Layer::random(&mut rng, d, 1.0);
        let inp = layer.inputs();
        let want = naive_forward(d, &inp);
        for ((name, forward), keep) in FORWARDS.into_iter().zip([true, false, true, false]) {
            let got = run_forward(&forward, d, &inp, keep);
            // Without `keep` the gates are scratch (`Op::output_is_scratch`).
            let compared = if keep { 5 } else { 3 };
            for k in 0..compared {
                let what = format!(
                    "{name} round {round} {d:?} keep {keep}: {}",
                    FORWARD_OUTPUTS[k]
                );
                assert_close(&what, &got[k], &want[k], 1e-5, 1e-4);
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
        tokens: false,
    };
    assert!(d.step_gates() >= PARALLEL_MIN_ELEMENTS);
    let layer = Layer::random(&mut rng, d, 0.1);
    let inp = layer.inputs();
    let [y0, ..] = naive_forward(d, &inp);
    for (name, forward) in FORWARDS {
        let [y, ..] = run_forward(&forward, d, &inp, false);
        assert_close(name, &y, &y0, 1e-5, 1e-4);
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let mut rng = Rng::new(5);
    let d = random_dims(&mut rng, 1);
    let mut layer = Layer::random(&mut rng, d, 1.0);
    layer.x.pop(); // one element short
    let e = forward_error(d, &layer.inputs());
    assert!(e.contains("lstm_forward") && e.contains("`x`"), "{e}");
}

/// The error [`lstm_forward`] gives on `inp`, into outputs of the lengths `d` needs.
fn forward_error(d: LstmDims, inp: &LstmForwardInputs<'_>) -> String {
    let sizes = [d.rows() * d.hidden, d.step_state(), d.step_state()];
    let [mut y, mut h_n, mut c_n] = sizes.map(|n| vec![0.0; n]);
    let mut gates = vec![0.0; d.gates(false).numel()];
    let out = LstmForwardOutputs {
        y: &mut y,
        h_n: &mut h_n,
        c_n: &mut c_n,
        gates: &mut gates,
        cells: None,
    };
    lstm_forward(d, inp, out).unwrap_err().to_string()
}

/// Round `round`'s layer sizes: round 0 wide enough for the fast path to split its rows
/// across threads (B = 32, H = 130), the others small.
fn random_dims(rng: &mut Rng, round: usize) -> LstmDims {
    LstmDims {
        steps: rng.range(1, 6),
        batch: if round == 0 { 32 } else { rng.range(1, 8) },
        input: rng.range(1, 8),
        hidden: if round == 0 { 130 } else { rng.range(1, 30) },
        tokens: false,
    }
}

/// A forward or backward kernel.
type RunForward = dyn Fn(LstmDims, &LstmForwardInputs<'_>, LstmForwardOutputs<'_>) -> Result<()>;
type RunBackward = dyn Fn(LstmDims, &LstmBackwardInputs<'_>, LstmBackwardOutputs<'_>) -> Result<()>;

/// The names of what [`run_forward`] returns.
const FORWARD_OUTPUTS: [&str; 5] = ["y", "h_n", "c_n", "gates", "cells"];

/// Runs `forward` on `inp`, keeping the cells or not: (y, h_n, c_n, gates, cells), every
/// element NaN until the kernel writes it.
fn run_forward(
    forward: &RunForward,
    d: LstmDims,
    inp: &LstmForwardInputs<'_>,
    keep: bool,
) -> [Vec<f32>; 5] {
    let (rows, state) = (d.rows(), d.step_state());
    let [mut y, mut h_n, mut c_n, mut gates, mut cells] = [
        vec![f32::NAN; rows * d.hidden],
        vec![f32::NAN; state],
        vec![f32::NAN; state],
        vec![f32::NAN; d.gates(keep).numel()],
        vec![f32::NAN; rows * d.hidden],
    ];
    let out = LstmForwardOutputs {
        y: &mut y,
        h_n: &mut h_n,
        c_n: &mut c_n,
        gates: &mut gates,
        cells: keep.then_some(&mut cells[..]),
    };
    forward(d, inp, out).unwrap();
    [y, h_n, c_n, gates, cells]
}

/// Runs `backward`: (dgates, dh0, dc0, dw_ih, dw_hh, db, dx).
fn run_backward(
    backward: &RunBackward,
    d: LstmDims,
    inp: &LstmBackwardInputs<'_>,
    input_grad: bool,
) -> [Vec<f32>; 7] {
    let (rows, h4, state) = (d.rows(), d.gate_width(), d.step_state());
    let mut g = [
        vec![f32::NAN; rows * h4],
        vec![f32::NAN; state],
        vec![f32::NAN; state],
        vec![f32::NAN; h4 * d.input],
        vec![f32::NAN; h4 * d.hidden],
        vec![f32::NAN; h4],
        vec![f32::NAN; rows * d.input],
    ];
    let mut outs: Vec<&mut [f32]> = g.iter_mut().map(|v| &mut v[..]).collect();
    if !input_grad {
        outs.pop(); // dx, the optional last output
    }
    let out = LstmBackwardOutputs::from_vec("outputs", outs).unwrap();
    backward(d, inp, out).unwrap();
    g
}

/// What a backward reads besides the forward's inputs: the reference forward's `y`,
/// `gates`, `cells` (kept), and random gradients `dy`, `dh_n`, `dc_n`.
fn saved_for_backward(rng: &mut Rng, d: LstmDims, inp: &LstmForwardInputs<'_>) -> [Vec<f32>; 6] {
    let [y, _, _, gates, cells] = run_forward(&forward_reference, d, inp, true);
    let dy = rng.signed_vec(d.rows() * d.hidden);
    let (dh_n, dc_n) = (
        rng.signed_vec(d.step_state()),
        rng.signed_vec(d.step_state()),
    );
    [y, gates, cells, dy, dh_n, dc_n]
}

/// The backward's inputs: the forward's `inp` and what [`saved_for_backward`] made.
fn backward_inputs<'a>(
    inp: &LstmForwardInputs<'a>,
    saved: &'a [Vec<f32>; 6],
) -> LstmBackwardInputs<'a> {
    let [y, gates, cells, dy, dh_n, dc_n] = saved;
    LstmBackwardInputs {
        x: inp.x,
        h0: inp.h0,
        c0: inp.c0,
        w_ih: inp.w_ih,
        w_hh: inp.w_hh,
        y,
        gates,
        cells,
        dy,
        dh_n,
        dc_n,
        lengths: inp.lengths,
    }
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
    let fast_forward: &RunForward =
        &move |d, i, o| forward_on(Some(token), d, i, o, &mut Packer::fresh());
    let fast_backward: &RunBackward = &move |d, i, o| fast::backward(token, d, i, o);
    let reference_backward: &RunBackward = &|d, i, o| backward_on(None, d, i, o);
    let mut rng = Rng::new(21);
    for round in 0..6 {
        let d = random_dims(&mut rng, round);
        let layer = Layer::random(&mut rng, d, 0.3);
        let inp = layer.inputs();
        let (atol, rtol) = (1e-5, 1e-4);
        for keep in [true, false] {
            let fast = run_forward(fast_forward, d, &inp, keep);
            let want = run_forward(&forward_reference, d, &inp, keep);
            // Without cells the gates are scratch (`Op::output_is_scratch`).
            let compared = if keep { 5 } else { 3 };
            for k in 0..compared {
                let what = format!("round {round} {d:?} keep {keep}: {}", FORWARD_OUTPUTS[k]);
                assert_close(&what, &fast[k], &f64s(&want[k]), atol, rtol);
            }
        }
        let saved = saved_for_backward(&mut rng, d, &inp);
        let inp = backward_inputs(&inp, &saved);
        for input_grad in [true, false] {
            let fast = run_backward(fast_backward, d, &inp, input_grad);
            let want = run_backward(reference_backward, d, &inp, input_grad);
            let names = ["dgates", "dh0", "dc0", "dw_ih", "dw_hh", "db", "dx"];
            let compared = if input_grad { 7 } else { 6 };
            for k in 0..compared {
                let what = format!("round {round} {d:?}: {}", names[k]);
                assert_close(&what, &fast[k], &f64s(&want[k]), 1e-4, 1e-3);
            }
        }
    }
}

#[test]
fn token_input_gives_what_the_one_hot_input_gives_forward_and_backward() {
    let mut rng = Rng::new(31);
    for round in 0..5 {
        // Its input is the vocabulary. The last round's is larger than the call's rows:
        // the fast path gathers `w_ih`'s columns where it reads them instead of forming a
        // table of every token.
        let dense = match round {
            4 => LstmDims {
                steps: 3,
                batch: 4,
                input: 41,
                hidden: 24,
                tokens: false,
            },
            _ => random_dims(&mut rng, round),
        };
        let tokens = LstmDims {
            tokens: true,
            ..dense
        };
        let mut layer = Layer::random(&mut rng, dense, 0.3);
        let ids: Vec<f32> = (0..dense.rows())
            .map(|_| rng.range(0, dense.input - 1) as f32)
            .collect();
        layer.x = vec![0.0; dense.rows() * dense.input];
        for (row, &id) in layer.x.chunks_exact_mut(dense.input).zip(&ids) {
            row[id as usize] = 1.0;
        }
        let hot = layer.inputs();
        let by_id = LstmForwardInputs { x: &ids, ..hot };
        let what = |path: &str, k: &str| format!("round {round} {dense:?} {path}: {k}");
        for keep in [true, false] {
            let want = run_forward(&forward_reference, dense, &hot, keep);
            let compared = if keep { 5 } else { 3 };
            for (path, run) in [
                ("reference", forward_reference as Forward),
                ("backend", lstm_forward),
            ] {
                let got = run_forward(&run, tokens, &by_id, keep);
                for k in 0..compared {
                    let what = what(path, FORWARD_OUTPUTS[k]);
                    assert_close(&what, &got[k], &f64s(&want[k]), 1e-6, 1e-5);
                }
            }
        }
        let saved = saved_for_backward(&mut rng, dense, &hot);
        let hot = backward_inputs(&hot, &saved);
        let by_id = LstmBackwardInputs { x: &ids, ..hot };
        let reference: &RunBackward = &|d, i, o| backward_on(None, d, i, o);
        let want = run_backward(reference, dense, &hot, false);
        for (path, run) in [("reference", reference), ("backend", &lstm_backward)] {
            let got = run_backward(run, tokens, &by_id, false);
            let names = ["dgates", "dh0", "dc0", "dw_ih", "dw_hh", "db"];
            for (k, name) in names.iter().enumerate() {
                assert_close(&what(path, name), &got[k], &f64s(&want[k]), 1e-5, 1e-4);
            }
        }
    }
}

#[test]
fn a_token_id_outside_the_vocabulary_is_an_error_naming_step_and_row() {
    let d = LstmDims {
        steps: 2,
        batch: 2,
        input: 3,
        hidden: 1,
        tokens: true,
    };
    let mut layer = Layer::random(&mut Rng::new(1), d, 1.0);
    layer.x = vec![0.0, 2.0, 1.0, 3.0];
    let e = forward_error(d, &layer.inputs());
    assert!(e.contains("step 1, batch row 1"), "{e}");
}

mod lengths;
