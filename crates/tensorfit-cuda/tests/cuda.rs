//! The CUDA backend's own tests, in three groups:
//! 1. absence: opening the backend on a machine without a GPU returns a readable reason,
//!    never a panic (this runs everywhere, and is the one that runs on CI);
//! 2. every `.cu` source compiles with NVRTC where NVRTC is present (no GPU needed);
//! 3. every op against the CPU reference, where a GPU is present.
//!
//! A test that needs what the machine lacks prints why and passes, unless
//! `TENSORFIT_REQUIRE` names `cuda` (`TENSORFIT_REQUIRE=cuda,wgpu` on a GPU machine), which
//! turns every such skip into a failure.

// why: a test's helpers fail the test by panicking, with the error in the message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tensorfit_core::{
    Activation, AdamParams, Backend, BinaryOp, BufferId, DeviceKind, Error, Op, Shape, TensorView,
};
use tensorfit_cpu::CpuBackend;
use tensorfit_cuda::kernels::{entry_params, SOURCES};
use tensorfit_cuda::{compile_kernels, nvrtc_info, probe, select_arch, CudaBackend};

/// True when `TENSORFIT_REQUIRE` lists `cuda`.
fn cuda_required() -> bool {
    std::env::var("TENSORFIT_REQUIRE")
        .map(|v| v.split(',').any(|k| k.trim().eq_ignore_ascii_case("cuda")))
        .unwrap_or(false)
}

/// Skips (prints why) or, if CUDA is required, fails.
fn skip(test: &str, why: &str) {
    assert!(
        !cuda_required(),
        "{test}: CUDA is required (TENSORFIT_REQUIRE) but unavailable: {why}"
    );
    eprintln!("skipped {test}: {why}");
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
// 3. Every op against the CPU reference
// ---------------------------------------------------------------------------------------

/// splitmix64, so that the tests need no `rand`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-scale, scale).
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale)
            .collect()
    }

    /// Whole numbers in [0, k).
    fn labels(&mut self, n: usize, k: usize) -> Vec<f32> {
        (0..n).map(|_| (self.next() % k as u64) as f32).collect()
    }
}

/// One op call: input values, output shapes and, for update ops, the targets' old values.
struct Case {
    op: Op,
    inputs: Vec<(Shape, Vec<f32>)>,
    outputs: Vec<(Shape, Option<Vec<f32>>)>,
}

impl Case {
    /// A case whose output shapes come from the op's own rules.
    fn new(op: Op, inputs: Vec<(Shape, Vec<f32>)>) -> Case {
        let shapes: Vec<&Shape> = inputs.iter().map(|(s, _)| s).collect();
        let outs = op.infer_shapes(&shapes).expect("valid test case");
        Case {
            op,
            inputs,
            outputs: outs.into_iter().map(|s| (s, None)).collect(),
        }
    }

    /// Sets the old values of the targets of an update op.
    fn with_targets(mut self, values: Vec<Vec<f32>>) -> Case {
        for (o, v) in self.outputs.iter_mut().zip(values) {
            o.1 = Some(v);
        }
        self
    }
}

/// Runs `case` on `b` and returns every output. With `arena`, all tensors share one buffer
/// at offsets that are not multiples of anything in particular but 64 elements (256
/// bytes, the backend's alignment), with gaps, as a planner would place them.
fn run(b: &mut dyn Backend, case: &Case, arena: bool) -> Vec<Vec<f32>> {
    let shapes: Vec<&Shape> = case
        .inputs
        .iter()
        .map(|(s, _)| s)
        .chain(case.outputs.iter().map(|(s, _)| s))
        .collect();
    let mut views = Vec::new();
    let mut owned: Vec<BufferId> = Vec::new();
    if arena {
        let mut offsets = Vec::new();
        let mut at = 64;
        for s in &shapes {
            offsets.push(at);
            at += s.numel().div_ceil(64) * 64 + 64;
        }
        let buf = b.allocate(at as u64 * 4).unwrap();
        owned.push(buf);
        for (s, off) in shapes.iter().zip(offsets) {
            views.push(TensorView::at(buf, off, (*s).clone()));
        }
    } else {
        for s in &shapes {
            let buf = b.allocate(s.numel().max(1) as u64 * 4).unwrap();
            owned.push(buf);
            views.push(TensorView::whole(buf, (*s).clone()));
        }
    }
    let (ins, outs) = views.split_at(case.inputs.len());
    for (v, (_, data)) in ins.iter().zip(&case.inputs) {
        b.write(v, data).unwrap();
    }
    for (v, (_, init)) in outs.iter().zip(&case.outputs) {
        // Outputs that are not targets start as garbage, so a kernel that skips an element
        // is caught.
        let data = init.clone().unwrap_or_else(|| vec![f32::NAN; v.len()]);
        b.write(v, &data).unwrap();
    }
    b.execute(&case.op, ins, outs)
        .unwrap_or_else(|e| panic!("{}: {e}", case.op.name()));
    b.synchronize().unwrap();
    let results = outs
        .iter()
        .map(|v| {
            let mut out = vec![0.0; v.len()];
            b.read(v, &mut out).unwrap();
            out
        })
        .collect();
    for buf in owned {
        b.free(buf).unwrap();
    }
    results
}

/// |a - b| <= atol + rtol·|b| element by element, naming the first failure.
fn assert_close(what: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{k}]: cuda {g}, cpu {w}");
    }
}

/// Runs `case` on the CPU and on the GPU (both placements) and compares every output.
fn check(gpu: &mut CudaBackend, case: &Case, atol: f32, rtol: f32) {
    let want = run(&mut CpuBackend::new(), case, false);
    for arena in [false, true] {
        let got = run(gpu, case, arena);
        let labels = case.op.output_labels();
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            if case.op.output_is_scratch(k) {
                continue;
            }
            let what = format!(
                "{} ({:?}, arena {arena}) output {}",
                case.op.name(),
                case.op,
                labels.get(k).unwrap_or(&"?")
            );
            assert_close(&what, g, w, atol, rtol);
        }
    }
}

fn s(dims: &[usize]) -> Shape {
    Shape::from(dims)
}

#[test]
fn matmul_matches_the_cpu_for_every_transpose() {
    let Some(mut gpu) = cuda("matmul_matches_the_cpu_for_every_transpose") else {
        return;
    };
    let mut rng = Rng(1);
    for (m, k, n) in [(1, 1, 1), (7, 13, 5), (64, 33, 100), (100, 250, 1000)] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = if ta { s(&[k, m]) } else { s(&[m, k]) };
            let b = if tb { s(&[n, k]) } else { s(&[k, n]) };
            let case = Case::new(
                Op::MatMul {
                    trans_a: ta,
                    trans_b: tb,
                },
                vec![(a, rng.vec(m * k, 1.0)), (b, rng.vec(k * n, 1.0))],
            );
            check(&mut gpu, &case, 1e-4, 1e-4);
        }
    }
}

#[test]
fn elementwise_ops_match_the_cpu() {
    let Some(mut gpu) = cuda("elementwise_ops_match_the_cpu") else {
        return;
    };
    let mut rng = Rng(2);
    for bop in [BinaryOp::Add, BinaryOp::Mul] {
        for (a, b) in [
            (vec![5, 7], vec![5, 7]),
            (vec![3, 4, 6], vec![6]),
            (vec![9, 11], vec![9, 11]),
        ] {
            let (na, nb) = (a.iter().product(), b.iter().product());
            let case = Case::new(
                Op::Binary(bop),
                vec![(s(&a), rng.vec(na, 2.0)), (s(&b), rng.vec(nb, 2.0))],
            );
            check(&mut gpu, &case, 1e-6, 1e-6);
        }
    }
    for f in [
        Activation::Identity,
        Activation::Relu,
        Activation::Tanh,
        Activation::Sigmoid,
    ] {
        let x = rng.vec(1000, 6.0);
        check(
            &mut gpu,
            &Case::new(Op::Activation(f), vec![(s(&[10, 100]), x.clone())]),
            1e-6,
            1e-5,
        );
        let y: Vec<f32> = x.iter().map(|&v| f.apply(v)).collect();
        let case = Case::new(
            Op::ActivationBackward(f),
            vec![(s(&[10, 100]), y), (s(&[10, 100]), rng.vec(1000, 1.0))],
        );
        check(&mut gpu, &case, 1e-6, 1e-5);
    }
    for (x, out) in [
        (vec![5000, 1000], vec![1000]),
        (vec![3, 4, 6], vec![4, 6]),
        (vec![7], vec![7]),
    ] {
        let n = x.iter().product();
        let case = Case::new(
            Op::SumToShape { shape: s(&out) },
            vec![(s(&x), rng.vec(n, 1.0))],
        );
        check(&mut gpu, &case, 1e-3, 1e-4);
    }
    check(
        &mut gpu,
        &Case::new(
            Op::Fill {
                value: 0.25,
                shape: s(&[3, 5]),
            },
            vec![],
        ),
        0.0,
        0.0,
    );
    let seq = rng.vec(4 * 3 * 5, 1.0);
    check(
        &mut gpu,
        &Case::new(Op::SliceTime { t: 3 }, vec![(s(&[4, 3, 5]), seq)]),
        0.0,
        0.0,
    );
    check(
        &mut gpu,
        &Case::new(
            Op::ScatterTime { t: 1, steps: 4 },
            vec![(s(&[3, 5]), rng.vec(15, 1.0))],
        ),
        0.0,
        0.0,
    );
    let case = Case::new(Op::Copy, vec![(s(&[6, 7]), rng.vec(42, 1.0))])
        .with_targets(vec![rng.vec(42, 1.0)]);
    check(&mut gpu, &case, 0.0, 0.0);
}

/// The inputs of an LSTM layer: x, h0, c0, w_ih, w_hh, b_ih, b_hh.
fn lstm_inputs(rng: &mut Rng, t: usize, b: usize, i: usize, h: usize) -> Vec<(Shape, Vec<f32>)> {
    let scale = 1.0 / (h as f32).sqrt();
    vec![
        (s(&[t, b, i]), rng.vec(t * b * i, 1.0)),
        (s(&[b, h]), rng.vec(b * h, 0.5)),
        (s(&[b, h]), rng.vec(b * h, 0.5)),
        (s(&[4 * h, i]), rng.vec(4 * h * i, scale)),
        (s(&[4 * h, h]), rng.vec(4 * h * h, scale)),
        (s(&[4 * h]), rng.vec(4 * h, scale)),
        (s(&[4 * h]), rng.vec(4 * h, scale)),
    ]
}

#[test]
fn lstm_forward_and_backward_match_the_cpu() {
    let Some(mut gpu) = cuda("lstm_forward_and_backward_match_the_cpu") else {
        return;
    };
    let mut rng = Rng(3);
    for (t, b, i, h) in [
        (1, 1, 1, 1),
        (3, 2, 5, 4),
        (7, 5, 9, 16),
        (50, 100, 152, 250),
    ] {
        let (atol, rtol) = if t >= 50 { (2e-4, 2e-3) } else { (1e-5, 1e-4) };
        let inputs = lstm_inputs(&mut rng, t, b, i, h);
        for keep in [false, true] {
            let case = Case::new(
                Op::LstmForward {
                    keep_for_backward: keep,
                },
                inputs.clone(),
            );
            check(&mut gpu, &case, atol, rtol);
        }
        // The backward pass from the CPU's forward outputs (so that both sides start from
        // the same saved state), with random incoming gradients.
        let fwd = Case::new(
            Op::LstmForward {
                keep_for_backward: true,
            },
            inputs.clone(),
        );
        let saved = run(&mut CpuBackend::new(), &fwd, false);
        let (y, gates, cells) = (saved[0].clone(), saved[3].clone(), saved[4].clone());
        for input_grad in [false, true] {
            let mut bwd_inputs: Vec<(Shape, Vec<f32>)> = inputs[..5].to_vec();
            bwd_inputs.push((s(&[t, b, h]), y.clone()));
            bwd_inputs.push((s(&[t, b, 4 * h]), gates.clone()));
            bwd_inputs.push((s(&[t, b, h]), cells.clone()));
            bwd_inputs.push((s(&[t, b, h]), rng.vec(t * b * h, 1.0)));
            bwd_inputs.push((s(&[b, h]), rng.vec(b * h, 1.0)));
            bwd_inputs.push((s(&[b, h]), rng.vec(b * h, 1.0)));
            let case = Case::new(Op::LstmBackward { input_grad }, bwd_inputs);
            // Weight gradients sum T·B terms: scale the tolerance with them.
            let big = (t * b) as f32;
            check(&mut gpu, &case, atol * big.sqrt(), rtol * 4.0);
        }
    }
}

#[test]
fn batchnorm_ops_match_the_cpu() {
    let Some(mut gpu) = cuda("batchnorm_ops_match_the_cpu") else {
        return;
    };
    let mut rng = Rng(4);
    for (b, c) in [(2, 1), (100, 250), (100, 100), (7, 300)] {
        let x = rng.vec(b * c, 3.0);
        let (gamma, beta) = (rng.vec(c, 1.0), rng.vec(c, 1.0));
        let mean = rng.vec(c, 0.5);
        let var: Vec<f32> = rng.vec(c, 1.0).iter().map(|v| v.abs() + 0.1).collect();
        let eps = 1e-5;
        let train = Case::new(
            Op::BatchNorm {
                eps,
                training: true,
            },
            vec![
                (s(&[b, c]), x.clone()),
                (s(&[c]), gamma.clone()),
                (s(&[c]), beta.clone()),
            ],
        );
        check(&mut gpu, &train, 1e-4, 1e-4);
        let infer = Case::new(
            Op::BatchNorm {
                eps,
                training: false,
            },
            vec![
                (s(&[b, c]), x.clone()),
                (s(&[c]), gamma.clone()),
                (s(&[c]), beta.clone()),
                (s(&[c]), mean.clone()),
                (s(&[c]), var.clone()),
            ],
        );
        check(&mut gpu, &infer, 1e-5, 1e-5);
        for training in [true, false] {
            let case = Case::new(
                Op::BatchNormBackward { eps, training },
                vec![
                    (s(&[b, c]), x.clone()),
                    (s(&[c]), gamma.clone()),
                    (s(&[c]), mean.clone()),
                    (s(&[c]), var.clone()),
                    (s(&[b, c]), rng.vec(b * c, 1.0)),
                ],
            );
            check(&mut gpu, &case, 1e-4, 1e-4);
        }
        let update = Case::new(
            Op::BatchNormStatsUpdate {
                momentum: 0.1,
                unbias: b as f32 / (b as f32 - 1.0),
            },
            vec![(s(&[c]), mean.clone()), (s(&[c]), var.clone())],
        )
        .with_targets(vec![rng.vec(c, 1.0), var.clone()]);
        check(&mut gpu, &update, 1e-6, 1e-6);
    }
}

#[test]
fn softmax_cross_entropy_matches_the_cpu() {
    let Some(mut gpu) = cuda("softmax_cross_entropy_matches_the_cpu") else {
        return;
    };
    let mut rng = Rng(5);
    for (b, k) in [(1, 1), (100, 6), (300, 17), (3, 1000)] {
        let logits = rng.vec(b * k, 20.0);
        let labels = rng.labels(b, k);
        let fwd = Case::new(
            Op::SoftmaxCrossEntropy,
            vec![(s(&[b, k]), logits.clone()), (s(&[b]), labels.clone())],
        );
        check(&mut gpu, &fwd, 1e-5, 1e-4);
        let probs = run(&mut CpuBackend::new(), &fwd, false)[1].clone();
        let bwd = Case::new(
            Op::SoftmaxCrossEntropyBackward,
            vec![(s(&[b, k]), probs), (s(&[b]), labels), (s(&[1]), vec![1.7])],
        );
        check(&mut gpu, &bwd, 1e-6, 1e-5);
    }
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
fn adam_matches_the_cpu() {
    let Some(mut gpu) = cuda("adam_matches_the_cpu") else {
        return;
    };
    let mut rng = Rng(6);
    let n = 403_000;
    let op = Op::Adam(AdamParams {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
    });
    let scalars = vec![
        1e-3 / (1.0 - 0.9f32.powi(3)),
        (1.0 - 0.999f32.powi(3)).sqrt(),
    ];
    let v: Vec<f32> = rng.vec(n, 1e-3).iter().map(|x| x.abs()).collect();
    let case = Case::new(op, vec![(s(&[n]), rng.vec(n, 1.0)), (s(&[2]), scalars)])
        .with_targets(vec![rng.vec(n, 1.0), rng.vec(n, 0.1), v]);
    check(&mut gpu, &case, 1e-6, 1e-5);
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
