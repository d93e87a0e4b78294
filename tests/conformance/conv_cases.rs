//! The cases of the ops a 1-D convolution over time is built from (`ops.rs`):
//! `unfold_time` and its gradient `fold_time`, whole and at lengths (0, 1 and `T` in every
//! batch of three rows or more; a row alone at each), causal and `'same'` taps, dilation 2
//! and more, one tap, a span longer than the sequence, and sizes a 1 KiB binding splits
//! into several launches (windows of steps, blocks of one step's rows, parts of one row,
//! groups of taps, more taps than one binding holds); and `reshape`.

use tensorfit::core::{ConvTaps, HostTensor, Op, Shape};
use tensorfit_testing::Rng;

use super::bidir_cases::lengths;
use super::{case, Case, Tensors};

fn taps(kernel: usize, dilation: usize, left: usize) -> ConvTaps {
    ConvTaps {
        kernel,
        dilation,
        left,
    }
}

pub(super) fn conv_cases(r: &mut Rng, v: &mut Vec<Case>) {
    let causal = taps(3, 1, 2);
    let same = taps(3, 2, 2);
    for ((t, b, c), taps) in [
        ((5, 4, 3), causal),
        ((5, 4, 3), same),
        ((5, 4, 3), taps(1, 1, 0)),
        ((6, 1, 7), taps(4, 1, 1)),
        ((1, 5, 4), taps(2, 2, 2)),
        ((40, 9, 7), causal),
        ((6, 50, 7), same),
        ((3, 2, 300), taps(2, 1, 1)),
        ((12, 9, 7), taps(5, 4, 8)),
        ((3, 3, 2), taps(300, 1, 0)),
    ] {
        let ConvTaps {
            kernel,
            dilation,
            left,
        } = taps;
        let what = format!("[{t}, {b}, {c}] K{kernel} dilation {dilation} left {left}");
        let x = r.tensor(&[t, b, c], 1.0);
        let dcols = r.tensor(&[t, b, c * kernel], 1.0);
        let lengths = lengths(r, t, b);
        let at_lengths = format!("at lengths {:?}", lengths.data);
        for (op, input, name) in [
            (taps.unfold(), x, "unfold_time"),
            (taps.fold(), dcols, "fold_time"),
        ] {
            v.push(case(
                format!("{name} {what}"),
                op.clone(),
                vec![input.clone()],
            ));
            let inputs = vec![input, lengths.clone()];
            v.push(case(format!("{name} {what} {at_lengths}"), op, inputs));
        }
    }
    // A row alone at lengths 0, 1 and T.
    for length in [0.0, 1.0, 6.0] {
        let lengths = HostTensor::new([1], vec![length]).unwrap();
        let x = r.tensor(&[6, 1, 3], 1.0);
        let name = format!("unfold_time [6, 1, 3] at length {length}");
        v.push(case(name, causal.unfold(), vec![x, lengths.clone()]));
        let dcols = r.tensor(&[6, 1, 9], 1.0);
        let name = format!("fold_time [6, 1, 9] at length {length}");
        v.push(case(name, causal.fold(), vec![dcols, lengths]));
    }
    // A weight as the GEMM's matrix; a copy larger than a 1 KiB binding.
    for (from, to) in [
        (&[4, 3, 2][..], &[4, 6][..]),
        (&[3, 300], &[900]),
        (&[5], &[5, 1]),
    ] {
        let op = Op::Reshape {
            shape: Shape::new(to),
        };
        let name = format!("reshape {from:?} to {to:?}");
        v.push(case(name, op, vec![r.tensor(from, 1.0)]));
    }
}
