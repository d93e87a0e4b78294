//! `predict` holds one host copy of its input: it reads the file a sequence step at a
//! time into the time-major tensor the model runs on, instead of reading the whole file,
//! decoding it, and transposing it (three copies at its peak).

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use tensorfit::core::HostTensor;
use tensorfit::nn::ParamStore;

use common::{scratch, small_checkpoint, tensorfit_command};

/// The peak resident memory (VmHWM) of `predict` on `input`, sampled until it exits.
fn predict_peak_bytes(ck: &Path, input: &Path, out: &Path) -> u64 {
    let mut child = tensorfit_command()
        .args(["predict", "--device", "cpu", "--device-memory", "cpu=20MB"])
        .arg("--checkpoint")
        .arg(ck)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(out)
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if let Ok(text) = std::fs::read_to_string(&status) {
            let kib = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak = peak.max(kib.unwrap_or(0) * 1024);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(child.wait().unwrap().success());
    peak
}

fn input_file(dir: &Path, name: &str, batch: usize, steps: usize) -> std::path::PathBuf {
    let mut x = HostTensor::zeros([batch, steps, 152]);
    for (i, v) in x.data.iter_mut().enumerate() {
        *v = if i % 152 == (i / 152) % 5 { 1.0 } else { 0.0 };
    }
    let mut store = ParamStore::new();
    store.insert("input", x);
    let path = dir.join(name);
    std::fs::write(&path, store.to_safetensors("", HashMap::new()).unwrap()).unwrap();
    path
}

#[test]
fn predict_holds_one_host_copy_of_its_input() {
    let dir = scratch("host-copies");
    let ck = dir.join("model.safetensors");
    small_checkpoint().save(&ck).unwrap();
    let out = dir.join("probs.safetensors");
    let tiny = input_file(&dir, "tiny.safetensors", 2, 10);
    // 200 sequences of 800 steps: 97 MB of input.
    let (batch, steps) = (200, 800);
    let large = input_file(&dir, "large.safetensors", batch, steps);
    let input_bytes = (batch * steps * 152 * 4) as u64;
    let baseline = predict_peak_bytes(&ck, &tiny, &out);
    let peak = predict_peak_bytes(&ck, &large, &out);
    std::fs::remove_file(&large).unwrap();
    let extra = peak.saturating_sub(baseline) as f64 / input_bytes as f64;
    println!(
        "peak {} MB, baseline {} MB: {extra:.2} input copies beyond the baseline",
        peak / 1_000_000,
        baseline / 1_000_000
    );
    // One copy, plus the streamed plan's 20 MB at most and the allocator's slack.
    assert!(extra < 1.4, "{extra:.2} copies of the input on the host");
}
