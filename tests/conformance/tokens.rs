//! Token inputs in the suite: cases of `embedding`, `embedding_backward` and the LSTM ops
//! on token ids (added to `ops::cases`, so every device runs them against the CPU), and
//! [`one_hot_equivalence`]: on each device, an LSTM on token ids gives what the same LSTM
//! gives on the materialised one-hot vectors of those ids, forward and backward.

use tensorfit::core::{Backend, HostTensor, Op, Shape};
use tensorfit_testing::{Rng, TestRng};

use crate::ops::{case, lstm_backward_rest, run, Case, Tensors};
use crate::{Checks, OP_TOL};

/// Ids of `shape` drawn from `0..vocab` (small vocabularies repeat ids, so the
/// scatter-adds sum several rows).
fn ids(r: &mut Rng, shape: &[usize], vocab: usize) -> HostTensor {
    let n = shape.iter().product();
    let data = (0..n).map(|_| r.range(0, vocab - 1) as f32).collect();
    HostTensor::new(Shape::new(shape), data).unwrap()
}

/// The one-hot vectors `[.., vocab]` of `ids`.
fn one_hot(ids: &HostTensor, vocab: usize) -> HostTensor {
    let mut data = vec![0.0; ids.numel() * vocab];
    for (row, &id) in data.chunks_exact_mut(vocab).zip(&ids.data) {
        row[id as usize] = 1.0;
    }
    let mut shape = ids.shape.0.clone();
    shape.push(vocab);
    HostTensor::new(Shape::new(&shape), data).unwrap()
}

/// LSTM sizes (T, B, vocabulary, H): `w_ih` `[132, 17]` is larger than a 1 KiB binding
/// (split by gate rows); one larger vocabulary than a binding holds (each gate row split).
const LSTM_SIZES: [(usize, usize, usize, usize); 4] =
    [(4, 20, 17, 33), (1, 1, 1, 1), (3, 5, 300, 2), (2, 3, 4, 5)];

pub(crate) fn token_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // (vocabulary, width, ids): small; a table of many rows larger than a 1 KiB binding
    // (split by tokens); rows longer than a binding (each split).
    for (vocab, e, n) in [(7, 5, 13), (1, 1, 1), (300, 3, 50), (5, 300, 4)] {
        let table = r.tensor(&[vocab, e], 1.0);
        let ids = ids(r, &[n], vocab);
        let name = format!("V{vocab} E{e} N{n}");
        let inputs = vec![table, ids.clone()];
        v.push(case(format!("embedding {name}"), Op::Embedding, inputs));
        let inputs = vec![ids, r.tensor(&[n, e], 1.0)];
        let op = Op::EmbeddingBackward { vocab };
        v.push(case(format!("embedding_backward {name}"), op, inputs));
    }
    // A sequence of ids `[T, B]` gives `[T, B, E]`.
    let inputs = vec![r.tensor(&[9, 4], 1.0), ids(r, &[3, 5], 9)];
    v.push(case(
        "embedding of a [3, 5] sequence",
        Op::Embedding,
        inputs,
    ));
    let inputs = vec![ids(r, &[3, 5], 9), r.tensor(&[3, 5, 4], 1.0)];
    let op = Op::EmbeddingBackward { vocab: 9 };
    v.push(case("embedding_backward of a [3, 5] sequence", op, inputs));
    for (t, b, vocab, h) in LSTM_SIZES {
        let [forward, backward] = lstm_pair(r, (t, b, vocab, h));
        let name = format!("T{t} B{b} V{vocab} H{h}");
        for keep_for_backward in [true, false] {
            let op = Op::LstmForward { keep_for_backward };
            let inputs = forward.clone();
            v.push(case(
                format!("lstm_forward on tokens {name} keep {keep_for_backward}"),
                op,
                inputs,
            ));
        }
        let op = Op::LstmBackward { input_grad: false };
        v.push(case(
            format!("lstm_backward on tokens {name}"),
            op,
            backward,
        ));
    }
}

/// Random inputs of an LSTM forward and backward on token ids `[T, B]`.
fn lstm_pair(r: &mut Rng, (t, b, vocab, h): (usize, usize, usize, usize)) -> [Vec<HostTensor>; 2] {
    let params = vec![
        ids(r, &[t, b], vocab),
        r.tensor(&[b, h], 1.0),
        r.tensor(&[b, h], 1.0),
        r.tensor(&[4 * h, vocab], 0.5),
        r.tensor(&[4 * h, h], 0.5),
    ];
    let mut forward = params.clone();
    forward.extend([r.tensor(&[4 * h], 0.5), r.tensor(&[4 * h], 0.5)]);
    let mut backward = params;
    backward.extend(lstm_backward_rest(r, (t, b, h)));
    [forward, backward]
}

/// On `device`: the LSTM ops on token ids against the same ops on the ids' one-hot
/// vectors (every output; the backward without `dx`, which ids do not have).
pub fn one_hot_equivalence(device: &mut dyn Backend, checks: &mut Checks) {
    let mut r = Rng::new(77);
    for (t, b, vocab, h) in LSTM_SIZES {
        let [forward, backward] = lstm_pair(&mut r, (t, b, vocab, h));
        let name = format!("T{t} B{b} V{vocab} H{h}");
        let forward_op = Op::LstmForward {
            keep_for_backward: true,
        };
        let backward_op = Op::LstmBackward { input_grad: false };
        for (op, inputs) in [(forward_op, forward), (backward_op, backward)] {
            let mut dense = inputs.clone();
            dense[0] = one_hot(&inputs[0], vocab);
            let by_id = run(device, &case("tokens", op.clone(), inputs)).unwrap();
            let hot = run(device, &case("one-hot", op.clone(), dense)).unwrap();
            for ((got, want), label) in by_id.iter().zip(&hot).zip(op.output_labels()) {
                let what = format!("{} {name}: {label}", op.name());
                checks.close(&what, got, want, OP_TOL);
            }
        }
    }
}
