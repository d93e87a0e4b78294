//! Token input against dense one-hot input on the seed LSTM stack (3 × 250, vocabulary
//! 152), at the level of the stack: the graph is built from the layer
//! (`tensorfit::nn::layers::Recurrent` of an `Lstm`, inference, nothing kept for backward), planned with
//! `tensorfit::plan::MemoryPlan`, bound into the plan's arenas and run on `CpuBackend`.
//!
//! Prints a table: the plan's peak and the input's bytes at B=100, T=2000 (whole
//! sequence), and at B=100, T=200 the median time of one inference (uploading the batch,
//! then running) over interleaved rounds, the two kinds alternating which goes first.
//!
//! `cargo bench --bench tokens [-- ROUNDS]` (default 15 rounds).

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{Context, Result};
use tensorfit::core::{Backend, Executable, Graph, Rng, TensorId, TensorView};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::{CellInput, Lstm, Recurrent};
use tensorfit::plan::{Limits, MemoryPlan, ProgramSpec};

const VOCAB: usize = 152;
const MIB: f64 = 1024.0 * 1024.0;

/// The seed stack on `kind` input, inference, over `steps` steps of `batch` sequences.
struct Stack {
    graph: Graph,
    x: TensorId,
    y: TensorId,
    persistent: Vec<(TensorId, String)>,
}

fn stack(kind: CellInput, batch: usize, steps: usize) -> Result<Stack> {
    let lstm = Recurrent::Lstm(Lstm {
        input: VOCAB,
        hidden: 250,
        layers: 3,
        input_kind: kind,
        bidirectional: false,
    });
    let mut graph = Graph::new();
    let mut persistent = Vec::new();
    let weights = lstm.specs().map(|p| {
        let t = p.leaf(&mut graph);
        persistent.push((t, p.name.clone()));
        t
    });
    let s = lstm.stack(&mut graph, &weights, (batch, steps), (false, false))?;
    // Each layer's carried (h, c), named by its slot (`state.h_l{k}`, `state.c_l{k}`).
    persistent.extend(s.carried.iter().map(|(t, slot)| (*t, slot.name())));
    Ok(Stack {
        graph,
        x: s.x,
        y: s.y,
        persistent,
    })
}

fn plan(s: &Stack) -> Result<MemoryPlan> {
    let spec = ProgramSpec {
        name: "infer".to_string(),
        graph: &s.graph,
        outputs: vec![s.y],
        persistent: s.persistent.clone(),
    };
    let limits = Limits {
        max_buffer_bytes: 1 << 40,
        alignment_bytes: 64,
        overhead_bytes: 0,
    };
    Ok(MemoryPlan::new(&[spec], limits)?)
}

/// The stack bound into its plan's arenas on `be`, with every persistent tensor (weights
/// and state) set to small random values.
fn bind(s: Stack, be: &mut CpuBackend, rng: &mut Rng) -> Result<(Executable, TensorId)> {
    let layout = plan(&s)?.layout();
    let buffers = layout
        .arena_bytes
        .iter()
        .map(|&b| be.allocate(b))
        .collect::<Result<Vec<_>, _>>()?;
    let mut bound = HashMap::new();
    for (t, key) in &s.persistent {
        let (arena, offset) = layout.persistent[key];
        bound.insert(
            *t,
            TensorView::at(buffers[arena], offset, s.graph.shape(*t).clone()),
        );
    }
    let placement = layout.programs.get("infer").context("program in plan")?;
    let values: Vec<(TensorId, usize)> = s
        .persistent
        .iter()
        .map(|(t, _)| (*t, s.graph.shape(*t).numel()))
        .collect();
    let x = s.x;
    let exe = Executable::in_buffers(s.graph, bound, placement, &buffers)?;
    for (t, n) in values {
        let v: Vec<f32> = (0..n).map(|_| rng.uniform_range(-0.06, 0.06)).collect();
        exe.write(be, t, &v)?;
    }
    Ok((exe, x))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let rounds: usize = match std::env::args().nth(1).filter(|a| !a.starts_with('-')) {
        Some(a) => a.parse().context("ROUNDS must be a whole number")?,
        None => 15,
    };
    let kinds = [
        ("dense one-hot", CellInput::Features),
        ("token ids", CellInput::Tokens),
    ];

    println!("plan at B=100, T=2000, whole sequence (inference):");
    println!("{:<14} {:>12} {:>12}", "input", "input", "plan peak");
    for (name, kind) in kinds {
        let s = stack(kind, 100, 2000)?;
        let input = s.graph.shape(s.x).numel() as f64 * 4.0;
        let peak = plan(&s)?.peak_bytes() as f64;
        println!(
            "{name:<14} {:>8.2} MiB {:>8.1} MiB",
            input / MIB,
            peak / MIB
        );
    }

    let (batch, steps) = (100, 200);
    let mut be = CpuBackend::new();
    let mut rng = Rng::new(5);
    let ids: Vec<f32> = (0..batch * steps)
        .map(|_| rng.int_inclusive(0, VOCAB - 1) as f32)
        .collect();
    let mut one_hot = vec![0.0; ids.len() * VOCAB];
    for (row, &id) in one_hot.chunks_exact_mut(VOCAB).zip(&ids) {
        row[id as usize] = 1.0;
    }
    let mut runs = Vec::new();
    for (_, kind) in kinds {
        runs.push(bind(stack(kind, batch, steps)?, &mut be, &mut rng)?);
    }
    let inputs = [&one_hot, &ids];
    let mut times = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let (exe, x) = &runs[k];
            let start = Instant::now();
            exe.write(&mut be, *x, inputs[k])?;
            exe.run(&mut be)?;
            if round > 0 {
                // Round 0 warms up.
                times[k].push(start.elapsed().as_secs_f64());
            }
        }
    }
    let [dense, tokens] = times.map(median);
    println!("\ninference at B={batch}, T={steps}, median of {rounds} interleaved rounds:");
    println!("{:<14} {:>10}", "input", "time");
    println!("{:<14} {:>7.1} ms", kinds[0].0, dense * 1e3);
    println!("{:<14} {:>7.1} ms", kinds[1].0, tokens * 1e3);
    println!(
        "token ids take {:.1}% less time",
        (1.0 - tokens / dense) * 100.0
    );
    Ok(())
}
