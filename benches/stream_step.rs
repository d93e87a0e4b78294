//! Streaming latency: the seed network, batch 1, one step per call on the CPU, through
//! the front door's `Stream` (PyTorch's counterpart is `benches/compare/torch_stream.py`;
//! `benches/compare/stream.sh` runs both in turns and prints the ratio).
//!
//!   cargo bench --bench stream_step -- [STEPS] [REPEATS]
//!
//! Prints one JSON line: the median over REPEATS of the mean microseconds per step over
//! STEPS steps, after a warm-up.

use std::time::Instant;

use anyhow::{Context, Result};
use tensorfit::{DevicePolicy, Model};

fn main() -> Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse().context("STEPS and REPEATS are whole numbers"))
        .collect::<Result<_>>()?;
    let steps = args.first().copied().unwrap_or(2000);
    let repeats = args.get(1).copied().unwrap_or(5);
    let mut stream = Model::seed().stream(1, &DevicePolicy::only_cpu())?;
    // A one-hot character per step, as the seed task feeds.
    let inputs: Vec<Vec<f32>> = (0..152)
        .map(|k| (0..152).map(|i| f32::from(u8::from(i == k))).collect())
        .collect();
    for x in inputs.iter().take(200) {
        stream.step(x)?;
    }
    let mut means = Vec::new();
    for _ in 0..repeats {
        let t = Instant::now();
        for s in 0..steps {
            stream.step(&inputs[s % inputs.len()])?;
        }
        means.push(t.elapsed().as_secs_f64() * 1e6 / steps as f64);
    }
    means.sort_by(f64::total_cmp);
    println!(
        "{{\"system\": \"tensorfit\", \"us_per_step\": {:.2}}}",
        means[means.len() / 2]
    );
    Ok(())
}
