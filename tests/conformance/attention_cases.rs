//! The cases of the attention ops (`ops.rs`): `attention_scores` whole and at lengths (0, 1
//! and `T` in every batch of three rows or more), causal and not, its gradient
//! `attention_scores_backward`, `attention_mix` and `attention_mix_backward`; one head and
//! three, one step, and sizes a 1 KiB binding splits into several launches (blocks of
//! pairs, windows of query steps, of key steps and of summed steps; weights of many rows).

use tensorfit::core::Op;
use tensorfit_testing::Rng;

use super::bidir_cases::lengths;
use super::{case, Case, Tensors};

pub(super) fn attention_cases(r: &mut Rng, v: &mut Vec<Case>) {
    for (t, b, features, heads) in [
        (5, 3, 6, 3),
        (4, 2, 4, 1),
        (1, 3, 4, 2),
        (12, 4, 12, 3),
        (40, 2, 4, 2),
        (7, 5, 10, 1),
    ] {
        let what = format!("[{t}, {b}, {features}] {heads} heads");
        let seq = [t, b, features];
        let probs = [b, heads, t, t];
        let (q, k) = (r.tensor(&seq, 2.0), r.tensor(&seq, 2.0));
        let at = lengths(r, t, b);
        for causal in [false, true] {
            let op = Op::AttentionScores { heads, causal };
            let name = format!("attention_scores {what} causal {causal}");
            v.push(case(name.clone(), op.clone(), vec![q.clone(), k.clone()]));
            let inputs = vec![q.clone(), k.clone(), at.clone()];
            v.push(case(format!("{name} at lengths {:?}", at.data), op, inputs));
        }
        let weights = r.between(&probs, 0.0, 1.0);
        let op = Op::AttentionScoresBackward {
            heads,
            causal: false,
        };
        let inputs = vec![q, k, weights.clone(), r.tensor(&probs, 1.0)];
        v.push(case(
            format!("attention_scores_backward {what}"),
            op,
            inputs,
        ));
        let values = r.tensor(&seq, 1.0);
        let op = Op::AttentionMix { heads };
        let inputs = vec![weights.clone(), values.clone()];
        v.push(case(format!("attention_mix {what}"), op, inputs));
        let op = Op::AttentionMixBackward { heads };
        let inputs = vec![weights, values, r.tensor(&seq, 1.0)];
        v.push(case(format!("attention_mix_backward {what}"), op, inputs));
    }
}
