//! The readers' speed on generated files: the scan (first pass: every value parsed and
//! checked, offsets indexed) and one shuffled epoch of batches through the background
//! reader, in MB/s of file, for a long CSV and a safetensors file, and the process's peak
//! RSS. The files (about 200 MB each; `TENSORFIT_DATA_BENCH_MB` to change) are written to
//! a temporary directory and removed.
//!
//!     cargo bench -p tensorfit-data --bench read_speed
//!     TENSORFIT_DATA_BENCH_MB=1024 cargo bench -p tensorfit-data --bench read_speed -- csv

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use tensorfit_data::{
    BatchInputs, BatchSettings, Batches, LongCsv, ReadSettings, Source, TensorData,
};

#[path = "../tests/common/generate.rs"]
mod generate;

fn main() -> Result<()> {
    let mb: u64 = std::env::var("TENSORFIT_DATA_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let only = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let dir = tempfile::tempdir()?;
    let settings = ReadSettings {
        classes: Some(6),
        ..ReadSettings::default()
    };
    if only.as_deref().is_none_or(|o| o == "csv") {
        let path = dir.path().join("long.csv");
        let size = generate::long_csv(&path, mb << 20)?;
        let t = Instant::now();
        let source = LongCsv::open(&path, &settings)?;
        report("csv", "scan", size, t.elapsed().as_secs_f64());
        epoch("csv", Arc::new(source), size)?;
        std::fs::remove_file(&path)?;
    }
    if only.as_deref().is_none_or(|o| o == "safetensors") {
        let path = dir.path().join("data.safetensors");
        let size = generate::safetensors(&path, mb << 20)?;
        let t = Instant::now();
        let source = TensorData::open(&path, &settings)?;
        report("safetensors", "scan", size, t.elapsed().as_secs_f64());
        epoch("safetensors", Arc::new(source), size)?;
    }
    Ok(())
}

fn epoch(name: &str, source: Arc<dyn Source>, size: u64) -> Result<()> {
    let all: Vec<usize> = (0..source.lengths().len()).collect();
    let settings = BatchSettings {
        batch: 32,
        read_ahead: 4,
        ..BatchSettings::default()
    };
    let t = Instant::now();
    let mut steps = 0;
    let batches = Batches::start(source, &all, 0, &settings)?;
    let buffers = batches.buffers();
    for batch in batches {
        let batch = batch?;
        steps += batch.lengths.iter().sum::<usize>();
        // As a trainer does when its step is done with the batch.
        if let BatchInputs::Dense(x) = batch.inputs {
            buffers.give_back(x.data);
        }
    }
    report(name, "epoch", size, t.elapsed().as_secs_f64());
    println!("{name}: {steps} steps read");
    Ok(())
}

fn report(name: &str, what: &str, size: u64, seconds: f64) {
    let rss = generate::peak_rss().map_or("?".into(), |b| format!("{} MiB", b >> 20));
    println!(
        "{name} {what}: {:.0} MB in {seconds:.2} s = {:.1} MB/s (peak RSS so far {rss})",
        size as f64 / 1e6,
        size as f64 / 1e6 / seconds
    );
}
