//! The backend contract of `CpuBackend`, through the public `Backend` trait only:
//! tensors sharing one arena buffer, rejected overlaps, exact memory accounting,
//! out-of-memory as an error, and checked reads, writes and views.
//!
//! Why these: the planner will place many tensors in one buffer, so results must not
//! depend on where a tensor lives; and a session falls back to another device on
//! `OutOfMemory`, so running out must be an error with the right figures, never a panic.

// why: the helpers below panic on failure like the tests that call them; clippy's
// allow-unwrap-in-tests covers only the #[test] functions themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{AdamParams, Backend, BufferId, Error, LstmDims, Op, Shape, TensorView};
use tensorfit_cpu::CpuBackend;
use tensorfit_testing::{Rng, TestRng};

/// Deterministic test data in [-0.5, 0.5).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.signed() * 0.5).collect()
}

fn view(buffer: BufferId, offset: usize, shape: &[usize]) -> TensorView {
    TensorView::at(buffer, offset, Shape::from(shape))
}

/// Runs `op` twice: once with every tensor in its own buffer, once with all of them in
/// one buffer at scattered offsets (gaps between them, in an order unrelated to the op's),
/// and returns the outputs of both runs.
fn run_separate_and_shared(
    op: &Op,
    input_shapes: &[&[usize]],
    inputs: &[Vec<f32>],
    output_shapes: &[&[usize]],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut be = CpuBackend::new();
    let own = |be: &mut CpuBackend, shape: &[usize]| {
        let b = be.allocate(4 * Shape::from(shape).numel() as u64).unwrap();
        view(b, 0, shape)
    };
    let ins: Vec<_> = input_shapes.iter().map(|s| own(&mut be, s)).collect();
    let outs: Vec<_> = output_shapes.iter().map(|s| own(&mut be, s)).collect();
    for (v, data) in ins.iter().zip(inputs) {
        be.write(v, data).unwrap();
    }
    be.execute(op, &ins, &outs).unwrap();
    let read = |be: &mut CpuBackend, views: &[TensorView]| -> Vec<Vec<f32>> {
        views
            .iter()
            .map(|v| {
                let mut out = vec![0.0; v.len()];
                be.read(v, &mut out).unwrap();
                out
            })
            .collect()
    };
    let separate = read(&mut be, &outs);

    // One arena: outputs first, then inputs in reverse order, 3 elements apart.
    let all: Vec<&[usize]> = output_shapes
        .iter()
        .chain(input_shapes.iter().rev())
        .copied()
        .collect();
    let total: usize = all.iter().map(|s| Shape::from(*s).numel() + 3).sum();
    let mut offset = 5;
    let arena = be.allocate(4 * (offset + total) as u64).unwrap();
    let mut placed = Vec::new();
    for s in &all {
        placed.push(view(arena, offset, s));
        offset += Shape::from(*s).numel() + 3;
    }
    let shared_outs: Vec<_> = placed[..output_shapes.len()].to_vec();
    let mut shared_ins: Vec<_> = placed[output_shapes.len()..].to_vec();
    shared_ins.reverse();
    for (v, data) in shared_ins.iter().zip(inputs) {
        be.write(v, data).unwrap();
    }
    be.execute(op, &shared_ins, &shared_outs).unwrap();
    (separate, read(&mut be, &shared_outs))
}

#[test]
fn lstm_in_one_arena_equals_separate_buffers() {
    let d = LstmDims {
        steps: 3,
        batch: 2,
        input: 3,
        hidden: 4,
        tokens: false,
    };
    let (t, b, i, h) = (d.steps, d.batch, d.input, d.hidden);
    let input_shapes: [&[usize]; 7] = [
        &[t, b, i],
        &[b, h],
        &[b, h],
        &[4 * h, i],
        &[4 * h, h],
        &[4 * h],
        &[4 * h],
    ];
    let inputs: Vec<Vec<f32>> = input_shapes
        .iter()
        .enumerate()
        .map(|(k, s)| values(k as u64, Shape::from(*s).numel()))
        .collect();
    let output_shapes: [&[usize]; 5] = [&[t, b, h], &[b, h], &[b, h], &[t, b, 4 * h], &[t, b, h]];
    let op = Op::LstmForward {
        keep_for_backward: true,
    };
    let (separate, shared) = run_separate_and_shared(&op, &input_shapes, &inputs, &output_shapes);
    assert_eq!(separate, shared);
    assert!(separate[0].iter().any(|&v| v != 0.0));
}

#[test]
fn matmul_of_a_tensor_with_its_own_transpose_in_one_arena() {
    // The same view passed twice must be readable twice.
    let mut be = CpuBackend::new();
    let arena = be.allocate(4 * 20).unwrap();
    let a = view(arena, 2, &[2, 3]);
    let c = view(arena, 10, &[2, 2]);
    be.write(&a, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let op = Op::MatMul {
        trans_a: false,
        trans_b: true,
    };
    be.execute(&op, &[a.clone(), a], std::slice::from_ref(&c))
        .unwrap();
    let mut out = [0.0; 4];
    be.read(&c, &mut out).unwrap();
    assert_eq!(out, [14.0, 32.0, 32.0, 77.0]);
}

#[test]
fn adam_update_in_one_arena_equals_separate_buffers() {
    // An update op: the targets are read and written through the same slices.
    let n = 7;
    let inputs = vec![values(1, n), vec![0.01, 0.3, 0.999]];
    let op = Op::Adam(AdamParams {
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.1,
    });
    // The targets start at zero in both runs (fresh buffers).
    let (separate, shared) =
        run_separate_and_shared(&op, &[&[n], &[3]], &inputs, &[&[n], &[n], &[n]]);
    assert_eq!(separate, shared);
    assert!(separate[1].iter().all(|&m| m != 0.0));
}

#[test]
fn overlapping_outputs_are_errors() {
    let mut be = CpuBackend::new();
    let arena = be.allocate(4 * 32).unwrap();
    let op = Op::MatMul {
        trans_a: false,
        trans_b: false,
    };
    let a = view(arena, 0, &[2, 2]);
    let b = view(arena, 4, &[2, 2]);
    // The output overlaps input b.
    let err = be
        .execute(&op, &[a.clone(), b.clone()], &[view(arena, 6, &[2, 2])])
        .unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err}");
    assert!(err.to_string().contains("overlaps"), "{err}");
    // Two outputs overlapping each other.
    let bn = Op::BatchNorm {
        eps: 1e-5,
        training: true,
    };
    let x = view(arena, 0, &[2, 3]);
    let (gamma, beta) = (view(arena, 6, &[3]), view(arena, 9, &[3]));
    let outs = [
        view(arena, 12, &[2, 3]),
        view(arena, 18, &[3]),
        view(arena, 20, &[3]),
    ];
    let err = be.execute(&bn, &[x, gamma, beta], &outs).unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    // Touching but not overlapping is fine.
    be.execute(&op, &[a, b], &[view(arena, 8, &[2, 2])])
        .unwrap();
}

#[test]
fn views_that_do_not_fit_are_errors() {
    let mut be = CpuBackend::new();
    let buf = be.allocate(4 * 8).unwrap();
    let op = Op::Activation(tensorfit_core::Activation::Tanh);
    // Past the end of the buffer.
    let err = be
        .execute(&op, &[view(buf, 6, &[4])], &[view(buf, 0, &[4])])
        .unwrap_err();
    assert!(matches!(err, Error::Backend { .. }), "{err}");
    // Output of the wrong shape for the op.
    let err = be
        .execute(&op, &[view(buf, 0, &[4])], &[view(buf, 4, &[2, 2])])
        .unwrap_err();
    assert!(err.to_string().contains("activation_forward"), "{err}");
    // Wrong number of outputs.
    assert!(be.execute(&op, &[view(buf, 0, &[4])], &[]).is_err());
    // A freed buffer.
    be.free(buf).unwrap();
    assert!(be
        .execute(&op, &[view(buf, 0, &[4])], &[view(buf, 4, &[4])])
        .is_err());
    assert!(be.free(buf).is_err());
}

#[test]
fn read_and_write_check_lengths_and_ranges() {
    let mut be = CpuBackend::new();
    let buf = be.allocate(4 * 6).unwrap();
    let v = view(buf, 2, &[4]);
    be.write(&v, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    let mut out = [0.0; 6];
    be.read(&view(buf, 0, &[6]), &mut out).unwrap();
    assert_eq!(out, [0.0, 0.0, 1.0, 2.0, 3.0, 4.0]);
    assert!(matches!(
        be.write(&v, &[1.0; 3]),
        Err(Error::Backend { .. })
    ));
    assert!(matches!(
        be.read(&v, &mut [0.0; 5]),
        Err(Error::Backend { .. })
    ));
    assert!(be.write(&view(buf, 3, &[4]), &[1.0; 4]).is_err());
    assert!(be.read(&view(BufferId(99), 0, &[1]), &mut [0.0]).is_err());
}

#[test]
fn bad_labels_are_input_errors() {
    let mut be = CpuBackend::new();
    let buf = be.allocate(4 * 32).unwrap();
    let (logits, labels) = (view(buf, 0, &[2, 3]), view(buf, 6, &[2]));
    let (loss, probs) = (view(buf, 8, &[1]), view(buf, 9, &[2, 3]));
    be.write(&labels, &[1.0, 3.0]).unwrap();
    let err = be
        .execute(&Op::SoftmaxCrossEntropy, &[logits, labels], &[loss, probs])
        .unwrap_err();
    assert!(matches!(err, Error::Input(_)), "{err}");
    assert!(err.to_string().contains("row 1"), "{err}");
}

#[test]
fn out_of_memory_beyond_the_cap_is_an_error_with_figures() {
    let mut be = CpuBackend::with_capacity_cap(1000);
    assert_eq!(be.name(), "cpu");
    assert_eq!(be.memory().total, 1000);
    let a = be.allocate(800).unwrap();
    match be.allocate(300) {
        Err(Error::OutOfMemory {
            device,
            requested,
            available,
        }) => {
            assert_eq!((device.as_str(), requested, available), ("cpu", 300, 200));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // A failed allocation changes nothing; freeing makes room.
    assert_eq!(be.memory().allocated, 800);
    assert!(be.memory().free.unwrap() <= 200);
    be.free(a).unwrap();
    let b = be.allocate(300).unwrap();
    let c = be.allocate(700).unwrap();
    assert!(be.allocate(1).is_err());
    be.free(b).unwrap();
    be.free(c).unwrap();
}

#[test]
fn huge_requests_fail_cleanly_without_a_cap() {
    let mut be = CpuBackend::new();
    for bytes in [u64::MAX, 1 << 62, (usize::MAX as u64) / 2] {
        assert!(
            matches!(be.allocate(bytes), Err(Error::OutOfMemory { requested, .. }) if requested == bytes),
            "{bytes} bytes"
        );
    }
    assert_eq!(be.memory().allocated, 0);
}

#[test]
fn accounting_is_exact_in_bytes_asked_for() {
    let mut be = CpuBackend::new();
    let a = be.allocate(10).unwrap(); // not a multiple of 4: counted as asked
    let b = be.allocate(400).unwrap();
    let m = be.memory();
    assert_eq!((m.allocated, m.peak), (410, 410));
    be.free(b).unwrap();
    let m = be.memory();
    assert_eq!((m.allocated, m.peak), (10, 410));
    be.reset_peak();
    assert_eq!(be.memory().peak, 10);
    let c = be.allocate(20).unwrap();
    assert_eq!(be.memory().peak, 30);
    // A 10-byte buffer holds 3 whole f32s, zero-filled.
    let mut out = [1.0; 3];
    be.read(&view(a, 0, &[3]), &mut out).unwrap();
    assert_eq!(out, [0.0; 3]);
    be.free(a).unwrap();
    be.free(c).unwrap();
    assert_eq!(be.memory().allocated, 0);
    be.synchronize().unwrap();
}

#[test]
fn an_executable_that_does_not_fit_frees_what_it_took() {
    use std::collections::HashMap;
    use tensorfit_core::args::ActivationInputs;
    use tensorfit_core::{Activation, Executable, Graph};
    let mut g = Graph::new();
    let x = g.input("x", [100, 100]);
    let relu = Op::Activation(Activation::Relu);
    let y = g
        .apply("y", relu.clone(), ActivationInputs { x })
        .unwrap()
        .y;
    g.apply("z", relu, ActivationInputs { x: y }).unwrap();
    // Two of the three 40 000-byte tensors fit.
    let mut be = CpuBackend::with_capacity_cap(100_000);
    let err = Executable::new(g, &mut be, HashMap::new()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested: 40_000,
                available: 20_000,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(be.memory().allocated, 0);
    assert_eq!(be.memory().peak, 80_000);
}
