//! The mean-squared-error ops' cases of the conformance suite (`ops.rs`): a head on the
//! last step `[B, K]`, one on every step `[T, B, K]`, a single element, and sizes that a
//! 1 KiB binding splits into several launches.

use tensorfit::core::{HostTensor, Op};

use super::{case, Case, Tensors};
use tensorfit_testing::Rng;

pub(super) fn mse_cases(r: &mut Rng, v: &mut Vec<Case>) {
    let shapes: [&[usize]; 4] = [&[16, 3], &[7, 5, 2], &[1, 1], &[300, 7]];
    for dims in shapes {
        let (pred, target) = (r.tensor(dims, 2.0), r.tensor(dims, 2.0));
        let name = format!("mse {dims:?}");
        v.push(case(name, Op::MseLoss, vec![pred.clone(), target.clone()]));
        let dloss = HostTensor::new([1], vec![0.7]).unwrap();
        let name = format!("mse_backward {dims:?}");
        v.push(case(name, Op::MseLossBackward, vec![pred, target, dloss]));
    }
}
