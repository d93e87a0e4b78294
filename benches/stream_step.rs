//! Streaming latency: the seed network, batch 1, one step per call on the CPU, through
//! the front door's `Stream` (PyTorch's counterpart is `benches/compare/torch_stream.py`;
//! `benches/compare/stream.sh` runs both in turns and prints the ratio).
//!
//!   cargo bench --bench stream_step -- [STEPS] [REPEATS] [--cell lstm|gru]
//!       [--hidden H] [--batch B]
//!
//! Prints one JSON line: the median over REPEATS of the mean microseconds per step over
//! STEPS steps, after a warm-up, in wall-clock time and in this process's CPU time (what
//! a busy machine disturbs less: it counts only the time the process ran), and `bits`, a
//! hash of the bits of every output of the run (two builds that compute the same numbers
//! print the same hash). `--cell`, `--hidden` and `--batch` change the seed network's
//! recurrent cell, its layers' width and the number of streams (defaults: LSTM, 250, 1).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use tensorfit::nn::{Cell, ModelDescription};
use tensorfit::{DevicePolicy, Model};

fn main() -> Result<()> {
    let (mut numbers, mut cell, mut hidden, mut batch) = (Vec::new(), Cell::Lstm, 250, 1);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} takes a value"));
        match a.as_str() {
            "--cell" => {
                cell = match value("--cell")?.as_str() {
                    "lstm" => Cell::Lstm,
                    "gru" => Cell::Gru,
                    other => bail!("--cell is lstm or gru, not {other}"),
                }
            }
            "--hidden" => hidden = value("--hidden")?.parse().context("--hidden")?,
            "--batch" => batch = value("--batch")?.parse().context("--batch")?,
            // cargo bench passes --bench.
            _ if a.starts_with("--") => {}
            _ => numbers.push(a.parse().context("STEPS and REPEATS are whole numbers")?),
        }
    }
    let steps = numbers.first().copied().unwrap_or(2000);
    let repeats = numbers.get(1).copied().unwrap_or(5);
    let mut description = ModelDescription::seed();
    if let Some(stack) = description.recurrent_mut() {
        (stack.cell, stack.hidden) = (cell, hidden);
    }
    let model = Model::new(description, 1)?;
    let mut stream = model.stream(batch, &DevicePolicy::only_cpu())?;
    // A one-hot character per step and stream, as the seed task feeds (stream r at
    // character k + r).
    let features = 152;
    let inputs: Vec<Vec<f32>> = (0..features)
        .map(|k| {
            let hot = |r: usize, i: usize| f32::from(u8::from(i == (k + r) % features));
            (0..batch * features)
                .map(|e| hot(e / features, e % features))
                .collect()
        })
        .collect();
    let mut bits = Fnv::default();
    for x in inputs.iter().take(200) {
        bits.add(&stream.step(x)?);
    }
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        let (t, c) = (Instant::now(), cpu_seconds()?);
        for s in 0..steps {
            let out = stream.step(&inputs[s % inputs.len()])?;
            bits.add(&out);
        }
        wall.push(t.elapsed().as_secs_f64() * 1e6 / steps as f64);
        cpu.push((cpu_seconds()? - c) * 1e6 / steps as f64);
    }
    println!(
        "{{\"system\": \"tensorfit\", \"us_per_step\": {:.2}, \"cpu_us_per_step\": {:.2}, \"bits\": \"{:016x}\"}}",
        median(wall),
        median(cpu),
        bits.0
    );
    Ok(())
}

/// FNV-1a over the bits of every value added: equal for equal outputs, bit for bit
/// (hashing costs a few nanoseconds a step, inside the timing for both builds alike).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, values: &[f32]) {
        for v in values {
            for b in v.to_bits().to_le_bytes() {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
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
