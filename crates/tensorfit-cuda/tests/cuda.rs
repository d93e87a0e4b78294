//! The CUDA backend's own tests, in three groups:
//! 1. absence: opening the backend on a machine without a GPU returns a readable reason,
//!    never a panic (this runs everywhere, and is the one that runs on CI);
//! 2. every `.cu` source compiles with NVRTC where NVRTC is present (no GPU needed);
//! 3. what only this backend has, where a GPU is present: the driver's out-of-memory,
//!    bad labels reported through the status word, view checks, the measured overhead.
//!    Every op against the CPU reference is the conformance suite's
//!    (`tests/conformance.rs` at the workspace root), which runs on every device present.
//!
//! A test that needs what the machine lacks prints why and passes, unless
//! `TENSORFIT_REQUIRE` names `cuda` (`TENSORFIT_REQUIRE=cuda,wgpu` on a GPU machine), which
//! turns every such skip into a failure.

// why: a test's helpers fail the test by panicking, with the error in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{Activation, Backend, DeviceKind, Error, Op, Shape, TensorView};
use tensorfit_cuda::kernels::{entry_params, SOURCES};
use tensorfit_cuda::{compile_kernels, nvrtc_info, probe, select_arch, CudaBackend};

/// Skips (prints why) or, if `TENSORFIT_REQUIRE` names cuda, fails.
fn skip(test: &str, why: &str) {
    tensorfit_testing::skip(test, "cuda", why);
}

/// The GPU backend, or `None` after printing why there is none.
fn cuda(test: &str) -> Option<CudaBackend> {
    match CudaBackend::new() {
        Ok(b) => Some(b),
        Err(e) => {
            skip(test, &e.to_string());
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// 1. Absence
// ---------------------------------------------------------------------------------------

#[test]
fn opening_without_a_gpu_is_a_readable_error_not_a_panic() {
    match CudaBackend::new() {
        Ok(b) => {
            let info = b.info();
            assert_eq!(info.kind, DeviceKind::Cuda);
            assert!(!info.name.is_empty() && !info.software);
            assert!(info.total_bytes > 0 && info.free_bytes.is_some());
            assert_eq!(info.capacity_source, "driver");
            assert_eq!(info.alignment_bytes, 256);
            eprintln!("CUDA present: {}", b.describe());
        }
        Err(e) => {
            let Error::Backend { backend, message } = &e else {
                panic!("expected a backend error, got {e:?}");
            };
            assert_eq!(*backend, "cuda");
            assert!(message.len() > 10, "reason too short: {message:?}");
            assert!(!message.contains("panick"), "{message}");
            // The same reason reaches `tensorfit devices` through `probe`.
            assert_eq!(probe().unwrap_err(), *message);
            skip("opening_without_a_gpu", message);
        }
    }
}

#[test]
fn a_user_cap_is_reported_and_enforced() {
    let mut b = match CudaBackend::with_capacity_cap(1 << 20) {
        Ok(b) => b,
        Err(e) => return skip("a_user_cap_is_reported_and_enforced", &e.to_string()),
    };
    let info = b.info();
    assert_eq!(info.total_bytes, 1 << 20);
    assert_eq!(info.capacity_source, "user cap");
    let a = b.allocate(768 << 10).unwrap();
    match b.allocate(512 << 10) {
        Err(Error::OutOfMemory {
            device,
            requested,
            available,
        }) => {
            assert_eq!(device, "cuda");
            assert_eq!(requested, 512 << 10);
            assert_eq!(available, 256 << 10);
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    b.free(a).unwrap();
    assert_eq!(b.memory().allocated, 0);
    assert_eq!(b.memory().peak, 768 << 10);
    b.reset_peak();
    assert_eq!(b.memory().peak, 0);
}

#[test]
fn the_drivers_out_of_memory_is_an_out_of_memory_error() {
    let Some(mut b) = cuda("the_drivers_out_of_memory_is_an_out_of_memory_error") else {
        return;
    };
    let total = b.info().total_bytes;
    match b.allocate(total * 2) {
        Err(Error::OutOfMemory { device, .. }) => assert_eq!(device, "cuda"),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // The backend is still usable afterwards.
    let buf = b.allocate(1024).unwrap();
    let v = TensorView::whole(buf, Shape::from([256]));
    b.write(&v, &[1.5; 256]).unwrap();
    let mut out = [0.0; 256];
    b.read(&v, &mut out).unwrap();
    assert_eq!(out, [1.5; 256]);
}

// ---------------------------------------------------------------------------------------
// 2. NVRTC
// ---------------------------------------------------------------------------------------

#[test]
fn every_kernel_source_compiles_with_nvrtc() {
    let info = match nvrtc_info() {
        Ok(i) => i,
        Err(why) => return skip("every_kernel_source_compiles_with_nvrtc", &why),
    };
    assert!(!info.archs.is_empty(), "NVRTC lists no architectures");
    // A GPU older than every architecture NVRTC targets gets a reason, not a failure
    // later (the GTX 750 of the seed report is sm_50; CUDA 13 starts at sm_75).
    if info.archs[0] > 50 {
        let why = select_arch((5, 0), &info).unwrap_err();
        assert!(why.contains("cannot target sm_50"), "{why}");
        eprintln!("a GTX 750 here: {why}");
    }
    // The oldest and newest architectures NVRTC targets, and Hopper (the H200) if listed.
    let mut archs = vec![info.archs[0], *info.archs.last().unwrap_or(&info.archs[0])];
    if info.archs.contains(&90) {
        archs.push(90);
    }
    archs.dedup();
    for arch in archs {
        let compiled = compile_kernels(arch).unwrap_or_else(|e| panic!("compute_{arch}: {e}"));
        assert_eq!(compiled.len(), SOURCES.len());
        for ((file, ptx), src) in compiled.iter().zip(SOURCES.iter()) {
            assert_eq!(*file, src.file);
            assert!(
                ptx.contains(&format!(".target sm_{arch}")),
                "{file}: target"
            );
            for kernel in src.kernels {
                // Every launch is checked against this parameter list on the GPU.
                let params = entry_params(ptx, kernel);
                assert!(
                    params.is_some_and(|p| !p.is_empty()),
                    "{file} for compute_{arch}: no kernel `{kernel}` with readable parameters"
                );
            }
        }
        eprintln!(
            "NVRTC {}.{}: {} sources compiled for compute_{arch}",
            info.version.0,
            info.version.1,
            compiled.len()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 3. What only the GPU has (every op against the CPU is the conformance suite's:
//    `tests/conformance.rs` at the workspace root runs on every device present)
// ---------------------------------------------------------------------------------------

fn s(dims: &[usize]) -> Shape {
    Shape::from(dims)
}

#[test]
fn a_bad_label_is_an_input_error_naming_the_row() {
    let Some(mut gpu) = cuda("a_bad_label_is_an_input_error_naming_the_row") else {
        return;
    };
    let buf = gpu.allocate(4096).unwrap();
    let view = |offset: usize, dims: &[usize]| TensorView::at(buf, offset, s(dims));
    let (logits, labels, loss, probs) = (
        view(0, &[2, 3]),
        view(64, &[2]),
        view(128, &[1]),
        view(192, &[2, 3]),
    );
    gpu.write(&logits, &[0.0; 6]).unwrap();
    gpu.write(&labels, &[0.0, 3.0]).unwrap();
    gpu.execute(
        &Op::SoftmaxCrossEntropy,
        &[logits.clone(), labels.clone()],
        &[loss, probs],
    )
    .unwrap();
    let err = gpu.synchronize().unwrap_err();
    assert!(matches!(err, Error::Input(_)), "{err}");
    assert!(err.to_string().contains("row 1"), "{err}");
    // Reported once: the backend is clean afterwards.
    gpu.synchronize().unwrap();
}

#[test]
fn overlapping_views_and_bad_views_are_errors() {
    let Some(mut gpu) = cuda("overlapping_views_and_bad_views_are_errors") else {
        return;
    };
    let buf = gpu.allocate(400).unwrap();
    let v = |offset: usize, n: usize| TensorView::at(buf, offset, s(&[n]));
    let err = gpu
        .execute(&Op::Activation(Activation::Tanh), &[v(0, 10)], &[v(5, 10)])
        .unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    let err = gpu
        .execute(&Op::Activation(Activation::Tanh), &[v(95, 10)], &[v(0, 10)])
        .unwrap_err();
    assert!(err.to_string().contains("past"), "{err}");
    gpu.free(buf).unwrap();
    assert!(gpu.free(buf).is_err());
}

#[test]
fn overhead_is_measured_and_plausible() {
    let Some(gpu) = cuda("overhead_is_measured_and_plausible") else {
        return;
    };
    let info = gpu.info();
    eprintln!("{}", gpu.describe());
    // At least the cuBLAS workspace (4 MiB), at most a quarter of the device.
    assert!(info.overhead_bytes >= 4 << 20, "{}", info.overhead_bytes);
    assert!(
        info.overhead_bytes < info.total_bytes / 4,
        "{}",
        info.overhead_bytes
    );
}
