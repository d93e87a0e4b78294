//! What dropout costs the seed network's training step on the CPU backend: two trainers
//! built side by side from the same parameters, one without dropout and one with
//! `recurrent.dropout = p` (between the 3 LSTM layers), each running one training step
//! (forward, backward, Adam, loss read back) on the same batch in turns, each first in
//! every other turn, so the machine's drift hits both alike.
//!
//! Prints one JSON line per variant, `{"p", "batch", "steps", "ms"}` (`ms` the median of
//! `--rounds` turns after two warm-ups), then `{"ratio"}`: the median of the per-turn
//! ratios dropout / none.
//!
//!   cargo bench --bench dropout_cpu -- --rounds 15 --shape 32:50 --p 0.2

mod common;

use std::time::Instant;

use anyhow::Result;
use common::flags::{median, sizes, Flags};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    DropoutRate, ModelDescription, ParamStore, TemporalOrder, TrainOptions, Trainer,
};

fn main() -> Result<()> {
    let flags = Flags::parse(&[
        ("--rounds", "a count"),
        ("--shape", "batch:steps"),
        ("--p", "a probability"),
    ])?;
    let rounds: usize = flags.get("--rounds", 15)?;
    let p: f32 = flags.get("--p", 0.2)?;
    let shape: String = flags.get("--shape", "32:50".into())?;
    let [batch, steps] = sizes("--shape", &shape, "batch:steps")?;
    let plain = ModelDescription::seed();
    let mut dropped = plain.clone();
    let rate = DropoutRate::new(p).map_err(|e| anyhow::anyhow!("--p {e}"))?;
    if let Some(stack) = dropped.recurrent_mut() {
        stack.dropout = rate;
    }
    let params = ParamStore::init(&plain, 1)?;
    let opts = TrainOptions {
        tbptt: steps,
        chunk: steps,
        seed: 1,
        ..TrainOptions::default()
    };
    let mut trainers = [plain, dropped]
        .into_iter()
        .map(|d| Trainer::new(Box::new(CpuBackend::new()), d, &params, opts.clone()))
        .collect::<tensorfit::core::Result<Vec<_>>>()?;
    let data = TemporalOrder::new(3).batch(batch, steps)?;
    let mut ms = [Vec::new(), Vec::new()];
    for round in 0..rounds + 2 {
        // Each variant goes first in every other round.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for v in order {
            let t0 = Instant::now();
            trainers[v].train_step(&data.x, &data.labels)?;
            if round >= 2 {
                ms[v].push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let ratios: Vec<f64> = ms[1].iter().zip(&ms[0]).map(|(d, n)| d / n).collect();
    for (label, times) in [(0.0, &ms[0]), (p, &ms[1])] {
        let m = median(times.clone());
        println!("{{\"p\": {label}, \"batch\": {batch}, \"steps\": {steps}, \"ms\": {m:.3}}}");
    }
    println!("{{\"ratio\": {:.4}}}", median(ratios));
    Ok(())
}
