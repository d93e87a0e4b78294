//! Nothing lost: when the device runs out of memory (or is lost) in the middle of a run,
//! the session moves the training state to the host, replans, and repeats the step; the
//! losses and final weights equal those of an uninterrupted run — in both truncated-BPTT
//! modes (a step of DL4J-style windows is several updates: all of them are repeated).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tensorfit::core::DeviceKind;
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{Batch, Job, OptimConfig, ParamStore, TbpttMode, TemporalOrder};
use tensorfit::session::{decide, start, start_on, Request, Session};
use tensorfit_engine::faults::{Faults, FaultyBackend};

use common::{max_abs, task_model, wgpu_present};

const STEPS: usize = 6;

/// The run's request in truncated-BPTT `mode`: the gradient of the whole sequence (one
/// update a step), or windows of 20 steps (three updates a step).
fn request_in(device: DeviceKind, mode: TbpttMode) -> Request {
    let job = Job::Train {
        batch: 16,
        seq_len: 60,
        eval: None,
    };
    let tbptt = match mode {
        TbpttMode::Last => 60,
        TbpttMode::Windows => 20,
    };
    Request {
        optim: OptimConfig::adam(0.005),
        tbptt_mode: mode,
        ..common::request(
            &task_model(32, 2, 16),
            job,
            tbptt,
            device,
            MemoryCaps::default(),
        )
    }
}

fn data() -> Vec<Batch> {
    let mut t = TemporalOrder::new(4);
    (0..STEPS).map(|_| t.batch(16, 60).unwrap()).collect()
}

fn run(
    session: &mut Session,
    batches: &[Batch],
    at_step: impl Fn(usize),
) -> (Vec<f32>, ParamStore) {
    let mut losses = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        at_step(i);
        let step = session.with_recovery(|t| t.train_step(&b.x, &b.labels));
        losses.push(step.unwrap().loss);
    }
    (losses, session.trainer.parameters().unwrap())
}

fn uninterrupted(device: DeviceKind) -> (Vec<f32>, ParamStore) {
    uninterrupted_in(device, TbpttMode::Last)
}

fn uninterrupted_in(device: DeviceKind, mode: TbpttMode) -> (Vec<f32>, ParamStore) {
    let req = request_in(device, mode);
    let params = ParamStore::init(&req.cfg, 2).unwrap();
    let mut s = start(&req, &decide(&req).unwrap(), &params).unwrap();
    run(&mut s, &data(), |_| {})
}

fn faulty_session(device: DeviceKind, faults: &Arc<Faults>) -> Session {
    faulty_session_in(device, faults, TbpttMode::Last)
}

fn faulty_session_in(device: DeviceKind, faults: &Arc<Faults>, mode: TbpttMode) -> Session {
    let req = request_in(device, mode);
    let params = ParamStore::init(&req.cfg, 2).unwrap();
    let inner = tensorfit::devices::open(device, &MemoryCaps::default()).unwrap();
    let backend = FaultyBackend::new(inner, faults.clone());
    start_on(&req, &decide(&req).unwrap(), &params, Box::new(backend)).unwrap()
}

fn assert_same(what: &str, got: &(Vec<f32>, ParamStore), want: &(Vec<f32>, ParamStore)) {
    for (i, (a, b)) in got.0.iter().zip(&want.0).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs(),
            "{what}: loss of step {i}: {a} vs {b}"
        );
    }
    // Weights: within 1e-5 of each tensor's scale (recomputation sums the weight
    // gradients in a different order, so the last bits may differ).
    for (name, t) in want.1.iter() {
        let g = got.1.get(name).unwrap();
        let scale = max_abs(&t.data);
        for (a, b) in g.data.iter().zip(&t.data) {
            assert!((a - b).abs() <= 1e-5 * scale, "{what}: {name}: {a} vs {b}");
        }
    }
}

#[test]
fn an_op_failing_with_out_of_memory_mid_step_repeats_the_step() {
    let reference = uninterrupted(DeviceKind::Cpu);
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session(DeviceKind::Cpu, &faults);
    // Fail an op in the middle of the fourth step (after some updates may have run).
    let got = run(&mut s, &data(), |i| {
        if i == 3 {
            let now = faults.executes();
            faults.fail_execute.store(now + 40, Ordering::SeqCst);
        }
    });
    assert_eq!(s.fallbacks.len(), 1, "{:?}", s.fallbacks);
    assert_eq!(s.fallbacks[0].step, 4);
    println!("{}", s.fallbacks[0]);
    assert_same("after an injected out-of-memory", &got, &reference);
}

#[test]
fn memory_vanishing_mid_run_moves_to_a_smaller_plan() {
    let reference = uninterrupted(DeviceKind::Cpu);
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session(DeviceKind::Cpu, &faults);
    let whole = s.plan.peak_bytes();
    let got = run(&mut s, &data(), |i| {
        if i == 2 {
            // Another process takes memory: only 60% of what the plan holds is left.
            faults.capacity.store(whole * 6 / 10, Ordering::SeqCst);
        }
    });
    assert_eq!(s.fallbacks.len(), 1, "{:?}", s.fallbacks);
    println!("{}", s.fallbacks[0]);
    assert!(
        s.plan.peak_bytes() <= whole * 6 / 10,
        "the new plan fits the smaller memory"
    );
    assert!(s.strategy.contains("recompute"), "{}", s.strategy);
    assert_same("after memory vanished", &got, &reference);
}

#[test]
fn a_lost_device_with_nowhere_to_go_is_a_clear_error() {
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session(DeviceKind::Cpu, &faults);
    let b = &data()[0];
    s.with_recovery(|t| t.train_step(&b.x, &b.labels)).unwrap();
    faults
        .lose_device_at
        .store(faults.executes() + 5, Ordering::SeqCst);
    // The session was asked for the CPU only, so there is no other device to move to.
    let e = s
        .with_recovery(|t| t.train_step(&b.x, &b.labels))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("device lost") && e.contains("no plan fits"),
        "{e}"
    );
}

/// The same recovery on wgpu, where an adapter is present (lavapipe in CI, where
/// `TENSORFIT_REQUIRE=wgpu` makes its absence a failure).
#[test]
fn wgpu_recovers_from_out_of_memory_mid_step() {
    if !wgpu_present() {
        return;
    }
    let reference = uninterrupted(DeviceKind::Wgpu);
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session(DeviceKind::Wgpu, &faults);
    let got = run(&mut s, &data(), |i| {
        if i == 2 {
            let now = faults.executes();
            faults.fail_execute.store(now + 25, Ordering::SeqCst);
        }
    });
    assert_eq!(s.fallbacks.len(), 1, "{:?}", s.fallbacks);
    println!("{}", s.fallbacks[0]);
    assert_same("wgpu after an injected out-of-memory", &got, &reference);
}

#[test]
fn windows_hit_by_out_of_memory_in_a_later_window_repeat_the_whole_step() {
    let reference = uninterrupted_in(DeviceKind::Cpu, TbpttMode::Windows);
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session_in(DeviceKind::Cpu, &faults, TbpttMode::Windows);
    let per_step = std::sync::atomic::AtomicU64::new(0);
    let got = run(&mut s, &data(), |i| {
        let now = faults.executes();
        if i == 1 {
            // The executions of one step (three windows), counted over the first.
            per_step.store(now, Ordering::SeqCst);
        }
        if i == 3 {
            // Two thirds into the fourth step: its first window has updated the weights.
            let into = per_step.load(Ordering::SeqCst) * 2 / 3;
            faults.fail_execute.store(now + into, Ordering::SeqCst);
        }
    });
    assert_eq!(s.fallbacks.len(), 1, "{:?}", s.fallbacks);
    assert_eq!(s.fallbacks[0].step, 4);
    println!("{}", s.fallbacks[0]);
    assert_same("windows after an injected out-of-memory", &got, &reference);
}

#[test]
fn windows_move_to_a_smaller_plan_when_memory_vanishes() {
    let reference = uninterrupted_in(DeviceKind::Cpu, TbpttMode::Windows);
    let faults = Arc::new(Faults::default());
    let mut s = faulty_session_in(DeviceKind::Cpu, &faults, TbpttMode::Windows);
    let whole = s.plan.peak_bytes();
    let got = run(&mut s, &data(), |i| {
        if i == 2 {
            faults.capacity.store(whole * 8 / 10, Ordering::SeqCst);
        }
    });
    assert_eq!(s.fallbacks.len(), 1, "{:?}", s.fallbacks);
    println!("{}", s.fallbacks[0]);
    assert!(
        s.plan.peak_bytes() <= whole * 8 / 10,
        "the new plan fits the smaller memory"
    );
    assert_same("windows after memory vanished", &got, &reference);
}
