//! The seed case end to end. The Deeplearning4j user evaluated the seed network on 100
//! sequences of length 2000 on a GeForce GTX 750 and crashed: the report shows 2 GB in
//! total, 1.67 GB in use and 336 MB free. tensorfit, given those figures as caps on the
//! CPU backend (which enforces a cap like a small GPU's memory), plans before it runs:
//! - under 1.67 GiB the whole sequence fits (liveness lets the three layers share
//!   memory), and the measured peak stays under the cap;
//! - under the 336 MB that were really free, the whole sequence does not fit, so the
//!   run is split, in time chunks carrying (h, c) or in micro-batches (whichever is
//!   estimated faster); it stays under the cap, and its outputs equal the whole run's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::core::DeviceKind;
use tensorfit::devices::MemoryCaps;
use tensorfit::nn::{Job, ModelDescription, ParamStore, TemporalOrder};
use tensorfit::plan::parse_size;
use tensorfit::session::{decide, start};

use common::request;

fn run(cap: &str) -> (String, u64, u64, Vec<f32>, f32) {
    let cfg = ModelDescription::seed();
    let job = Job::Eval {
        batch: 100,
        seq_len: 2000,
    };
    let caps = MemoryCaps::parse(&[format!("cpu={cap}")]).unwrap();
    let req = request(&cfg, job, 50, DeviceKind::Cpu, caps);
    let decision = decide(&req).unwrap();
    print!("cap {cap}:\n{}", decision.table());
    let params = ParamStore::init(&cfg, 7).unwrap();
    let mut s = start(&req, &decision, &params).unwrap();
    let data = TemporalOrder::new(11).batch(100, 2000).unwrap();
    let r = s.trainer.evaluate(&data.x, &data.labels).unwrap();
    let (est, got) = (s.plan.peak_bytes(), s.measured_peak_bytes());
    println!(
        "  estimated peak {est} bytes, measured peak {got} bytes, loss {}",
        r.loss
    );
    (s.strategy.clone(), est, got, r.probs.data, r.loss)
}

#[test]
fn seed_evaluation_fits_under_the_gtx_750_figures() {
    let (whole_strategy, _, whole_peak, whole_probs, whole_loss) = run("1.67GiB");
    assert_eq!(whole_strategy, "whole sequence");
    assert!(whole_peak <= parse_size("1.67GiB").unwrap());

    let (strategy, est, peak, probs, loss) = run("336MB");
    assert!(
        strategy.contains("streamed") || strategy.contains("micro-batches"),
        "{strategy}"
    );
    assert!(peak <= 336_000_000, "measured peak {peak} exceeds the cap");
    assert!(est >= peak);
    let worst = probs
        .iter()
        .zip(&whole_probs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("  {strategy} vs whole: largest probability difference {worst:e}");
    assert!(
        worst <= 1e-5,
        "{strategy}: outputs differ from the whole run by {worst}"
    );
    assert!((loss - whole_loss).abs() <= 1e-5 * whole_loss.abs());
}
