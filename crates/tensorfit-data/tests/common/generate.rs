//! Large generated data files for the speed bench and the memory check: written a row at
// Each user (the bench, the memory check) uses part of this module.
#![allow(dead_code)]
//! a time (nothing of the file is held in memory), from a fixed seed.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use tensorfit_core::Rng;

/// Steps per sequence and features per step of the generated files.
pub const STEPS: usize = 100;
pub const FEATURES: usize = 16;

/// Writes a long CSV (`sequence,step,f1..f16,label`, a label per step) of about `bytes`
/// bytes; returns its size.
pub fn long_csv(path: &Path, bytes: u64) -> std::io::Result<u64> {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut rng = Rng::new(1);
    let mut written = 0u64;
    let mut line = String::with_capacity(256);
    let mut sequence = 0;
    while written < bytes {
        for step in 0..STEPS {
            line.clear();
            line.push_str(&format!("s{sequence},{step}"));
            for _ in 0..FEATURES {
                line.push_str(&format!(",{:.5}", rng.normal()));
            }
            line.push_str(&format!(",{}\n", rng.int_inclusive(0, 5)));
            out.write_all(line.as_bytes())?;
            written += line.len() as u64;
        }
        sequence += 1;
    }
    out.flush()?;
    Ok(written)
}

/// Writes a safetensors file of `input` [N, 100, 16] F32 and `labels` [N] I64 of about
/// `bytes` bytes; returns its size.
pub fn safetensors(path: &Path, bytes: u64) -> std::io::Result<u64> {
    let row = (STEPS * FEATURES * 4) as u64;
    let n = (bytes / (row + 8)).max(1);
    let input_bytes = n * row;
    let header = format!(
        r#"{{"input":{{"dtype":"F32","shape":[{n},{STEPS},{FEATURES}],"data_offsets":[0,{input_bytes}]}},"labels":{{"dtype":"I64","shape":[{n}],"data_offsets":[{input_bytes},{}]}}}}"#,
        input_bytes + n * 8
    );
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    out.write_all(&(header.len() as u64).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    let mut rng = Rng::new(2);
    for _ in 0..n * (STEPS * FEATURES) as u64 {
        out.write_all(&rng.normal().to_le_bytes())?;
    }
    for _ in 0..n {
        out.write_all(&(rng.int_inclusive(0, 5) as i64).to_le_bytes())?;
    }
    out.flush()?;
    Ok(8 + header.len() as u64 + input_bytes + n * 8)
}

/// The process's peak resident memory (VmHWM) in bytes, where /proc says.
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
