//! A backend added to the registry is seen everywhere with no other change: the second
//! CPU backend of `common/second_cpu.rs` (the CPU's kernels under the kind
//! `cpu-reference`), once registered, is listed by discovery, taken by the device flags'
//! parsers and `--assume`, planned and chosen by the decision, and trained on by a
//! session. The conformance suite runs its checks on it too (`conformance.rs` registers
//! it beside the built-in backends).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use tensorfit::assume;
use tensorfit::core::DeviceKind;
use tensorfit::devices::{discover, parse_id, parse_kind, DeviceStatus, MemoryCaps};
use tensorfit::nn::{Job, ParamStore, TemporalOrder};
use tensorfit::registry;
use tensorfit::session::{decide, decide_on, start, Request};

use common::second_cpu::{self, SecondCpu, KIND};
use common::{request, task_model};

/// The devices of the two CPU kinds, as discovery lists them (no GPU is opened or timed).
fn the_two_cpus() -> Vec<DeviceStatus> {
    discover(&MemoryCaps::default())
        .into_iter()
        .filter(|d| d.kind == DeviceKind::Cpu || d.kind == KIND)
        .collect()
}

#[test]
fn discovery_and_the_device_flags_know_the_new_kind() {
    second_cpu::register();
    let found = discover(&MemoryCaps::default());
    // After the built-in kinds, in the registry's order.
    let last = found.last().unwrap();
    assert_eq!(
        (last.id.as_str(), last.kind, last.index),
        ("cpu-reference:0", KIND, 0)
    );
    assert_eq!(last.info.as_ref().unwrap().kind, KIND);
    assert!(found.iter().any(|d| d.id == "cpu"));
    assert_eq!(parse_kind("CPU-Reference").unwrap(), KIND);
    assert_eq!(parse_id("cpu-reference:0"), Some((KIND, 0)));
    let caps = MemoryCaps::parse(&["cpu-reference=1GiB".into()]).unwrap();
    assert_eq!(caps.get(KIND), Some(1 << 30));
    assert!(registry::names().contains(&"cpu-reference"));
    // `--assume` takes it by name, with its provider's figures.
    let assumed = assume::parse(&["cpu-reference=2GiB".into()]).unwrap();
    let info = assumed[0].info.as_ref().unwrap();
    assert_eq!((info.kind, info.total_bytes), (KIND, 2 << 30));
    // A kind is registered once.
    let again = registry::register(&SecondCpu).unwrap_err().to_string();
    assert!(again.contains("already known"), "{again}");
}

#[test]
fn the_planner_plans_on_it_chooses_it_and_a_session_trains_there() {
    second_cpu::register();
    let cfg = task_model(8, 1, 4);
    let job = Job::Train {
        batch: 4,
        seq_len: 8,
        eval: None,
    };
    // Asked for by kind: planned and chosen there.
    let req = request(&cfg, job, 4, KIND, MemoryCaps::default());
    let decision = decide(&req).unwrap();
    let choice = decision.chosen().unwrap();
    assert_eq!(choice.candidate.device, "cpu-reference:0");
    assert_eq!(choice.device.kind, KIND);
    // Automatic: both CPUs are candidates; with the CPU excluded (as after it failed),
    // the new kind is chosen.
    let auto = Request {
        device: None,
        ..req.clone()
    };
    let both = decide_on(&auto, the_two_cpus()).unwrap();
    for id in ["cpu", "cpu-reference:0"] {
        assert!(both.candidates.iter().any(|c| c.device == id), "{id}");
    }
    let without_cpu = Request {
        exclude: vec![DeviceKind::Cpu],
        ..auto
    };
    let other = decide_on(&without_cpu, the_two_cpus()).unwrap();
    assert_eq!(other.chosen().unwrap().candidate.device, "cpu-reference:0");
    // A session opens it through its provider and trains.
    let params = ParamStore::init(&cfg, 1).unwrap();
    let mut session = start(&req, &decision, &params).unwrap();
    assert_eq!(session.device, "cpu-reference:0");
    let b = TemporalOrder::new(1).batch(4, 8).unwrap();
    let loss = session
        .with_recovery(|t| t.train_step(&b.x, &b.labels))
        .unwrap();
    assert!(loss.loss.is_finite(), "{loss:?}");
}
