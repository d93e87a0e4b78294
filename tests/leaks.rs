//! No leaks: 2,000 training steps (with an evaluation every 100) leave the backend's
//! allocated bytes exactly where they were after the first steps, and the process's
//! resident memory does not grow. Prints the figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::DeviceKind;
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{Job, ParamStore, TemporalOrder};
use tensorfit::session::{decide, start};

use common::{request, task_model};

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

#[test]
fn two_thousand_steps_do_not_grow_memory() {
    let cfg = task_model(16, 2, 8);
    let job = Job::Train {
        batch: 8,
        seq_len: 10,
        eval: Some((8, 10)),
    };
    let req = request(&cfg, job, 5, DeviceKind::Cpu, MemoryCaps::default());
    let mut s = start(
        &req,
        &decide(&req).unwrap(),
        &ParamStore::init(&cfg, 1).unwrap(),
    )
    .unwrap();
    let mut data = TemporalOrder::new(1);
    let batches: Vec<_> = (0..10).map(|_| data.batch(8, 10).unwrap()).collect();
    let (mut allocated_early, mut rss_early) = (0, 0);
    for step in 1..=2000 {
        let b = &batches[step % batches.len()];
        s.with_recovery(|t| t.train_step(&b.x, &b.labels)).unwrap();
        if step % 100 == 0 {
            s.with_recovery(|t| t.evaluate(&b.x, &b.labels)).unwrap();
        }
        if step == 200 {
            allocated_early = s.trainer.memory().allocated;
            rss_early = rss_bytes();
        }
    }
    let allocated = s.trainer.memory().allocated;
    let rss = rss_bytes();
    println!(
        "backend allocated: {allocated_early} bytes at step 200, {allocated} at step 2000; \
         resident: {rss_early} bytes at step 200, {rss} at step 2000 ({:+} bytes)",
        rss as i64 - rss_early as i64
    );
    assert_eq!(allocated, allocated_early);
    assert_eq!(
        allocated,
        s.plan.peak_bytes(),
        "the arenas are all the backend holds"
    );
    assert!(
        rss <= rss_early + (4 << 20),
        "resident memory grew from {rss_early} to {rss}"
    );
}
