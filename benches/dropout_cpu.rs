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

use std::time::Instant;

use anyhow::{bail, Context, Result};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    DropoutRate, ModelDescription, ParamStore, TemporalOrder, TrainOptions, Trainer,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let (mut rounds, mut shape, mut p) = (15, "32:50".to_string(), 0.2f32);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().context("--rounds needs a count")?.parse()?,
            "--shape" => shape = args.next().context("--shape needs batch:steps")?,
            "--p" => p = args.next().context("--p needs a probability")?.parse()?,
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => bail!("unknown argument `{other}`"),
        }
    }
    let sizes: Vec<usize> = shape
        .split(':')
        .map(|v| {
            v.parse()
                .with_context(|| format!("--shape `{shape}`: `{v}`"))
        })
        .collect::<Result<_>>()?;
    let [batch, steps] = sizes[..] else {
        bail!("--shape `{shape}`: expected batch:steps");
    };
    let plain = ModelDescription::seed();
    let mut dropped = plain.clone();
    dropped.recurrent.dropout = DropoutRate::new(p).map_err(|e| anyhow::anyhow!("--p {e}"))?;
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
