//! The cases of the positions of a sequence (`ops.rs`): `add_time_rows` with tables of
//! exactly the sequence's steps and of more, `sum_batch_to_rows` into tables of as many
//! and more rows, and `sinusoids` of odd and even widths up to position 2047 and up to
//! the widest table's every frequency bit; on one step and one row, and at sizes a 1 KiB
//! binding splits into several launches (blocks of rows, parts of one row, windows of
//! batch rows carrying their sums; the batch of 16 500 rows is more than one window of
//! rows on any device).

use tensorfit::core::Op;
use tensorfit_testing::Rng;

use super::{case, Case, Tensors};

pub(super) fn positions_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // [T, B, D] and the table's N: small; a longer table; one of each; many steps of a
    // few rows; a step of more rows than a 1 KiB binding holds; rows wider than one; a
    // very long batch of one feature.
    for (t, b, d, n) in [
        (5, 4, 3, 5),
        (5, 4, 3, 9),
        (1, 1, 1, 1),
        (40, 9, 7, 45),
        (6, 50, 7, 6),
        (3, 2, 300, 4),
        (2, 16_500, 1, 3),
    ] {
        let x = r.tensor(&[t, b, d], 1.0);
        let table = r.tensor(&[n, d], 1.0);
        let name = format!("add_time_rows [{t}, {b}, {d}] table [{n}, {d}]");
        v.push(case(name, Op::AddTimeRows, vec![x, table]));
        let dout = r.tensor(&[t, b, d], 1.0);
        let op = Op::SumBatchToRows { rows: n };
        let name = format!("sum_batch_to_rows [{t}, {b}, {d}] to {n} rows");
        v.push(case(name, op, vec![dout]));
    }
    // An odd width's last column is a sine; positions to 2047; rows wider than a 1 KiB
    // binding; the widest table (dim 2^17: all 16 frequency factors).
    for (steps, dim) in [(7, 5), (1, 1), (2048, 6), (50, 64), (3, 301), (1, 1 << 17)] {
        let op = Op::Sinusoids { steps, dim };
        v.push(case(format!("sinusoids [{steps}, {dim}]"), op, vec![]));
    }
}
