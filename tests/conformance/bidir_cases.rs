//! The cases of the ops a bidirectional layer is built from (`ops.rs`): `reverse_time`
//! whole and at lengths (0, 1 and `T` in every batch of three rows or more; a row alone;
//! one step; token ids `[T, B]`), `concat_features` and `slice_features` on sequences, on rows and on one
//! vector, with feature counts that are not multiples of 4, at sizes a 1 KiB binding
//! splits into several launches (windows of steps, blocks of one step's rows, parts of
//! one row).

use tensorfit::core::{HostTensor, Op};
use tensorfit_testing::{Rng, TestRng};

use super::{case, Case, Tensors};

/// Lengths `[B]` in `0..=t`: with three rows or more the first is empty, the second one
/// step long and the last whole; the others random.
pub(super) fn lengths(r: &mut Rng, t: usize, b: usize) -> HostTensor {
    let mut data: Vec<f32> = (0..b).map(|_| r.range(0, t) as f32).collect();
    if b >= 3 {
        (data[0], data[1], data[b - 1]) = (0.0, 1.0, t as f32);
    }
    HostTensor::new([b], data).unwrap()
}

pub(super) fn bidir_cases(r: &mut Rng, v: &mut Vec<Case>) {
    reverse_cases(r, v);
    // [.., Fa] and [.., Fb]: sequences, rows, one vector; rows wider than a 1 KiB
    // binding; more rows than one holds.
    for (a, b) in [
        (vec![5, 4, 3], vec![5, 4, 6]),
        (vec![7, 1], vec![7, 5]),
        (vec![1, 2], vec![1, 3]),
        (vec![3], vec![2]),
        (vec![3, 300], vec![3, 1]),
        (vec![40, 9, 7], vec![40, 9, 5]),
    ] {
        let inputs = vec![r.tensor(&a, 1.0), r.tensor(&b, 1.0)];
        let name = format!("concat_features {a:?} {b:?}");
        v.push(case(name, Op::ConcatFeatures, inputs));
    }
    for (x, start, width) in [
        (vec![5, 4, 9], 0, 4),
        (vec![5, 4, 9], 4, 5),
        (vec![5, 4, 9], 2, 3),
        (vec![5, 4, 9], 0, 9),
        (vec![2, 1, 1], 0, 1),
        (vec![6], 1, 4),
        (vec![3, 300], 1, 299),
        (vec![3, 300], 250, 50),
        (vec![40, 9, 12], 5, 7),
    ] {
        let op = Op::SliceFeatures { start, width };
        let name = format!("slice_features {start}..+{width} of {x:?}");
        v.push(case(name, op, vec![r.tensor(&x, 1.0)]));
    }
}

fn reverse_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // [T, B, F]: small; a row alone; one step; a step of more rows than a 1 KiB binding
    // holds (blocks of rows, a launch per pair of steps); many steps of a few rows
    // (windows of whole steps).
    for (t, b, f) in [
        (5, 4, 3),
        (6, 1, 7),
        (1, 5, 4),
        (1, 1, 1),
        (9, 40, 7),
        (40, 3, 5),
    ] {
        let x = r.tensor(&[t, b, f], 1.0);
        let name = format!("reverse_time [{t}, {b}, {f}]");
        v.push(case(name, Op::ReverseTime, vec![x.clone()]));
        let lengths = lengths(r, t, b);
        let name = format!("reverse_time [{t}, {b}, {f}] at lengths {:?}", lengths.data);
        v.push(case(name, Op::ReverseTime, vec![x, lengths]));
    }
    // A row alone at lengths 0, 1 and T.
    for length in [0.0, 1.0, 6.0] {
        let x = r.tensor(&[6, 1, 3], 1.0);
        let lengths = HostTensor::new([1], vec![length]).unwrap();
        let name = format!("reverse_time [6, 1, 3] at length {length}");
        v.push(case(name, Op::ReverseTime, vec![x, lengths]));
    }
    // Token ids [T, B] (a bidirectional stack reading ids directly): one value per step.
    for (t, b) in [(7, 5), (40, 9)] {
        let ids = HostTensor::new([t, b], (0..t * b).map(|i| (i % 11) as f32).collect());
        let lengths = lengths(r, t, b);
        let name = format!("reverse_time ids [{t}, {b}] at lengths {:?}", lengths.data);
        v.push(case(name, Op::ReverseTime, vec![ids.unwrap(), lengths]));
    }
}
