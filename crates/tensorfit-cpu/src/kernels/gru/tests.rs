//! The GRU kernels against a per-element f64 GRU (forward) and its central differences
//! (backward), and the fast path against the reference; with and without lengths, and
//! keeping the gates for the backward or only a few steps of them.

use super::*;
use tensorfit_testing::{assert_close, Rng, TestRng};

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// A layer's random inputs, in f64 for the naive GRU and f32 for the kernels.
struct Layer {
    d: GruDims,
    /// x, h0, w_ih, w_hh, b_ih, b_hh.
    tensors: [Vec<f32>; 6],
    /// Each row's sequence length, or none (every row runs every step).
    lengths: Option<Vec<f32>>,
}

impl Layer {
    fn random(rng: &mut Rng, d: GruDims) -> Layer {
        let h3 = d.gate_width();
        let sizes = [
            d.x_len(),
            d.step_state(),
            h3 * d.input,
            h3 * d.hidden,
            h3,
            h3,
        ];
        Layer {
            d,
            tensors: sizes.map(|n| rng.signed_vec(n)),
            lengths: None,
        }
    }

    /// The same layer with lengths drawn from `0..=T` (`range` is inclusive), the first
    /// row running every step.
    fn padded(mut self, rng: &mut Rng) -> Layer {
        let d = self.d;
        let lengths = (0..d.batch).map(|b| match b {
            0 => d.steps as f32,
            _ => rng.range(0, d.steps) as f32,
        });
        self.lengths = Some(lengths.collect());
        self
    }

    fn inputs(&self) -> GruForwardInputs<'_> {
        let [x, h0, w_ih, w_hh, b_ih, b_hh] = &self.tensors;
        GruForwardInputs {
            x,
            h0,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            lengths: self.lengths.as_deref(),
        }
    }

    /// The GRU equations one element at a time, in f64, with no GEMM and no fusion, on
    /// the tensors `t`: returns (y, h_n). A row past its length gets y = 0 and keeps its
    /// state (PyTorch's packed sequences).
    fn naive(&self, t: &[Vec<f64>; 6]) -> (Vec<f64>, Vec<f64>) {
        let GruDims {
            steps,
            batch,
            input,
            hidden: h,
            ..
        } = self.d;
        let [x, h0, w_ih, w_hh, b_ih, b_hh] = t;
        let mut hs = h0.clone();
        let mut y = Vec::new();
        for s in 0..steps {
            let mut h_new = hs.clone();
            let mut y_s = vec![0.0; batch * h];
            for r in 0..batch {
                if self.lengths.as_ref().is_some_and(|l| s as f32 >= l[r]) {
                    continue;
                }
                let proj = |k: usize| {
                    let mut gi = b_ih[k];
                    for q in 0..input {
                        gi += x[(s * batch + r) * input + q] * w_ih[k * input + q];
                    }
                    let mut gh = b_hh[k];
                    for q in 0..h {
                        gh += hs[r * h + q] * w_hh[k * h + q];
                    }
                    (gi, gh)
                };
                for j in 0..h {
                    let ((ir, hr), (iz, hz), (i_n, h_n)) = (proj(j), proj(h + j), proj(2 * h + j));
                    let reset = sigmoid64(ir + hr);
                    let update = sigmoid64(iz + hz);
                    let new = (i_n + reset * h_n).tanh();
                    h_new[r * h + j] = (1.0 - update) * new + update * hs[r * h + j];
                    y_s[r * h + j] = h_new[r * h + j];
                }
            }
            y.extend(&y_s);
            hs = h_new;
        }
        (y, hs)
    }

    fn wide(&self) -> [Vec<f64>; 6] {
        self.tensors
            .clone()
            .map(|v| v.iter().map(|&a| a as f64).collect())
    }
}

/// The forward's outputs y, h_n, gates, hidden from `token`'s path.
fn run_forward(token: Option<Token>, layer: &Layer, keep: bool) -> [Vec<f32>; 4] {
    let d = layer.d;
    let (seq, state, gates) = (d.rows() * d.hidden, d.step_state(), d.gates(keep).numel());
    let mut o = [seq, state, gates, gates].map(|n| vec![f32::NAN; n]);
    let [y, h_n, g, hidden] = &mut o;
    let out = GruForwardOutputs {
        y,
        h_n,
        gates: g,
        hidden,
    };
    forward_on(token, d, keep, &layer.inputs(), out, &mut Packer::fresh()).unwrap();
    o
}

/// The backward's gradients dx, dh0, dw_ih, dw_hh, db_ih, db_hh from `token`'s path, for
/// the loss `Σ dy·y + Σ dh_n·h_n` (on token input, `dx` empty: ids have no gradient).
fn run_backward(token: Option<Token>, layer: &Layer, dy: &[f32], dh_n: &[f32]) -> [Vec<f32>; 6] {
    let d = layer.d;
    let [y, _, gates, hidden] = run_forward(token, layer, true);
    let [x, h0, w_ih, w_hh, ..] = &layer.tensors;
    let inp = GruBackwardInputs {
        x,
        h0,
        w_ih,
        w_hh,
        y: &y,
        gates: &gates,
        hidden: &hidden,
        dy,
        dh_n,
        lengths: layer.lengths.as_deref(),
    };
    let h3 = d.gate_width();
    let dx_len = if d.tokens { 0 } else { d.rows() * d.input };
    let sizes = [dx_len, d.step_state(), h3 * d.input, h3 * d.hidden, h3, h3];
    let mut g = sizes.map(|n| vec![f32::NAN; n]);
    let (mut dgates, mut dhidden) = (vec![f32::NAN; d.rows() * h3], vec![f32::NAN; d.rows() * h3]);
    let [dx, dh0, dw_ih, dw_hh, db_ih, db_hh] = &mut g;
    let out = GruBackwardOutputs {
        dgates: &mut dgates,
        dhidden: &mut dhidden,
        dh0,
        dw_ih,
        dw_hh,
        db_ih,
        db_hh,
        dx: (!d.tokens).then_some(dx),
    };
    backward_on(token, d, &inp, out).unwrap();
    g
}

fn random_dims(rng: &mut Rng, round: usize) -> GruDims {
    GruDims {
        steps: rng.range(1, 5),
        batch: rng.range(1, 4),
        input: if round == 0 { 0 } else { rng.range(1, 6) },
        hidden: rng.range(1, 20),
        tokens: false,
    }
}

/// Round `round`'s layer: every other one padded.
fn random_layer(rng: &mut Rng, d: GruDims, round: usize) -> Layer {
    let layer = Layer::random(rng, d);
    if round % 2 == 1 {
        layer.padded(rng)
    } else {
        layer
    }
}

#[test]
fn forward_matches_naive_per_element_gru() {
    let mut rng = Rng::new(21);
    for round in 0..12 {
        let mut d = random_dims(&mut rng, round);
        // Later rounds run more steps than a forward that keeps nothing holds, so the
        // inputs are projected in chunks, the last one short.
        if round >= 8 {
            d.steps = rng.range(17, 40);
        }
        let layer = random_layer(&mut rng, d, round);
        let (y, h_n) = layer.naive(&layer.wide());
        for keep in [true, false] {
            let [got_y, got_h_n, ..] = run_forward(None, &layer, keep);
            let what = format!(
                "round {round} {:?} {:?} keep {keep}",
                layer.d, layer.lengths
            );
            assert_close(&format!("{what}: y"), &got_y, &y, 1e-5, 1e-4);
            assert_close(&format!("{what}: h_n"), &got_h_n, &h_n, 1e-5, 1e-4);
        }
    }
}

#[test]
fn backward_matches_central_differences_of_the_naive_gru() {
    let mut rng = Rng::new(22);
    for round in 0..8 {
        let d = random_dims(&mut rng, round);
        let layer = random_layer(&mut rng, d, round);
        let dy = rng.signed_vec(d.rows() * d.hidden);
        let dh_n = rng.signed_vec(d.step_state());
        let loss = |t: &[Vec<f64>; 6]| {
            let (y, h_n) = layer.naive(t);
            let dot =
                |a: &[f64], b: &[f32]| a.iter().zip(b).map(|(a, &b)| a * b as f64).sum::<f64>();
            dot(&y, &dy) + dot(&h_n, &dh_n)
        };
        let got = run_backward(None, &layer, &dy, &dh_n);
        let names = ["dx", "dh0", "dw_ih", "dw_hh", "db_ih", "db_hh"];
        for (k, name) in names.iter().enumerate() {
            let want: Vec<f64> = (0..layer.tensors[k].len())
                .map(|e| {
                    let eps = 1e-6;
                    let mut t = layer.wide();
                    t[k][e] += eps;
                    let up = loss(&t);
                    t[k][e] -= 2.0 * eps;
                    (up - loss(&t)) / (2.0 * eps)
                })
                .collect();
            let what = format!("round {round} {d:?} {:?}: {name}", layer.lengths);
            assert_close(&what, &got[k], &want, 1e-4, 1e-3);
        }
    }
}

#[test]
fn the_fast_path_agrees_with_the_reference() {
    let Some(token) = gemm_fast::simd() else {
        eprintln!("the_fast_path_agrees_with_the_reference: skipped, this CPU has no AVX-512");
        return;
    };
    let mut rng = Rng::new(23);
    // Small layers, and one whose steps are wide enough to split across threads.
    let mut dims: Vec<GruDims> = (0..6).map(|round| random_dims(&mut rng, round)).collect();
    // Small layers, one whose steps are wide enough to split across threads, and one
    // longer than the steps a forward that keeps nothing holds.
    dims.push(GruDims {
        steps: 3,
        batch: 29,
        input: 7,
        hidden: 250,
        tokens: false,
    });
    dims.push(GruDims {
        steps: 37,
        batch: 5,
        input: 3,
        hidden: 9,
        tokens: false,
    });
    for (round, d) in dims.into_iter().enumerate() {
        let layer = random_layer(&mut rng, d, round);
        for keep in [true, false] {
            let want = run_forward(None, &layer, keep);
            let got = run_forward(Some(token), &layer, keep);
            for (k, name) in ["y", "h_n", "gates", "hidden"].iter().enumerate() {
                let what = format!("{d:?} {:?} keep {keep}: {name}", layer.lengths);
                assert_close(&what, &got[k], &want[k], 1e-5, 1e-4);
            }
        }
        let dy = rng.signed_vec(d.rows() * d.hidden);
        let dh_n = rng.signed_vec(d.step_state());
        let want = run_backward(None, &layer, &dy, &dh_n);
        let got = run_backward(Some(token), &layer, &dy, &dh_n);
        let names = ["dx", "dh0", "dw_ih", "dw_hh", "db_ih", "db_hh"];
        for (k, name) in names.iter().enumerate() {
            let what = format!("{d:?} {:?}: {name}", layer.lengths);
            assert_close(&what, &got[k], &want[k], 1e-4, 1e-4);
        }
    }
}

#[test]
fn wrong_lengths_are_errors_that_name_the_tensor() {
    let mut rng = Rng::new(5);
    let d = random_dims(&mut rng, 1);
    let mut layer = Layer::random(&mut rng, d);
    layer.tensors[0].pop(); // `x`, one element short
    let e = forward_error(d, &layer.inputs());
    assert!(e.contains("gru_forward") && e.contains("`x`"), "{e}");
}

/// The error [`gru_forward`] gives on `inp`, into outputs of the lengths `d` needs.
fn forward_error(d: GruDims, inp: &GruForwardInputs<'_>) -> String {
    let gates = d.gates(true).numel();
    let [mut y, mut h_n, mut g, mut hh] =
        [d.rows() * d.hidden, d.step_state(), gates, gates].map(|n| vec![0.0; n]);
    let out = GruForwardOutputs {
        y: &mut y,
        h_n: &mut h_n,
        gates: &mut g,
        hidden: &mut hh,
    };
    gru_forward(d, true, inp, out).unwrap_err().to_string()
}

#[test]
fn a_length_outside_the_steps_is_an_error_naming_its_row() {
    let d = GruDims {
        steps: 2,
        batch: 2,
        input: 1,
        hidden: 1,
        tokens: false,
    };
    let mut layer = Layer::random(&mut Rng::new(24), d);
    layer.lengths = Some(vec![1.0, 3.0]);
    let e = forward_error(d, &layer.inputs());
    assert!(e.contains("batch row 1") && e.contains("`lengths`"), "{e}");
}

#[test]
fn token_input_gives_what_the_one_hot_input_gives_forward_and_backward() {
    let mut rng = Rng::new(25);
    // The reference, and the fast path where the CPU has one, each against itself on the
    // one-hot input.
    let paths: Vec<_> = std::iter::once(None)
        .chain(gemm_fast::simd().map(Some))
        .collect();
    for round in 0..6 {
        let dense = GruDims {
            // Later rounds run more steps than a forward that keeps nothing holds.
            steps: if round >= 4 {
                rng.range(17, 30)
            } else {
                rng.range(1, 6)
            },
            // Round 0 is wide enough for the fast path to split the rows across threads.
            batch: if round == 0 { 32 } else { rng.range(1, 7) },
            input: rng.range(1, 12), // the vocabulary
            hidden: if round == 0 { 130 } else { rng.range(1, 30) },
            tokens: false,
        };
        let tokens = GruDims {
            tokens: true,
            ..dense
        };
        let mut hot = random_layer(&mut rng, dense, round);
        let ids: Vec<f32> = (0..dense.rows())
            .map(|_| rng.range(0, dense.input - 1) as f32)
            .collect();
        hot.tensors[0] = vec![0.0; dense.rows() * dense.input];
        for (row, &id) in hot.tensors[0].chunks_exact_mut(dense.input).zip(&ids) {
            row[id as usize] = 1.0;
        }
        let mut by_id = Layer {
            d: tokens,
            tensors: hot.tensors.clone(),
            lengths: hot.lengths.clone(),
        };
        by_id.tensors[0] = ids;
        let dy = rng.signed_vec(dense.rows() * dense.hidden);
        let dh_n = rng.signed_vec(dense.step_state());
        for &path in &paths {
            let fast = path.is_some();
            let what = |k: &str| format!("round {round} {dense:?} fast path {fast}: {k}");
            for keep in [true, false] {
                let want = run_forward(path, &hot, keep);
                let got = run_forward(path, &by_id, keep);
                for (k, name) in ["y", "h_n", "gates", "hidden"].iter().enumerate() {
                    assert_close(&what(name), &got[k], &want[k], 1e-6, 1e-5);
                }
            }
            let want = run_backward(path, &hot, &dy, &dh_n);
            let got = run_backward(path, &by_id, &dy, &dh_n);
            let names = ["dx", "dh0", "dw_ih", "dw_hh", "db_ih", "db_hh"];
            for k in 1..names.len() {
                assert_close(&what(names[k]), &got[k], &want[k], 1e-5, 1e-4);
            }
        }
    }
}

#[test]
fn a_token_id_outside_the_vocabulary_is_an_error_naming_step_and_row() {
    let d = GruDims {
        steps: 2,
        batch: 2,
        input: 3,
        hidden: 1,
        tokens: true,
    };
    let mut layer = Layer::random(&mut Rng::new(26), d);
    layer.tensors[0] = vec![0.0, 2.0, 1.0, 3.0];
    let e = forward_error(d, &layer.inputs());
    assert!(e.contains("step 1, batch row 1"), "{e}");
}
