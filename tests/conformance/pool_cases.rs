//! The cases of global pooling over time (`ops.rs`): `mean_time` and `max_time` whole
//! and at lengths (0, 1 and `T` in every batch of three rows or more; a row alone at each),
//! and their gradients `mean_time_backward` and `max_time_backward` (steps `at` from -1
//! to `T - 1`), on one step, one row, feature counts that are not multiples of 4, and
//! sizes a 1 KiB binding splits into several launches (windows of steps, blocks of one
//! step's rows, parts of one row).

use tensorfit::core::{HostTensor, Op};
use tensorfit_testing::{Rng, TestRng};

use super::bidir_cases::lengths;
use super::{case, Case, Tensors};

pub(super) fn pool_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // [T, B, F]: small; a row alone; one step; many steps of a few rows (windows of
    // steps); a step of more rows than a 1 KiB binding holds (blocks of rows); rows
    // wider than one (parts of a row).
    for (t, b, f) in [
        (5, 4, 3),
        (6, 1, 7),
        (1, 5, 4),
        (1, 1, 1),
        (40, 9, 7),
        (6, 50, 7),
        (3, 2, 300),
    ] {
        let x = r.tensor(&[t, b, f], 1.0);
        let lengths = lengths(r, t, b);
        let at_lengths = format!("at lengths {:?}", lengths.data);
        for (op, what) in [(Op::MeanTime, "mean_time"), (Op::MaxTime, "max_time")] {
            let name = format!("{what} [{t}, {b}, {f}]");
            v.push(case(name, op.clone(), vec![x.clone()]));
            let name = format!("{what} [{t}, {b}, {f}] {at_lengths}");
            v.push(case(name, op, vec![x.clone(), lengths.clone()]));
        }
        let dout = r.tensor(&[b, f], 1.0);
        let op = Op::MeanTimeBackward { steps: t };
        let name = format!("mean_time_backward [{t}, {b}, {f}]");
        v.push(case(name, op.clone(), vec![dout.clone()]));
        let name = format!("mean_time_backward [{t}, {b}, {f}] {at_lengths}");
        v.push(case(name, op, vec![dout.clone(), lengths]));
        // Steps from -1 (a row of no steps) to T - 1.
        let at = (0..b * f).map(|_| r.range(0, t) as f32 - 1.0).collect();
        let at = HostTensor::new([b, f], at).unwrap();
        let op = Op::MaxTimeBackward { steps: t };
        let name = format!("max_time_backward [{t}, {b}, {f}]");
        v.push(case(name, op, vec![dout, at]));
    }
    // A row alone at lengths 0, 1 and T.
    for length in [0.0, 1.0, 6.0] {
        let x = r.tensor(&[6, 1, 3], 1.0);
        let lengths = HostTensor::new([1], vec![length]).unwrap();
        for (op, what) in [(Op::MeanTime, "mean_time"), (Op::MaxTime, "max_time")] {
            let name = format!("{what} [6, 1, 3] at length {length}");
            v.push(case(name, op, vec![x.clone(), lengths.clone()]));
        }
        let dout = r.tensor(&[1, 3], 1.0);
        let name = format!("mean_time_backward [6, 1, 3] at length {length}");
        let op = Op::MeanTimeBackward { steps: 6 };
        v.push(case(name, op, vec![dout, lengths]));
    }
}
