//! Finite-difference gradient checks of the positions of a sequence (`AddTimeRows` at
//! its input and its table, a table longer than the sequence, the sinusoids under GELU
//! as a Transformer encoder's input takes them), through the whole stack as
//! `gradcheck.rs` checks the other ops (its documentation gives the method).

// why: the helpers below panic on failure like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gradcheck_case;

use tensorfit_core::args::{ActivationInputs, AddTimeRowsInputs, SinusoidsInputs};
use tensorfit_core::{Activation, Op};
use tensorfit_testing::Rng;

use gradcheck_case::*;

#[test]
fn add_time_rows_at_its_input_and_a_table_longer_than_the_sequence() {
    // Rows 3 and 4 of the table are not read: their gradient is zero.
    let mut rng = Rng::new(41);
    for (t, n) in [(3, 3), (3, 5)] {
        let mut c = Case::new("add_time_rows");
        let x = c.random("x", &[t, 2, 4], &mut rng);
        let table = c.random("table", &[n, 4], &mut rng);
        let out = c
            .graph
            .apply("out", Op::AddTimeRows, AddTimeRowsInputs { x, table });
        c.outputs.push(out.unwrap().out);
        c.run(&mut rng);
    }
}

#[test]
fn add_time_rows_with_its_table_alone_and_the_same_table_twice() {
    // Only the table wants a gradient; then one table added to two sequences, whose
    // gradients are summed.
    let mut rng = Rng::new(42);
    let mut c = Case::new("add_time_rows_table");
    let x = c.leaf("x", &[4, 3, 2], rng.normals(24, 0.5), false);
    let table = c.random("table", &[4, 2], &mut rng);
    let out = c
        .graph
        .apply("out", Op::AddTimeRows, AddTimeRowsInputs { x, table });
    c.outputs.push(out.unwrap().out);
    c.run(&mut rng);

    let mut c = Case::new("add_time_rows_shared_table");
    let a = c.random("a", &[2, 3, 2], &mut rng);
    let b = c.random("b", &[3, 1, 2], &mut rng);
    let table = c.random("table", &[3, 2], &mut rng);
    for (name, x) in [("out_a", a), ("out_b", b)] {
        let out = c
            .graph
            .apply(name, Op::AddTimeRows, AddTimeRowsInputs { x, table });
        c.outputs.push(out.unwrap().out);
    }
    c.run(&mut rng);
}

#[test]
fn sinusoids_added_to_a_sequence_then_gelu() {
    // The sinusoids have no inputs, so only x gets a gradient.
    let mut rng = Rng::new(43);
    let mut c = Case::new("sinusoids_gelu");
    let x = c.random("x", &[4, 2, 5], &mut rng);
    let op = Op::Sinusoids { steps: 6, dim: 5 };
    let table = c.graph.apply("pos", op, SinusoidsInputs::default());
    let table = table.unwrap().table;
    let h = c
        .graph
        .apply("h", Op::AddTimeRows, AddTimeRowsInputs { x, table });
    let gelu = Op::Activation(Activation::Gelu);
    let y = c
        .graph
        .apply("y", gelu, ActivationInputs { x: h.unwrap().out });
    c.outputs.push(y.unwrap().y);
    c.run(&mut rng);
}
