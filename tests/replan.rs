//! A session asked for a shape outside its plan's bound plans again once, for the bound
//! that holds both (`job_switch::widen`), records it (`Session::replans`), and goes on
//! with the numbers a session planned for that bound from the start gives; a shape within
//! the bound never replans.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::DeviceKind;
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{BuiltinTask, Job, ParamStore};
use tensorfit::session::{decide, start, Session};

use common::{request, task_model};

fn train(batch: usize, seq_len: usize) -> Job {
    Job::Train {
        batch,
        seq_len,
        eval: None,
    }
}

/// A session on the CPU planned for `bound`, from the same starting weights.
fn session(bound: Job) -> Session {
    let req = request(
        &task_model(16, 1, 8),
        bound,
        usize::MAX,
        DeviceKind::Cpu,
        MemoryCaps::default(),
    );
    let params = ParamStore::init(&req.cfg, 2).unwrap();
    start(&req, &decide(&req).unwrap(), &params).unwrap()
}

/// One training step of `batch` sequences of `steps` on `s`, switched to that shape
/// first; its loss, bit for bit.
fn step(s: &mut Session, (batch, steps): (usize, usize), seed: u64) -> u32 {
    s.switch_job(train(batch, steps)).unwrap();
    let b = BuiltinTask::for_model(&task_model(16, 1, 8), seed)
        .unwrap()
        .batch(batch, steps)
        .unwrap();
    s.with_recovery(|t| t.train_step(&b.x, &b.labels))
        .unwrap()
        .loss
        .to_bits()
}

#[test]
fn a_shape_outside_the_bound_replans_once_and_trains_as_the_wider_plan_does() {
    let shapes = [(3, 5), (6, 9), (2, 4), (6, 9)];
    let mut grown = session(train(4, 6));
    let mut wide = session(train(6, 9));
    for (i, &shape) in shapes.iter().enumerate() {
        let seed = i as u64 + 1;
        assert_eq!(
            step(&mut grown, shape, seed),
            step(&mut wide, shape, seed),
            "step {i} at {shape:?}"
        );
    }
    // Only the first 6 × 9 was outside: one replan, to the bound holding both.
    assert_eq!(grown.replans.len(), 1, "{:?}", grown.replans);
    let r = &grown.replans[0];
    assert_eq!(
        (r.shape, r.from, r.to),
        (train(6, 9), train(4, 6), train(6, 9))
    );
    assert!(r.to_string().contains("outside the bound"), "{r}");
    assert!(wide.replans.is_empty(), "{:?}", wide.replans);
}
