//! `train --data` over a file of many lengths runs on one plan (issue 30): the run is
//! planned once, for the bound every batch is within (`--batch` × the data's longest
//! sequence, and the validation batches' largest shape), whatever the batch order; each
//! batch runs on its own extent in the bound's arenas, and the measured peak (the run's
//! high-water mark, so at every step) is at or under the plan. `eval --data` plans once
//! too and scores every sequence, the last partial batch included. On the CPU and on
//! wgpu (lavapipe in CI).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use common::{ok_json, scratch, wgpu_present};
use serde_json::Value;

/// Distinct lengths in the file: 3..=50 steps.
const LENGTHS: usize = 48;
const LONGEST: usize = 2 + LENGTHS;

/// A long CSV of `LENGTHS` sequences of 3 to 50 steps (one of each length, in a shuffled
/// file order), 3 features, the class (0..3) on each sequence's last row: the sign of the
/// mean of its first feature and whether its length is even.
fn ragged_file(dir: &Path) -> PathBuf {
    let mut text = String::from("sequence,step,f1,f2,f3,label\n");
    for s in 0..LENGTHS {
        let len = 3 + (s * 17) % LENGTHS;
        let sign = if s % 3 == 0 { -1.0 } else { 1.0 };
        let class = usize::from(sign > 0.0) + usize::from(len.is_multiple_of(2) && sign > 0.0);
        for t in 0..len {
            let x = (s * 31 + t * 7) % 13;
            let f1 = sign * (0.2 + x as f32 / 20.0);
            let label = if t + 1 == len {
                class.to_string()
            } else {
                String::new()
            };
            writeln!(
                text,
                "s{s},{t},{f1},{},{},{label}",
                (x % 5) as f32 / 5.0,
                (len % 2) as f32
            )
            .unwrap();
        }
    }
    let path = dir.join("ragged.csv");
    std::fs::write(&path, text).unwrap();
    path
}

/// An LSTM of 8 and a linear output on the last real step, 3 classes.
fn model_file(dir: &Path) -> PathBuf {
    let path = dir.join("model.toml");
    let toml = "[input]\nkind = \"dense\"\nfeatures = 3\n\n[recurrent]\ncell = \"lstm\"\nhidden = 8\nlayers = 1\n\n[head]\non = \"last\"\n\n[loss]\nkind = \"cross_entropy\"\nclasses = 3\n";
    std::fs::write(&path, toml).unwrap();
    path
}

/// Requires a run's JSON to say it was planned once, for `bound`, and that its measured
/// peak is at or under the plan's estimate.
fn planned_once(what: &str, out: &Value, bound: &str) {
    assert_eq!(out["plans"], 1, "{what}: {out}");
    assert_eq!(out["replans"], serde_json::json!([]), "{what}: {out}");
    assert_eq!(out["bound"], bound, "{what}: {out}");
    let est = out["estimated_peak_bytes"].as_u64().unwrap();
    let got = out["measured_peak_bytes"].as_u64().unwrap();
    assert!(
        got <= est,
        "{what}: measured {got} bytes, planned {est}: {out}"
    );
}

fn trains_on_one_plan(device: &str) {
    let dir = scratch(&format!("bounded_data_runs_{device}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (data, model) = (ragged_file(&dir), model_file(&dir));
    let shown = |p: &Path| p.to_str().unwrap().to_string();
    for order in ["shuffled", "length-grouped"] {
        let ck = dir.join(format!("ck-{order}"));
        let (d, m, c) = (shown(&data), shown(&model), shown(&ck));
        let out = ok_json(&[
            "train",
            "--model",
            &m,
            "--data",
            &d,
            "--batch-order",
            order,
            "--batch",
            "5",
            "--epochs",
            "2",
            "--val-fraction",
            "0.25",
            "--lr",
            "0.02",
            "--device",
            device,
            "--checkpoint-dir",
            &c,
            "--json",
        ]);
        // 36 sequences train (7 full batches and one of 1), 12 validate (2 and one of 2):
        // every batch within 5 × 50 steps.
        let what = format!("train --data on {device}, {order}");
        assert_eq!(out["steps"], 16, "{what}: {out}");
        let bound = format!(
            "training batch ≤ 5 × {LONGEST} steps, evaluation batch ≤ 5 × {} steps",
            out["bound"]
                .as_str()
                .and_then(|b| b.rsplit(" × ").next())
                .and_then(|t| t.strip_suffix(" steps"))
                .unwrap()
        );
        planned_once(&what, &out, &bound);
        let eval = ok_json(&[
            "eval",
            "--checkpoint",
            &c,
            "--data",
            &d,
            "--batch",
            "5",
            "--device",
            device,
            "--json",
        ]);
        let what = format!("eval --data on {device}");
        assert_eq!(eval["sequences"], LENGTHS, "{what}: {eval}");
        planned_once(
            &what,
            &eval,
            &format!("evaluation batch ≤ 5 × {LONGEST} steps"),
        );
    }
}

#[test]
fn a_ragged_file_trains_and_evaluates_on_one_plan_on_the_cpu() {
    trains_on_one_plan("cpu");
}

#[test]
fn a_ragged_file_trains_and_evaluates_on_one_plan_on_wgpu() {
    if !wgpu_present() {
        return;
    }
    trains_on_one_plan("wgpu");
}
