//! A 3-layer GRU stack (input 152, PyTorch's `nn.GRU(152, H, 3)`) on the CPU backend, for
//! `benches/compare/gru.sh`, which runs it in turns with PyTorch's `torch_gru.py`.
//!
//! Workloads, each `kind:batch:steps:hidden` (default `train:32:50:250,infer:100:200:250`):
//! - `train`: the forward that keeps what backward needs, and the backward of
//!   `sum(y[T-1] · R)` to every weight (not to x; no optimizer step), as one program;
//! - `infer`: the forward that keeps nothing.
//!
//! Prints one JSON line per workload: `{"system", "workload", "batch", "steps", "hidden",
//! "ms", "gflops"}`, `ms` the median of `--iters` timed runs after two warm-ups, `gflops`
//! from [`Gru::forward_flops`] (training counted as 3× the forward).
//!
//!   cargo bench --bench gru_cpu -- --iters 5 --workloads train:32:50:250,infer:100:200:250

mod common;

use std::time::Instant;

use anyhow::{bail, Context, Result};
use common::flags::{median, Flags};
use common::programs::{compile_with_random_inputs, weight_inputs};
use tensorfit::core::args::SliceTimeInputs;
use tensorfit::core::{backward, Graph, Op, Rng};
use tensorfit::nn::layers::{CellInput, Gru, Recurrent, RecurrentWeights, StatePart};

const INPUT: usize = 152;
const LAYERS: usize = 3;

struct Workload {
    train: bool,
    batch: usize,
    steps: usize,
    hidden: usize,
}

impl Workload {
    fn parse(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let [kind, batch, steps, hidden] = parts[..] else {
            bail!("workload `{s}`: expected kind:batch:steps:hidden");
        };
        let number = |v: &str, what: &str| -> Result<usize> {
            v.parse()
                .with_context(|| format!("workload `{s}`: {what} `{v}`"))
        };
        let train = match kind {
            "train" => true,
            "infer" => false,
            other => bail!("workload `{s}`: kind `{other}` is neither train nor infer"),
        };
        Ok(Workload {
            train,
            batch: number(batch, "batch")?,
            steps: number(steps, "steps")?,
            hidden: number(hidden, "hidden")?,
        })
    }
}

/// Median milliseconds of `iters` runs of the workload's program, after two warm-ups.
fn time(w: &Workload, iters: usize) -> Result<f64> {
    let gru = Gru {
        input: INPUT,
        hidden: w.hidden,
        layers: LAYERS,
        input_kind: CellInput::Features,
        bidirectional: false,
    };
    let mut g = Graph::new();
    let (weights, mut leaves) = weight_inputs(&mut g, &gru.specs());
    let weights = RecurrentWeights::Gru(weights);
    let dims = (w.batch, w.steps);
    let stack = Recurrent::Gru(gru).stack(&mut g, &weights, dims, (w.train, false))?;
    let wrt = leaves.clone();
    leaves.push(stack.x);
    leaves.extend(stack.initial(StatePart::H));
    if w.train {
        let op = Op::SliceTime { t: w.steps - 1 };
        let last = g
            .apply(
                "last",
                op,
                SliceTimeInputs {
                    x: stack.y,
                    lengths: None,
                },
            )?
            .out;
        let upstream = g.input("upstream", gru.state_shape(w.batch));
        leaves.push(upstream);
        backward(&mut g, &[(last, upstream)], &wrt)?;
    }
    let (exe, mut be) = compile_with_random_inputs(g, &leaves, &mut Rng::new(7))?;
    for _ in 0..2 {
        exe.run(&mut be)?;
    }
    let ms: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let t0 = Instant::now();
            exe.run(&mut be).map(|()| t0.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<tensorfit::core::Result<_>>()?;
    exe.release(&mut be)?;
    Ok(median(ms))
}

fn main() -> Result<()> {
    let flags = Flags::parse(&[("--iters", "a count"), ("--workloads", "a list")])?;
    let iters: usize = flags.get("--iters", 5)?;
    let workloads: String = flags.get("--workloads", "train:32:50:250,infer:100:200:250".into())?;
    for spec in workloads.split(',') {
        let w = Workload::parse(spec)?;
        let ms = time(&w, iters)?;
        let gru = Gru {
            input: INPUT,
            hidden: w.hidden,
            layers: LAYERS,
            input_kind: CellInput::Features,
            bidirectional: false,
        };
        let passes = if w.train { 3.0 } else { 1.0 };
        let gflops = passes * gru.forward_flops(w.batch, w.steps) / ms / 1e6;
        println!(
            "{{\"system\": \"tensorfit\", \"workload\": \"{}\", \"batch\": {}, \"steps\": {}, \"hidden\": {}, \"ms\": {ms:.3}, \"gflops\": {gflops:.2}}}",
            if w.train { "train" } else { "infer" },
            w.batch,
            w.steps,
            w.hidden
        );
    }
    Ok(())
}
