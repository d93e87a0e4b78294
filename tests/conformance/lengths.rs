//! Padded batches in the suite: cases of the LSTM ops (the GRU's are in `gru_cases.rs`)
//! and of `slice_time` /
//! `scatter_time` (each row at its own step) with per-sequence `lengths`
//! (added to `ops::cases`, so every device runs them against the CPU). The lengths are
//! random in `0..=T` with an empty and a full sequence in every batch of two rows or more.

use tensorfit::core::{HostTensor, Op};
use tensorfit_testing::{Rng, TestRng};

use crate::ops::{case, lstm_backward_rest, lstm_layer, Case, Tensors};

/// Lengths `[B]` in `0..=t`, the first row empty and the last full when `b ≥ 2`.
pub(crate) fn lengths(r: &mut Rng, t: usize, b: usize) -> HostTensor {
    let mut data: Vec<f32> = (0..b).map(|_| r.range(0, t) as f32).collect();
    if b >= 2 {
        (data[0], data[b - 1]) = (0.0, t as f32);
    }
    HostTensor::new([b], data).unwrap()
}

pub(crate) fn length_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // [T, B, F]: small; a step of more rows than a 1 KiB binding holds (split by rows).
    for (t, b, f) in [(5, 4, 3), (6, 40, 9)] {
        let lengths = lengths(r, t, b);
        for step in [t - 1, 1] {
            let inputs = vec![r.tensor(&[t, b, f], 1.0), lengths.clone()];
            let name = format!("slice_time {step} of [{t}, {b}, {f}] at lengths");
            v.push(case(name, Op::SliceTime { t: step }, inputs));
            let inputs = vec![r.tensor(&[b, f], 1.0), lengths.clone()];
            let op = Op::ScatterTime { t: step, steps: t };
            let name = format!("scatter_time {step} of [{t}, {b}, {f}] at lengths");
            v.push(case(name, op, inputs));
        }
    }
    lstm_cases(r, v);
}

fn lstm_cases(r: &mut Rng, v: &mut Vec<Case>) {
    // Rows split into several launches where bindings are small; T = 37 runs past the
    // steps of gates an inference pass holds; one row alone.
    for (t, b, i, h) in [(4, 20, 17, 33), (37, 3, 5, 7), (5, 6, 3, 4), (3, 1, 2, 5)] {
        let params = lstm_layer(r, (t, b, i, h));
        let lengths = lengths(r, t, b);
        let name = format!("T{t} B{b} I{i} H{h} lengths {:?}", lengths.data);
        for keep in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend([r.tensor(&[4 * h], 0.5), r.tensor(&[4 * h], 0.5)]);
            inputs.push(lengths.clone());
            let op = Op::LstmForward {
                keep_for_backward: keep,
            };
            v.push(case(format!("lstm_forward {name} keep {keep}"), op, inputs));
        }
        for input_grad in [true, false] {
            let mut inputs = params.to_vec();
            inputs.extend(lstm_backward_rest(r, (t, b, h)));
            inputs.push(lengths.clone());
            let op = Op::LstmBackward { input_grad };
            v.push(case(
                format!("lstm_backward {name} dx {input_grad}"),
                op,
                inputs,
            ));
        }
    }
}
