//! What per-sequence lengths cost a 3-layer LSTM stack (input 152, the seed's) in
//! training on the CPU backend: the forward that keeps what backward needs, the read of
//! the last step, and the backward of `sum(last · R)` to every weight, as one program,
//! in three variants built side by side and timed in turns (so the machine's drift hits
//! all three alike):
//! - `none`: no lengths (the op without its optional input);
//! - `full`: lengths given, every one `T` (the masking checks run, nothing is masked);
//! - `ragged`: lengths drawn uniformly from `10..=T`, each row's own last step read.
//!
//! Prints one JSON line per variant: `{"variant", "batch", "steps", "hidden", "ms"}`,
//! `ms` the median of `--rounds` turns after two warm-ups.
//!
//!   cargo bench --bench masking_cpu -- --rounds 15 --shape 32:100:250

mod common;

use std::time::Instant;

use anyhow::{bail, Result};
use common::flags::{median, sizes, Flags};
use common::programs::{compile_with_random_inputs, weight_inputs};
use tensorfit::core::args::SliceTimeInputs;
use tensorfit::core::{backward, Backend, Executable, Graph, Op, Rng};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::{CellInput, Lstm, Recurrent, RecurrentWeights, StatePart};

const INPUT: usize = 152;
const LAYERS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    None,
    Full,
    Ragged,
}

/// The training program of one variant, its inputs written.
fn program(
    v: Variant,
    batch: usize,
    steps: usize,
    hidden: usize,
) -> Result<(Executable, CpuBackend)> {
    let lstm = Lstm {
        input: INPUT,
        hidden,
        layers: LAYERS,
        input_kind: CellInput::Features,
        bidirectional: false,
    };
    let mut g = Graph::new();
    let (weights, mut leaves) = weight_inputs(&mut g, &lstm.specs());
    let padded = v != Variant::None;
    let weights = RecurrentWeights::Lstm(weights);
    let stack = Recurrent::Lstm(lstm).stack(&mut g, &weights, (batch, steps), (true, padded))?;
    let wrt = leaves.clone();
    leaves.push(stack.x);
    leaves.extend(stack.initial(StatePart::H));
    leaves.extend(stack.initial(StatePart::C));
    let inputs = SliceTimeInputs {
        x: stack.y,
        lengths: stack.lengths,
    };
    let last = g.apply("last", Op::SliceTime { t: steps - 1 }, inputs)?.out;
    let upstream = g.input("upstream", lstm.state_shape(batch));
    leaves.push(upstream);
    backward(&mut g, &[(last, upstream)], &wrt)?;
    let mut rng = Rng::new(7);
    let (exe, mut be) = compile_with_random_inputs(g, &leaves, &mut rng)?;
    if let Some(t) = stack.lengths {
        let lengths: Vec<f32> = (0..batch)
            .map(|_| match v {
                Variant::Ragged => rng
                    .uniform_range(10.0, steps as f32 + 1.0)
                    .floor()
                    .min(steps as f32),
                _ => steps as f32,
            })
            .collect();
        exe.write(&mut be, t, &lengths)?;
    }
    Ok((exe, be))
}

fn main() -> Result<()> {
    let flags = Flags::parse(&[("--rounds", "a count"), ("--shape", "batch:steps:hidden")])?;
    let rounds: usize = flags.get("--rounds", 15)?;
    let shape: String = flags.get("--shape", "32:100:250".into())?;
    let [batch, steps, hidden] = sizes("--shape", &shape, "batch:steps:hidden")?;
    if steps < 10 {
        bail!("--shape `{shape}`: the ragged variant draws lengths from 10..=T, so T must be at least 10");
    }
    let variants = [Variant::None, Variant::Full, Variant::Ragged];
    let mut programs = variants
        .iter()
        .map(|&v| program(v, batch, steps, hidden))
        .collect::<Result<Vec<_>>>()?;
    let mut ms = vec![Vec::new(); variants.len()];
    for round in 0..rounds + 2 {
        for ((exe, be), times) in programs.iter_mut().zip(&mut ms) {
            let t0 = Instant::now();
            exe.run(be)?;
            be.synchronize()?;
            if round >= 2 {
                times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    for (v, times) in variants.iter().zip(ms) {
        let median = median(times);
        println!(
            "{{\"variant\": \"{}\", \"batch\": {batch}, \"steps\": {steps}, \"hidden\": {hidden}, \"ms\": {median:.3}}}",
            format!("{v:?}").to_lowercase()
        );
    }
    Ok(())
}
