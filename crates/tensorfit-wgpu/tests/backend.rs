//! The backend's contract beyond the kernels (which `tests/conformance.rs` at the
//! workspace root checks against the CPU): device figures, byte accounting, zero-filled
//! allocations, out-of-memory as an error, bad views as errors, never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit_core::{Backend, BufferId, DeviceKind, Error, Op, Shape, TensorView};
use tensorfit_wgpu::WgpuBackend;

fn view(buffer: BufferId, offset: usize, shape: &[usize]) -> TensorView {
    TensorView::at(buffer, offset, Shape::new(shape))
}

/// The session may hand a backend to another thread.
#[test]
fn the_backend_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<WgpuBackend>();
}

#[test]
fn info_describes_the_adapter() {
    let Some(b) = common::device("info_describes_the_adapter") else {
        return;
    };
    let info = b.info();
    println!("{info:#?}");
    println!(
        "api {}, binding limit {} bytes, adapters {:?}",
        b.api(),
        b.binding_limit(),
        WgpuBackend::adapters()
    );
    assert_eq!(info.kind, DeviceKind::Wgpu);
    assert!(!info.name.is_empty());
    assert!(info.total_bytes > 0 && info.max_buffer_bytes > 0);
    assert!(info.alignment_bytes.is_power_of_two() && info.alignment_bytes >= 4);
    assert!(info.overhead_bytes > 0, "the parameter ring is overhead");
    assert!(!info.capacity_source.is_empty());
    assert!(info.free_bytes.is_none_or(|f| f <= info.total_bytes));
    let capped = WgpuBackend::with_capacity_cap(1 << 20).unwrap().info();
    assert_eq!(capped.total_bytes, 1 << 20);
    assert!(capped.capacity_source.starts_with("user cap"), "{capped:?}");
}

#[test]
fn allocations_are_zeroed_counted_and_freed() {
    let Some(mut b) = common::device("allocations_are_zeroed_counted_and_freed") else {
        return;
    };
    let a = b.allocate(4000).unwrap();
    let c = b.allocate(13).unwrap();
    assert_eq!(b.memory().allocated, 4013);
    let mut out = vec![1.0; 1000];
    b.read(&view(a, 0, &[1000]), &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 0.0), "new buffers read as zeros");
    let data = common::values(300, 1, 5.0);
    let v = view(a, 64, &[300]);
    b.write(&v, &data).unwrap();
    let mut back = vec![0.0; 300];
    b.read(&v, &mut back).unwrap();
    assert_eq!(back, data);
    b.free(a).unwrap();
    assert_eq!(b.memory().allocated, 13);
    assert_eq!(b.memory().peak, 4013);
    b.reset_peak();
    assert_eq!(b.memory().peak, 13);
    assert!(b.free(a).is_err(), "double free");
    assert!(b.read(&v, &mut back).is_err(), "read of a freed buffer");
    b.free(c).unwrap();
    b.synchronize().unwrap();
}

#[test]
fn out_of_memory_is_an_error_not_a_panic() {
    let Some(mut b) = common::device("out_of_memory_is_an_error_not_a_panic") else {
        return;
    };
    let max = b.info().max_buffer_bytes;
    for bytes in [max + 4, u64::MAX] {
        match b.allocate(bytes) {
            Err(Error::OutOfMemory { device, .. }) => assert_eq!(device, "wgpu"),
            other => panic!("{bytes} bytes: {other:?}"),
        }
    }
    let mut capped = WgpuBackend::with_capacity_cap(1 << 20).unwrap();
    let a = capped.allocate(800 << 10).unwrap();
    match capped.allocate(300 << 10) {
        Err(Error::OutOfMemory {
            requested,
            available,
            ..
        }) => assert_eq!((requested, available), (300 << 10, 224 << 10)),
        other => panic!("{other:?}"),
    }
    capped.free(a).unwrap();
    capped.allocate(300 << 10).unwrap();
}

#[test]
fn bad_views_and_ops_are_errors() {
    let Some(mut b) = common::device("bad_views_and_ops_are_errors") else {
        return;
    };
    let buf = b.allocate(64).unwrap();
    let mut out = vec![0.0; 8];
    assert!(
        b.read(&view(buf, 12, &[8]), &mut out).is_err(),
        "past the end"
    );
    assert!(
        b.read(&view(buf, 0, &[8]), &mut [0.0; 3]).is_err(),
        "length"
    );
    assert!(
        b.write(&view(BufferId(99), 0, &[8]), &out).is_err(),
        "unknown buffer"
    );
    let op = Op::Activation(tensorfit_core::Activation::Tanh);
    let overlap = b.execute(&op, &[view(buf, 0, &[8])], &[view(buf, 4, &[8])]);
    assert!(overlap.is_err(), "an output overlapping an input");
    let shape = b.execute(&op, &[view(buf, 0, &[8])], &[view(buf, 8, &[4])]);
    assert!(shape.is_err(), "an output of the wrong shape");
    let fine = b.execute(&op, &[view(buf, 0, &[8])], &[view(buf, 8, &[8])]);
    assert!(fine.is_ok());
    b.synchronize().unwrap();
}
