//! Tensors larger than the device's largest storage binding, for real: an LSTM layer whose
//! output sequence, gates and cells exceed it, then an elementwise op and a reduction over
//! the gates, against the CPU. On lavapipe the binding limit is 128 MiB: `y` and `cells`
//! are just over it and `gates` over 512 MiB, so the input-projection GEMM runs in blocks
//! of rows, every step's kernels bind windows of the sequences, and the elementwise op
//! and the sum run in chunks. (Every op's split path, backward included, also runs in
//! `tests/conformance.rs` with bindings lowered to 1 KiB; this case checks the device
//! with real, large windows, in a few seconds on lavapipe.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use tensorfit_core::{Activation, Backend, BufferId, Op, Shape, TensorView};
use tensorfit_cpu::CpuBackend;

/// Allocates and fills (or zeroes) one tensor per shape.
fn upload(b: &mut dyn Backend, shape: &[usize], data: Option<&[f32]>) -> TensorView {
    let shape = Shape::new(shape);
    let buf: BufferId = b.allocate(shape.numel() as u64 * 4).unwrap();
    let v = TensorView::whole(buf, shape);
    if let Some(d) = data {
        b.write(&v, d).unwrap();
    }
    v
}

fn download(b: &mut dyn Backend, v: &TensorView) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    b.read(v, &mut out).unwrap();
    out
}

/// Runs the forward (cells kept), then tanh over the gates and the gates' column sums:
/// returns the named results.
fn run(
    b: &mut dyn Backend,
    dims: [usize; 4],
    inputs: &[Vec<f32>],
) -> Vec<(&'static str, Vec<f32>)> {
    let [t, n, i, h] = dims;
    let shapes: [&[usize]; 7] = [
        &[t, n, i],
        &[n, h],
        &[n, h],
        &[4 * h, i],
        &[4 * h, h],
        &[4 * h],
        &[4 * h],
    ];
    let ins: Vec<TensorView> = shapes
        .iter()
        .zip(inputs)
        .map(|(s, d)| upload(b, s, Some(d)))
        .collect();
    let outs: Vec<TensorView> = [&[t, n, h][..], &[n, h], &[n, h], &[t, n, 4 * h], &[t, n, h]]
        .iter()
        .map(|s| upload(b, s, None))
        .collect();
    b.execute(
        &Op::LstmForward {
            keep_for_backward: true,
        },
        &ins,
        &outs,
    )
    .unwrap();
    let gates = &outs[3];
    let tanh = upload(b, &[t, n, 4 * h], None);
    b.execute(
        &Op::Activation(Activation::Tanh),
        std::slice::from_ref(gates),
        std::slice::from_ref(&tanh),
    )
    .unwrap();
    let sums = upload(b, &[4 * h], None);
    let op = Op::SumToShape {
        shape: Shape::from([4 * h]),
    };
    b.execute(
        &op,
        std::slice::from_ref(&tanh),
        std::slice::from_ref(&sums),
    )
    .unwrap();
    let names = ["y", "h_n", "c_n", "gates", "cells"];
    let mut results: Vec<(&str, Vec<f32>)> = names
        .iter()
        .zip(&outs)
        .map(|(n, v)| (*n, download(b, v)))
        .collect();
    results.push(("tanh(gates)", download(b, &tanh)));
    results.push(("Σ rows", download(b, &sums)));
    results
}

#[test]
fn an_lstm_sequence_larger_than_one_binding() {
    let Some(gpu) = common::device("an_lstm_sequence_larger_than_one_binding") else {
        return;
    };
    let limit = gpu.binding_limit() as usize;
    // y is [T, B, H] with B·H = 2^19 floats per step: just over the binding limit.
    let (n, i, h) = (65536, 4, 8);
    let t = limit / 4 / (n * h) + 1;
    let y_bytes = t * n * h * 4;
    assert!(y_bytes > limit);
    let dims = [t, n, i, h];
    let sizes = [t * n * i, n * h, n * h, 4 * h * i, 4 * h * h, 4 * h, 4 * h];
    let scales = [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5];
    let inputs: Vec<Vec<f32>> = sizes
        .iter()
        .zip(scales)
        .enumerate()
        .map(|(k, (&len, s))| common::values(len, k as u64 + 1, s))
        .collect();
    println!(
        "T={t} B={n} I={i} H={h}: y {:.1} MiB, gates {:.1} MiB, binding limit {:.1} MiB",
        y_bytes as f64 / 1048576.0,
        4.0 * y_bytes as f64 / 1048576.0,
        limit as f64 / 1048576.0
    );
    let start = Instant::now();
    let mut gpu: Box<dyn Backend> = Box::new(gpu);
    let got = run(gpu.as_mut(), dims, &inputs);
    println!("wgpu: {:.1} s", start.elapsed().as_secs_f64());
    let start = Instant::now();
    let want = run(&mut CpuBackend::new(), dims, &inputs);
    println!("cpu: {:.1} s", start.elapsed().as_secs_f64());
    for ((name, g), (_, w)) in got.iter().zip(&want).take(6) {
        let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let err = common::worst(g, w, 1e-5 * scale, 1e-4);
        println!("{name:11} worst error {err:.3} of the tolerance (scale {scale:.3e})");
        assert!(err <= 1.0, "{name}: {err}");
    }
    // The column sums add 4 M values near 0.6, where a plain f32 running sum drifts (each
    // addition to a sum of millions rounds to a quarter), so both are judged against
    // exact sums of the CPU's tanh values. The GPU sums each block of rows with Kahan's
    // compensation, the CPU in f64.
    let (tanh, width) = (&want[5].1, 4 * h);
    let mut exact = vec![0.0f64; width];
    for row in tanh.chunks_exact(width) {
        for (e, &v) in exact.iter_mut().zip(row) {
            *e += v as f64;
        }
    }
    let rel = |v: &[f32]| {
        v.iter()
            .zip(&exact)
            .map(|(&a, &e)| ((a as f64 - e) / e).abs())
            .fold(0.0, f64::max)
    };
    let (gpu, cpu) = (rel(&got[6].1), rel(&want[6].1));
    println!("column sums: relative error vs exact: wgpu {gpu:.1e}, cpu {cpu:.1e}");
    assert!(gpu <= 1e-5, "wgpu column sums: {gpu}");
    assert!(cpu <= 1e-5, "cpu column sums: {cpu}");
}
