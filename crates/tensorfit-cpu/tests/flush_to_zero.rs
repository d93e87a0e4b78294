//! The CPU kernels flush subnormal floats to zero (issue 12): long sequences must not
//! fall off the speed cliff that subnormal arithmetic causes on x86, and a later change
//! (a kernel run off the kernel pool, a new thread pool, a dependency's own threads)
//! must not silently lose that. These tests pin the behaviour, not a timing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Backend, BinaryOp, Op, Shape, TensorView};
use tensorfit_cpu::kernels::PARALLEL_MIN_ELEMENTS;
use tensorfit_cpu::CpuBackend;

fn is_subnormal(v: f32) -> bool {
    v != 0.0 && v.abs() < f32::MIN_POSITIVE
}

/// Allocates, writes and returns one tensor per `(shape, data)`.
fn tensors(be: &mut CpuBackend, items: &[(&[usize], Vec<f32>)]) -> Vec<TensorView> {
    items
        .iter()
        .map(|(shape, data)| {
            let shape = Shape::from(*shape);
            let buffer = be.allocate(4 * shape.numel() as u64).unwrap();
            let view = TensorView::at(buffer, 0, shape);
            be.write(&view, data).unwrap();
            view
        })
        .collect()
}

fn read(be: &mut CpuBackend, view: &TensorView) -> Vec<f32> {
    let mut out = vec![0.0; view.len()];
    be.read(view, &mut out).unwrap();
    out
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn kernels_flush_subnormal_results_and_read_subnormal_inputs_as_zero() {
    let mut be = CpuBackend::new();
    // A small pass (one thread) and a large one (split over the pool).
    for n in [8, 4 * PARALLEL_MIN_ELEMENTS] {
        let tiny = f32::MIN_POSITIVE / 4.0;
        assert!(is_subnormal(tiny));
        // a·b: 1e-20 · 1e-20 would be the subnormal 1e-40; tiny · 2^30 would be 2^-98.
        let a: Vec<f32> = (0..n)
            .map(|i| if i % 2 == 0 { 1e-20 } else { tiny })
            .collect();
        let b: Vec<f32> = (0..n)
            .map(|i| if i % 2 == 0 { 1e-20 } else { 1073741824.0 })
            .collect();
        let ins = tensors(&mut be, &[(&[n], a), (&[n], b)]);
        let out = tensors(&mut be, &[(&[n], vec![1.0; n])]);
        be.execute(&Op::Binary(BinaryOp::Mul), &ins, &out).unwrap();
        let product = read(&mut be, &out[0]);
        assert!(
            product.iter().all(|&v| v == 0.0),
            "n = {n}: subnormal products or operands were not flushed: {:?}",
            &product[..4]
        );
    }
    // The small pass ran on this thread (`threads::run_inline`), which has its own mode
    // back: IEEE subnormals, as the rest of the program expects.
    assert!(!tensorfit_cpu::denormals::flushing_to_zero());
    assert!(std::hint::black_box(f32::MIN_POSITIVE) / 2.0 > 0.0);
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn an_lstm_backward_over_many_steps_decays_to_zero_without_subnormals() {
    // One layer over 400 steps; the loss reads only the last step's output, so the
    // gradient shrinks by roughly the forget gate (~0.5) per step back in time and
    // passes below f32::MIN_POSITIVE long before step 0.
    let (t, b, i, h) = (400, 4, 8, 16);
    let wave = |n: usize, scale: f32| -> Vec<f32> {
        (0..n).map(|k| scale * ((k as f32 * 0.37).sin())).collect()
    };
    let mut dy = vec![0.0; t * b * h];
    dy[(t - 1) * b * h..].fill(1.0);
    let mut be = CpuBackend::new();
    let ins = tensors(
        &mut be,
        &[
            (&[t, b, i], wave(t * b * i, 1.0)),
            (&[b, h], vec![0.0; b * h]),
            (&[b, h], vec![0.0; b * h]),
            (&[4 * h, i], wave(4 * h * i, 0.3)),
            (&[4 * h, h], wave(4 * h * h, 0.1)),
            (&[4 * h], vec![0.0; 4 * h]),
            (&[4 * h], vec![0.0; 4 * h]),
        ],
    );
    let fwd = tensors(
        &mut be,
        &[
            (&[t, b, h], vec![0.0; t * b * h]),
            (&[b, h], vec![0.0; b * h]),
            (&[b, h], vec![0.0; b * h]),
            (&[t, b, 4 * h], vec![0.0; t * b * 4 * h]),
            (&[t, b, h], vec![0.0; t * b * h]),
        ],
    );
    let op = Op::LstmForward {
        keep_for_backward: true,
    };
    be.execute(&op, &ins, &fwd).unwrap();

    let grads_in = tensors(
        &mut be,
        &[
            (&[t, b, h], dy),
            (&[b, h], vec![0.0; b * h]),
            (&[b, h], vec![0.0; b * h]),
        ],
    );
    let back_ins: Vec<TensorView> = ins[..5]
        .iter()
        .chain([&fwd[0], &fwd[3], &fwd[4]])
        .chain(&grads_in)
        .cloned()
        .collect();
    let back_outs = tensors(
        &mut be,
        &[
            (&[t, b, 4 * h], vec![0.0; t * b * 4 * h]),
            (&[b, h], vec![0.0; b * h]),
            (&[b, h], vec![0.0; b * h]),
            (&[4 * h, i], vec![0.0; 4 * h * i]),
            (&[4 * h, h], vec![0.0; 4 * h * h]),
            (&[4 * h], vec![0.0; 4 * h]),
            (&[t, b, i], vec![0.0; t * b * i]),
        ],
    );
    let op = Op::LstmBackward { input_grad: true };
    be.execute(&op, &back_ins, &back_outs).unwrap();

    for (k, view) in back_outs.iter().enumerate() {
        let values = read(&mut be, view);
        let bad = values.iter().filter(|v| is_subnormal(**v)).count();
        assert_eq!(
            bad, 0,
            "output {k} of lstm_backward holds {bad} subnormal values"
        );
    }
    // The gradient really passed through the subnormal range: per step (largest
    // magnitude), it falls gently from normal values to exact zeros, so without flushing
    // the first zero step would have held subnormals.
    let dgates = read(&mut be, &back_outs[0]);
    let per_step: Vec<f32> = dgates
        .chunks(b * 4 * h)
        .map(|s| s.iter().fold(0.0f32, |m, v| m.max(v.abs())))
        .collect();
    assert!(
        per_step[t - 1] > 1e-3,
        "the last step's gradient is {}",
        per_step[t - 1]
    );
    assert_eq!(
        per_step[0], 0.0,
        "the gradient did not decay to zero by step 0"
    );
    let first_zero = per_step.iter().rposition(|&v| v == 0.0).unwrap() + 1;
    let smallest_normal = per_step[first_zero];
    assert!(
        smallest_normal < f32::MIN_POSITIVE * 1e4,
        "the step after the last zero holds {smallest_normal}: the decay jumped to zero \
         from a large value, so this test would not see subnormals either way"
    );
}
