//! The plan's host section against the process's measured peak resident memory (VmHWM,
//! which `train --json` reports) when training from a long CSV at large shapes on the
//! CPU (issue 17: within 10%). Batches of 256 sequences of 100 steps × 152 features
//! (15 MiB each) and an LSTM of 32 or 256 units (arenas of 40 and 300 MiB): the shapes
//! at which the plan was off both ways before (a replan for the epoch's last, smaller
//! batch predicted from the process's memory with the run's own memory in it, or from
//! that batch's smaller arena; the reader's second copy of every batch; a packed copy
//! of a whole sequence of activations in each weight-gradient product).
//!
//! Read-ahead 0, so that the batches that coexist do not depend on how fast the reader
//! is against the step: the one in use and the one being read.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;

use common::{arg, scratch, succeed, tensorfit_command};

const STEPS: usize = 100;
const FEATURES: usize = 152;
const CLASSES: usize = 6;
const BATCH: usize = 256;

/// Writes a long CSV (`sequence,step,f0..,label`, the label on each sequence's last
/// step) of `sequences` sequences of random values.
fn long_csv(path: &Path, sequences: usize) {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let mut rng = tensorfit::core::Rng::new(7);
    let mut line = String::from("sequence,step");
    for f in 0..FEATURES {
        write!(line, ",f{f}").unwrap();
    }
    line.push_str(",label\n");
    out.write_all(line.as_bytes()).unwrap();
    for s in 0..sequences {
        for t in 0..STEPS {
            line.clear();
            write!(line, "s{s},{t}").unwrap();
            for _ in 0..FEATURES {
                write!(line, ",{:.5}", rng.normal()).unwrap();
            }
            match t + 1 == STEPS {
                true => writeln!(line, ",{}", s % CLASSES).unwrap(),
                false => line.push_str(",\n"),
            }
            out.write_all(line.as_bytes()).unwrap();
        }
    }
    out.flush().unwrap();
}

/// (planned, measured) peak resident bytes of one epoch of an LSTM of `hidden` units.
fn planned_and_measured(dir: &Path, csv: &Path, hidden: usize) -> (u64, u64) {
    let model = dir.join(format!("lstm{hidden}.toml"));
    std::fs::write(
        &model,
        format!(
            "[input]\nkind = \"dense\"\nfeatures = {FEATURES}\n\n[recurrent]\ncell = \"lstm\"\nhidden = {hidden}\nlayers = 1\n\n[head]\non = \"last\"\nlayers = []\n\n[loss]\nkind = \"cross_entropy\"\nclasses = {CLASSES}\n"
        ),
    )
    .unwrap();
    let batch = BATCH.to_string();
    let args = [
        "train",
        "--model",
        arg(&model),
        "--data",
        arg(csv),
        "--epochs",
        "1",
        "--val-fraction",
        "0",
        "--batch",
        &batch,
        "--read-ahead",
        "0",
        "--device",
        "cpu",
        "--json",
    ];
    let out = succeed(tensorfit_command().args(args), &format!("{args:?}"));
    // One JSON line per epoch, then the run's.
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {text}"));
    let get = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    (get("planned_resident_bytes"), get("peak_resident_bytes"))
}

#[test]
fn the_plan_predicts_the_peak_resident_memory_of_training_from_a_long_csv_at_large_shapes() {
    let dir = scratch("large_shape_rss");
    let csv = dir.join("data.csv");
    // Two whole batches and a smaller last one, which the run replans for.
    long_csv(&csv, 2 * BATCH + 88);
    let mut off = Vec::new();
    for hidden in [32, 256] {
        let (planned, measured) = planned_and_measured(&dir, &csv, hidden);
        let ratio = measured as f64 / planned as f64;
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        eprintln!(
            "LSTM {hidden}, batch {BATCH}: planned {:.1} MiB, measured {:.1} MiB, measured / planned {ratio:.3}",
            mib(planned),
            mib(measured)
        );
        if !(0.9..=1.1).contains(&ratio) {
            off.push(format!("LSTM {hidden}: {ratio:.3}"));
        }
    }
    assert!(
        off.is_empty(),
        "measured / planned RSS off by more than 10%: {off:?}"
    );
}
