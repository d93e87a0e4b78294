//! The GRU ops' cases of the conformance suite (`ops.rs`): odd sizes, an empty input,
//! steps wide enough that a 1 KiB binding splits them into several launches, more steps
//! than a forward that keeps nothing holds (T = 37), each without and with `lengths`.

use tensorfit::core::Op;

use super::{case, Case, Tensors};
use crate::lengths::lengths;
use tensorfit_testing::{Rng, TestRng};

pub(super) fn gru_cases(r: &mut Rng, v: &mut Vec<Case>) {
    let mut dims = vec![(4, 20, 17, 33), (1, 1, 1, 1), (3, 5, 0, 4), (37, 3, 5, 7)];
    for _ in 0..3 {
        dims.push((r.range(1, 6), r.range(1, 5), r.range(1, 7), r.range(1, 9)));
    }
    for ((t, b, i, h), padded) in dims.into_iter().flat_map(|d| [(d, false), (d, true)]) {
        let params = [
            r.tensor(&[t, b, i], 1.0),
            r.tensor(&[b, h], 1.0),
            r.tensor(&[3 * h, i], 0.5),
            r.tensor(&[3 * h, h], 0.5),
        ];
        let lengths = padded.then(|| lengths(r, t, b));
        let dims = format!("T{t} B{b} I{i} H{h}");
        let name = match &lengths {
            Some(l) => format!("{dims} lengths {:?}", l.data),
            None => dims,
        };
        for keep in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend([r.tensor(&[3 * h], 0.5), r.tensor(&[3 * h], 0.5)]);
            inputs.extend(lengths.clone());
            let op = Op::GruForward {
                keep_for_backward: keep,
            };
            v.push(case(format!("gru_forward {name} keep {keep}"), op, inputs));
        }
        for input_grad in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend([
                r.tensor(&[t, b, h], 1.0),
                r.between(&[t, b, 3 * h], 0.0, 1.0),
                r.tensor(&[t, b, 3 * h], 1.0),
                r.tensor(&[t, b, h], 1.0),
                r.tensor(&[b, h], 1.0),
            ]);
            inputs.extend(lengths.clone());
            let op = Op::GruBackward { input_grad };
            v.push(case(
                format!("gru_backward {name} dx {input_grad}"),
                op,
                inputs,
            ));
        }
    }
}
