//! Token inputs in the suite: cases of `embedding`, `embedding_backward` and the LSTM and
//! GRU ops on token ids (added to `ops::cases`, so every device runs them against the
//! CPU), and [`one_hot_equivalence`]: on each device, an LSTM or GRU on token ids gives
//! what the same layer gives on the materialised one-hot vectors of those ids, forward
//! and backward.

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

/// Layer sizes (T, B, vocabulary, H): `w_ih` `[132, 17]` is larger than a 1 KiB binding
/// (split by gate rows); one larger vocabulary than a binding holds (each gate row split);
/// more steps than a forward that keeps nothing holds (T = 37).
const LAYER_SIZES: [(usize, usize, usize, usize); 5] = [
    (4, 20, 17, 33),
    (1, 1, 1, 1),
    (3, 5, 300, 2),
    (2, 3, 4, 5),
    (37, 3, 6, 4),
];

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
    for dims in LAYER_SIZES {
        for layer in token_layers(r, dims) {
            let name = layer.name(dims);
            for keep in [true, false] {
                v.push(case(
                    format!("{name} keep {keep}"),
                    layer.forward_op(keep),
                    layer.forward.clone(),
                ));
            }
            v.push(case(name, layer.backward_op(), layer.backward));
        }
    }
}

/// A recurrent layer on token ids `[T, B]`: the random inputs of its forward and of its
/// backward.
struct TokenLayer {
    gru: bool,
    forward: Vec<HostTensor>,
    backward: Vec<HostTensor>,
}

impl TokenLayer {
    fn forward_op(&self, keep_for_backward: bool) -> Op {
        match self.gru {
            true => Op::GruForward { keep_for_backward },
            false => Op::LstmForward { keep_for_backward },
        }
    }

    /// The backward, without `dx` (ids have no gradient).
    fn backward_op(&self) -> Op {
        match self.gru {
            true => Op::GruBackward { input_grad: false },
            false => Op::LstmBackward { input_grad: false },
        }
    }

    fn name(&self, (t, b, vocab, h): (usize, usize, usize, usize)) -> String {
        let cell = if self.gru { "gru" } else { "lstm" };
        format!("{cell} on tokens T{t} B{b} V{vocab} H{h}")
    }
}

/// An LSTM and a GRU layer of `(T, B, vocabulary, H)` on random ids.
fn token_layers(r: &mut Rng, (t, b, vocab, h): (usize, usize, usize, usize)) -> [TokenLayer; 2] {
    let lstm = {
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
        TokenLayer {
            gru: false,
            forward,
            backward,
        }
    };
    let gru = {
        let params = vec![
            ids(r, &[t, b], vocab),
            r.tensor(&[b, h], 1.0),
            r.tensor(&[3 * h, vocab], 0.5),
            r.tensor(&[3 * h, h], 0.5),
        ];
        let mut forward = params.clone();
        forward.extend([r.tensor(&[3 * h], 0.5), r.tensor(&[3 * h], 0.5)]);
        let mut backward = params;
        backward.extend([
            r.tensor(&[t, b, h], 1.0),
            r.between(&[t, b, 3 * h], 0.0, 1.0),
            r.tensor(&[t, b, 3 * h], 1.0),
            r.tensor(&[t, b, h], 1.0),
            r.tensor(&[b, h], 1.0),
        ]);
        TokenLayer {
            gru: true,
            forward,
            backward,
        }
    };
    [lstm, gru]
}

/// On `device`: the LSTM and GRU ops on token ids against the same ops on the ids'
/// one-hot vectors (every output; the backward without `dx`, which ids do not have).
pub fn one_hot_equivalence(device: &mut dyn Backend, checks: &mut Checks) {
    let mut r = Rng::new(77);
    for dims in LAYER_SIZES {
        for layer in token_layers(&mut r, dims) {
            let name = layer.name(dims);
            let ops = [layer.forward_op(true), layer.backward_op()];
            for (op, inputs) in ops.into_iter().zip([layer.forward, layer.backward]) {
                let mut dense = inputs.clone();
                dense[0] = one_hot(&inputs[0], dims.2);
                let by_id = run(device, &case("tokens", op.clone(), inputs)).unwrap();
                let hot = run(device, &case("one-hot", op.clone(), dense)).unwrap();
                for ((got, want), label) in by_id.iter().zip(&hot).zip(op.output_labels()) {
                    checks.close(&format!("{name} {}: {label}", op.name()), got, want, OP_TOL);
                }
            }
        }
    }
}
