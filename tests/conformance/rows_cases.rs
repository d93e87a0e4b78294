//! The cases of a head on every step (`ops.rs`): `MatMul`, `BatchNorm` and softmax
//! cross-entropy reading a sequence `[T, B, F]` as `T·B` rows (`tensorfit_core::rows`),
//! and softmax rows labelled `IGNORE_LABEL` (the steps of a padded batch past a
//! sequence's end), at sizes a 1 KiB binding splits into several launches too.

use tensorfit::core::rows::IGNORE_LABEL;
use tensorfit::core::{HostTensor, Op};

use super::{case, softmax, Case, Tensors};
use tensorfit_testing::Rng;

pub(super) fn rows_cases(r: &mut Rng, v: &mut Vec<Case>) {
    for (t, b, f, n) in [(5, 3, 8, 7), (40, 4, 9, 65)] {
        let (x, w) = (r.tensor(&[t, b, f], 1.0), r.tensor(&[n, f], 1.0));
        let mm = |trans_a, trans_b| Op::MatMul { trans_a, trans_b };
        let name = format!("matmul over every step [{t}, {b}, {f}]·[{n}, {f}]ᵀ");
        v.push(case(name, mm(false, true), vec![x.clone(), w]));
        // The weight's gradient dcᵀ · x, summed over every row.
        let dc = r.tensor(&[t, b, n], 1.0);
        let name = format!("matmul weight gradient over every step [{t}, {b}]");
        v.push(case(name, mm(true, false), vec![dc, x.clone()]));
        let (gamma, beta) = (r.tensor(&[f], 1.5), r.tensor(&[f], 1.0));
        let op = Op::BatchNorm {
            eps: 1e-5,
            training: true,
        };
        let name = format!("batchnorm over every step [{t}, {b}, {f}]");
        v.push(case(name, op, vec![x, gamma, beta]));

        let logits = r.tensor(&[t, b, n], 3.0);
        let mut labels = r.labels(t * b, n);
        labels.shape = [t, b].into();
        // Every third row past the first is padding.
        for (i, l) in labels.data.iter_mut().enumerate() {
            if i % 3 == 2 {
                *l = IGNORE_LABEL;
            }
        }
        let name = format!("softmax over every step [{t}, {b}, {n}] with ignored rows");
        let inputs = vec![logits.clone(), labels.clone()];
        v.push(case(name, Op::SoftmaxCrossEntropy, inputs));
        let dloss = HostTensor::new([1], vec![0.9]).unwrap();
        let name = format!("softmax_backward over every step [{t}, {b}, {n}] with ignored rows");
        let inputs = vec![softmax(&logits, n), labels, dloss];
        v.push(case(name, Op::SoftmaxCrossEntropyBackward, inputs));
    }
}
