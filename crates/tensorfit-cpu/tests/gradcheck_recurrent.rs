//! Finite-difference gradient checks of the recurrent layers (LSTM and GRU: every input
//! and output, without an input gradient, over padded batches with lengths, on token
//! ids), through the whole stack as `gradcheck.rs` checks the other ops (its
//! documentation gives the method).

// why: the helpers below panic on failure like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gradcheck_case;

use tensorfit_core::args::SliceTimeInputs;
use tensorfit_core::Op;
use tensorfit_testing::Rng;

use gradcheck_case::*;

#[test]
fn lstm_over_a_padded_batch_with_lengths_from_zero_to_all_steps() {
    // Sequences of 3, 0, 1 and 2 of T = 3 steps: the padding carries the state, gets no
    // gradient, and h_n, c_n are each row's own last state.
    let mut rng = Rng::new(21);
    let (t, b, i, h) = (3, 4, 3, 4);
    let mut c = Case::new("lstm_lengths");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), true);
    let lengths = c.leaf("lengths", &[b], vec![3.0, 0.0, 1.0, 2.0], false);
    let out = lstm_on(&mut c, x, (b, i, h), Some(lengths), &mut rng);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}

#[test]
fn lstm_last_steps_of_a_padded_batch_through_slice_time_at_lengths() {
    // The classifier's use on a padded batch: each row's own last step.
    let mut rng = Rng::new(22);
    let (t, b, i, h) = (3, 4, 3, 4);
    let mut c = Case::new("lstm_last_steps");
    let x = c.leaf("x", &[t, b, i], rng.normals(t * b * i, 0.5), true);
    let lengths = c.leaf("lengths", &[b], vec![2.0, 3.0, 0.0, 1.0], false);
    let out = lstm_on(&mut c, x, (b, i, h), Some(lengths), &mut rng);
    let x = SliceTimeInputs {
        x: out.y,
        lengths: Some(lengths),
    };
    let last = c.graph.apply("last", Op::SliceTime { t: t - 1 }, x);
    c.outputs.push(last.unwrap().out);
    c.run(&mut rng);
}

#[test]
fn lstm_forward_all_inputs_all_outputs() {
    let mut rng = Rng::new(6);
    let (mut c, out) = lstm_case(&mut rng, true);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}

#[test]
fn lstm_forward_without_input_gradient_and_one_output() {
    // x is not differentiated (LstmBackward { input_grad: false }) and only c_n is
    // seeded, so y's and h_n's gradients are Fill zeros.
    let mut rng = Rng::new(7);
    let (mut c, out) = lstm_case(&mut rng, false);
    c.outputs.push(out.c_n);
    c.run(&mut rng);
}

#[test]
fn lstm_last_step_through_slice_time() {
    // The classifier's use: only the last time step of y is read.
    let mut rng = Rng::new(8);
    let (mut c, out) = lstm_case(&mut rng, true);
    let x = SliceTimeInputs {
        x: out.y,
        lengths: None,
    };
    let last = c.graph.apply("last", Op::SliceTime { t: 2 }, x);
    c.outputs.push(last.unwrap().out);
    c.run(&mut rng);
}

#[test]
fn gru_forward_all_inputs_both_outputs_and_both_biases_apart() {
    let mut rng = Rng::new(16);
    let (mut c, out) = gru_case(&mut rng, true, None);
    c.outputs.extend([out.y, out.h_n]);
    c.run(&mut rng);
}

#[test]
fn gru_over_a_padded_batch_with_lengths_from_zero_to_all_steps() {
    let mut rng = Rng::new(18);
    let (mut c, out) = gru_case(&mut rng, true, Some(&[3.0, 0.0, 1.0, 2.0]));
    c.outputs.extend([out.y, out.h_n]);
    c.run(&mut rng);
}

#[test]
fn gru_forward_without_input_gradient_and_only_the_final_state() {
    // x is not differentiated (GruBackward { input_grad: false }) and only h_n is seeded,
    // so y's gradient is Fill zeros.
    let mut rng = Rng::new(17);
    let (mut c, out) = gru_case(&mut rng, false, None);
    c.outputs.push(out.h_n);
    c.run(&mut rng);
}

#[test]
fn lstm_on_token_ids_all_outputs() {
    // x holds ids [T, B] = [3, 2] over a vocabulary of 4, one repeated: w_ih's gradient
    // is the scatter-add of the gate gradients into the columns of the ids seen.
    let mut rng = Rng::new(15);
    let (t, b, v, h) = (3, 2, 4, 3);
    let mut c = Case::new("lstm on tokens");
    let x = c.leaf("x", &[t, b], vec![2.0, 0.0, 2.0, 3.0, 0.0, 2.0], false);
    let out = lstm_on(&mut c, x, (b, v, h), None, &mut rng);
    c.outputs.extend([out.y, out.h_n, out.c_n]);
    c.run(&mut rng);
}
