//! Lengths (a padded batch, see `tensorfit_core::seq_lengths`): each row of a padded
//! batch gets what its sequence alone at its own length gets, forward and backward, on
//! the fast path and on the reference.

use super::*;

/// Rows `b` of step `t` of a `[T, B, width]` tensor.
fn row(v: &[f32], (t, b): (usize, usize), d: LstmDims, width: usize) -> &[f32] {
    &v[(t * d.batch + b) * width..][..width]
}

/// Sequence `b` of the padded `layer`, alone: its first `steps` steps, its own state.
fn alone(layer: &Layer, d: LstmDims, b: usize, steps: usize) -> (LstmDims, Layer) {
    let one = LstmDims {
        steps,
        batch: 1,
        ..d
    };
    let (i, h) = (d.input, d.hidden);
    let x = (0..steps).flat_map(|t| row(&layer.x, (t, b), d, i).to_vec());
    let alone = Layer {
        x: x.collect(),
        h0: layer.h0[b * h..][..h].to_vec(),
        c0: layer.c0[b * h..][..h].to_vec(),
        ..Layer::clone_weights(layer)
    };
    (one, alone)
}

impl Layer {
    fn clone_weights(&self) -> Layer {
        Layer {
            x: Vec::new(),
            h0: Vec::new(),
            c0: Vec::new(),
            w_ih: self.w_ih.clone(),
            w_hh: self.w_hh.clone(),
            b_ih: self.b_ih.clone(),
            b_hh: self.b_hh.clone(),
        }
    }
}

/// Random lengths in `0..=T`, with an empty and a full sequence among them when there
/// are rows enough.
fn random_lengths(rng: &mut Rng, d: LstmDims) -> Vec<f32> {
    let mut l: Vec<f32> = (0..d.batch).map(|_| rng.range(0, d.steps) as f32).collect();
    if d.batch >= 2 {
        (l[0], l[d.batch - 1]) = (0.0, d.steps as f32);
    }
    l
}

#[test]
fn a_padded_batch_gives_each_sequence_what_it_gives_alone_forward_and_backward() {
    let paths: [(&str, &RunForward, &RunBackward); 2] = [
        ("as the backend runs it", &lstm_forward, &lstm_backward),
        ("reference", &forward_reference, &|d, i, o| {
            backward_on(None, d, i, o)
        }),
    ];
    let mut rng = Rng::new(31);
    for round in 0..6 {
        let d = random_dims(&mut rng, round);
        let layer = Layer::random(&mut rng, d, 0.3);
        let lengths = random_lengths(&mut rng, d);
        let inp = LstmForwardInputs {
            lengths: Some(&lengths),
            ..layer.inputs()
        };
        let (dy, dh_n, dc_n) = (
            rng.signed_vec(d.rows() * d.hidden),
            rng.signed_vec(d.step_state()),
            rng.signed_vec(d.step_state()),
        );
        for (path, forward, backward) in paths {
            let what = |name: &str, b: usize| format!("{path} round {round} {d:?} row {b}: {name}");
            let [y, h_n, c_n, gates, cells] = run_forward(forward, d, &inp, true);
            let saved = [
                y.clone(),
                gates,
                cells,
                dy.clone(),
                dh_n.clone(),
                dc_n.clone(),
            ];
            let padded = run_backward(backward, d, &backward_inputs(&inp, &saved), true);
            let [dgates, dh0, dc0, dw_ih, dw_hh, db, dx] = &padded;
            let mut sums = [
                vec![0.0f64; dw_ih.len()],
                vec![0.0; dw_hh.len()],
                vec![0.0; db.len()],
            ];
            let (h, h4, i) = (d.hidden, d.gate_width(), d.input);
            for (b, &len) in lengths.iter().enumerate() {
                let (one, layer_b) = alone(&layer, d, b, len as usize);
                let inp_b = layer_b.inputs();
                let [y_b, h_n_b, c_n_b, gates_b, cells_b] =
                    run_forward(&forward_reference, one, &inp_b, true);
                assert_close(
                    &what("h_n", b),
                    &h_n[b * h..][..h],
                    &f64s(&h_n_b),
                    1e-5,
                    1e-4,
                );
                assert_close(
                    &what("c_n", b),
                    &c_n[b * h..][..h],
                    &f64s(&c_n_b),
                    1e-5,
                    1e-4,
                );
                let dy_b: Vec<f32> = (0..one.steps)
                    .flat_map(|t| row(&dy, (t, b), d, h).to_vec())
                    .collect();
                let saved_b = [
                    y_b.clone(),
                    gates_b,
                    cells_b,
                    dy_b,
                    dh_n[b * h..][..h].to_vec(),
                    dc_n[b * h..][..h].to_vec(),
                ];
                let [dgates_b, dh0_b, dc0_b, dw_ih_b, dw_hh_b, db_b, dx_b] = run_backward(
                    &|d, i, o| backward_on(None, d, i, o),
                    one,
                    &backward_inputs(&inp_b, &saved_b),
                    true,
                );
                assert_close(
                    &what("dh0", b),
                    &dh0[b * h..][..h],
                    &f64s(&dh0_b),
                    1e-4,
                    1e-3,
                );
                assert_close(
                    &what("dc0", b),
                    &dc0[b * h..][..h],
                    &f64s(&dc0_b),
                    1e-4,
                    1e-3,
                );
                for t in 0..d.steps {
                    let inside = t < one.steps;
                    let want = |v: &[f32], width: usize| match inside {
                        true => f64s(&v[t * width..][..width]),
                        false => vec![0.0; width],
                    };
                    let at = format!("step {t}");
                    assert_close(
                        &what(&format!("y {at}"), b),
                        row(&y, (t, b), d, h),
                        &want(&y_b, h),
                        1e-5,
                        1e-4,
                    );
                    assert_close(
                        &what(&format!("dgates {at}"), b),
                        row(dgates, (t, b), d, h4),
                        &want(&dgates_b, h4),
                        1e-4,
                        1e-3,
                    );
                    assert_close(
                        &what(&format!("dx {at}"), b),
                        row(dx, (t, b), d, i),
                        &want(&dx_b, i),
                        1e-4,
                        1e-3,
                    );
                }
                if one.steps > 0 {
                    for (sum, g) in sums.iter_mut().zip([&dw_ih_b, &dw_hh_b, &db_b]) {
                        sum.iter_mut().zip(g).for_each(|(s, &v)| *s += v as f64);
                    }
                }
            }
            for (name, (got, want)) in ["dw_ih", "dw_hh", "db"]
                .iter()
                .zip([dw_ih, dw_hh, db].into_iter().zip(&sums))
            {
                assert_close(
                    &format!("{path} round {round} {d:?}: {name}"),
                    got,
                    want,
                    1e-4,
                    1e-3,
                );
            }
        }
    }
}

#[test]
fn full_lengths_give_what_no_lengths_give() {
    let mut rng = Rng::new(32);
    let d = LstmDims {
        steps: 5,
        batch: 3,
        input: 4,
        hidden: 6,
        tokens: false,
    };
    let layer = Layer::random(&mut rng, d, 0.3);
    let full = vec![d.steps as f32; d.batch];
    let masked = LstmForwardInputs {
        lengths: Some(&full),
        ..layer.inputs()
    };
    for keep in [true, false] {
        let got = run_forward(&lstm_forward, d, &masked, keep);
        let want = run_forward(&lstm_forward, d, &layer.inputs(), keep);
        for k in 0..3 {
            assert_eq!(got[k], want[k], "keep {keep}: {}", FORWARD_OUTPUTS[k]);
        }
    }
}

#[test]
fn a_length_outside_the_steps_is_an_error_naming_its_row() {
    let mut rng = Rng::new(33);
    let d = LstmDims {
        steps: 2,
        batch: 2,
        input: 1,
        hidden: 2,
        tokens: false,
    };
    let layer = Layer::random(&mut rng, d, 0.3);
    for bad in [3.0, 1.5, -1.0] {
        let lengths = [1.0, bad];
        let inp = LstmForwardInputs {
            lengths: Some(&lengths),
            ..layer.inputs()
        };
        let (rows, state) = (d.rows(), d.step_state());
        let (mut y, mut hn, mut cn, mut g) = (
            vec![0.0; rows * 2],
            vec![0.0; state],
            vec![0.0; state],
            vec![0.0; rows * 8],
        );
        let out = LstmForwardOutputs {
            y: &mut y,
            h_n: &mut hn,
            c_n: &mut cn,
            gates: &mut g,
            cells: None,
        };
        let msg = lstm_forward(d, &inp, out).unwrap_err().to_string();
        assert!(msg.contains("batch row 1"), "{bad}: {msg}");
    }
}
