//! Streaming latency: the seed network, batch 1, one step per call on the CPU, through
//! the front door's `Stream` (PyTorch's counterpart is `benches/compare/torch_stream.py`;
//! `benches/compare/stream.sh` runs both in turns and prints the ratio).
//!
//!   cargo bench --bench stream_step -- [STEPS] [REPEATS]
//!
//! Prints one JSON line: the median over REPEATS of the mean microseconds per step over
//! STEPS steps, after a warm-up, in wall-clock time and in this process's CPU time (what
//! a busy machine disturbs less: it counts only the time the process ran).

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
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let (t, c) = (Instant::now(), cpu_seconds()?);
        for s in 0..steps {
            stream.step(&inputs[s % inputs.len()])?;
        }
        wall.push(t.elapsed().as_secs_f64() * 1e6 / steps as f64);
        cpu.push((cpu_seconds()? - c) * 1e6 / steps as f64);
    }
    println!(
        "{{\"system\": \"tensorfit\", \"us_per_step\": {:.2}, \"cpu_us_per_step\": {:.2}}}",
        median(wall),
        median(cpu)
    );
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// This process's user and system CPU time (Linux: `/proc/self/stat`, in the kernel's
/// clock ticks of 1/100 s).
fn cpu_seconds() -> Result<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").context("/proc/self/stat")?;
    // The fields after the command name (which may hold spaces) close with `)`.
    let rest = stat.rsplit_once(')').context("/proc/self/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |i: usize| -> Result<f64> { Ok(fields.get(i).context("/proc/self/stat")?.parse::<f64>()?) };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the `)`.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}
