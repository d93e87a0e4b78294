//! Reading a file far larger than the reader's buffers keeps the process's memory
//! bounded: a 1 GiB long CSV is scanned and read for an epoch with the peak RSS under
//! 100 MiB. Slow (a minute or more) and writes 1 GiB to the temporary directory, so it
//! is ignored by default:
//!
//!     cargo test --release -p tensorfit-data --test large_files -- --ignored --nocapture

use std::sync::Arc;

use tensorfit_data::{BatchSettings, Batches, LongCsv, ReadSettings, Source};

mod common;
use common::generate;

const BOUND: u64 = 100 << 20;

#[test]
#[ignore = "writes and reads a 1 GiB file; run with --ignored"]
fn a_one_gib_csv_is_read_for_an_epoch_with_bounded_memory() {
    let Some(before) = generate::peak_rss() else {
        println!("skipped: /proc/self/status has no VmHWM on this system");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.csv");
    let size = generate::long_csv(&path, 1 << 30).unwrap();
    let source = Arc::new(LongCsv::open(&path, &ReadSettings::default()).unwrap());
    let after_scan = generate::peak_rss().unwrap();
    let all: Vec<usize> = (0..source.lengths().len()).collect();
    let settings = BatchSettings {
        batch: 64,
        read_ahead: 4,
        ..BatchSettings::default()
    };
    let mut steps = 0u64;
    for batch in Batches::start(source.clone(), &all, 0, &settings).unwrap() {
        steps += batch.unwrap().lengths.iter().sum::<usize>() as u64;
    }
    let peak = generate::peak_rss().unwrap();
    println!(
        "{size} bytes, {} sequences, {steps} steps: peak RSS {} MiB before, {} MiB after the scan, {} MiB after the epoch",
        all.len(),
        before >> 20,
        after_scan >> 20,
        peak >> 20
    );
    assert_eq!(steps, source.dataset().total_steps);
    assert!(peak < BOUND, "peak RSS {} MiB", peak >> 20);
}
