//! Finite-difference gradient checks of the attention ops (`Op::AttentionScores` and
//! `Op::AttentionMix`, wired by autodiff to their backward ops): the queries, keys and
//! values of a whole attention, its weights seeded too, with and without lengths and the
//! causal mask, one head and three, one step. Through the whole stack as `gradcheck.rs`
//! checks the other ops (its documentation gives the method).

// why: the helpers below panic on failure like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gradcheck_case;

use tensorfit_core::args::{AttentionMixInputs, AttentionScoresInputs};
use tensorfit_core::Op;
use tensorfit_testing::Rng;

use gradcheck_case::*;

/// Attention of `heads` heads over `[T, B, D]` (`dims`) at `lengths` (`[B]`, or none):
/// checks `q`, `k`, `v` through `out = AttentionMix(AttentionScores(q, k), v)`, and with
/// `seed_probs` through the weights as well.
fn attention(
    name: &'static str,
    dims @ (t, b, _): (usize, usize, usize),
    (heads, causal): (usize, bool),
    lengths: Option<Vec<f32>>,
    seed_probs: bool,
    rng: &mut Rng,
) {
    let mut c = Case::new(name);
    let shape = [dims.0, dims.1, dims.2];
    let q = c.random("q", &shape, rng);
    let k = c.random("k", &shape, rng);
    let v = c.random("v", &shape, rng);
    assert!(lengths
        .as_ref()
        .is_none_or(|l| l.len() == b && l.iter().all(|&l| l <= t as f32)));
    let lengths = lengths.map(|l| c.leaf("lengths", &[b], l, false));
    let op = Op::AttentionScores { heads, causal };
    let probs = c
        .graph
        .apply("scores", op, AttentionScoresInputs { q, k, lengths });
    let probs = probs.unwrap().probs;
    let mix = Op::AttentionMix { heads };
    let out = c.graph.apply("mix", mix, AttentionMixInputs { probs, v });
    c.outputs.push(out.unwrap().out);
    if seed_probs {
        c.outputs.push(probs);
    }
    c.run(rng);
}

#[test]
fn attention_over_whole_sequences_one_head_and_three() {
    let mut rng = Rng::new(41);
    attention(
        "attention 1 head",
        (4, 2, 3),
        (1, false),
        None,
        false,
        &mut rng,
    );
    attention(
        "attention 3 heads",
        (3, 2, 6),
        (3, false),
        None,
        true,
        &mut rng,
    );
}

#[test]
fn attention_at_lengths_from_zero_to_all_steps() {
    // Row 1 has no keys (its weights and output are zeros, its q, k, v get nothing);
    // rows 0 and 2 attend to their first steps from every query, padded ones too.
    let mut rng = Rng::new(42);
    let lengths = Some(vec![2.0, 0.0, 4.0]);
    attention(
        "attention at lengths",
        (4, 3, 4),
        (2, false),
        lengths,
        true,
        &mut rng,
    );
}

#[test]
fn causal_attention_with_and_without_lengths() {
    let mut rng = Rng::new(43);
    attention(
        "causal attention",
        (4, 2, 4),
        (2, true),
        None,
        true,
        &mut rng,
    );
    let lengths = Some(vec![3.0, 1.0]);
    attention(
        "causal at lengths",
        (4, 2, 2),
        (1, true),
        lengths,
        false,
        &mut rng,
    );
}

#[test]
fn attention_of_one_step() {
    // One key: every weight is 1, so only v gets a gradient (q and k's are zero).
    let mut rng = Rng::new(44);
    attention(
        "one step",
        (1, 3, 4),
        (2, false),
        Some(vec![1.0, 0.0, 1.0]),
        true,
        &mut rng,
    );
}
