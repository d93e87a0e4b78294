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

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use tensorfit::core::args::SliceTimeInputs;
use tensorfit::core::{backward, Executable, Graph, Op, Rng, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::layers::{CellInput, Gru};

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
    };
    let mut g = Graph::new();
    let weights: Vec<_> = (gru.specs().iter())
        .map(|spec| spec.map(|s| g.input(&s.name, s.shape.clone())))
        .collect();
    let stack = gru.stack(&mut g, &weights, w.batch, w.steps, w.train)?;
    let mut leaves: Vec<TensorId> = weights
        .iter()
        .flat_map(|k| [k.w_ih, k.w_hh, k.b_ih, k.b_hh])
        .collect();
    let wrt = leaves.clone();
    leaves.push(stack.x);
    leaves.extend(&stack.h0);
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
    let shapes: Vec<usize> = leaves.iter().map(|&t| g.shape(t).numel()).collect();
    let mut be = CpuBackend::new();
    let exe = Executable::new(g, &mut be, HashMap::new())?;
    let mut rng = Rng::new(7);
    for (&t, &n) in leaves.iter().zip(&shapes) {
        let values: Vec<f32> = (0..n).map(|_| rng.uniform_range(-0.06, 0.06)).collect();
        exe.write(&mut be, t, &values)?;
    }
    for _ in 0..2 {
        exe.run(&mut be)?;
    }
    let mut ms: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let t0 = Instant::now();
            exe.run(&mut be).map(|()| t0.elapsed().as_secs_f64() * 1e3)
        })
        .collect::<tensorfit::core::Result<_>>()?;
    exe.release(&mut be)?;
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

fn main() -> Result<()> {
    let mut iters = 5;
    let mut workloads = "train:32:50:250,infer:100:200:250".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iters" => iters = args.next().context("--iters needs a count")?.parse()?,
            "--workloads" => workloads = args.next().context("--workloads needs a list")?,
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => bail!("unknown argument `{other}`"),
        }
    }
    for spec in workloads.split(',') {
        let w = Workload::parse(spec)?;
        let ms = time(&w, iters)?;
        let gru = Gru {
            input: INPUT,
            hidden: w.hidden,
            layers: LAYERS,
            input_kind: CellInput::Features,
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
