//! The benchmark matrix, tensorfit's side: the seed network (152 one-hot features in,
//! 3 LSTM layers, last step, BatchNorm → Dense 100 → BatchNorm → 6 classes) at a given
//! hidden size, trained or run at a given batch and length on the CPU, with the
//! planner's estimate beside the measured time.
//!
//! `benches/compare/matrix.py` drives it together with PyTorch, cell by cell, so that the
//! systems take turns on a shared machine. It speaks JSON lines: each line on stdin is a
//! cell, `{"mode": "train"|"infer", "batch": B, "seq_len": T, "tbptt": L, "hidden": H,
//! "min_runs": n, "min_seconds": s}`, and each line on stdout the answer,
//! `{"ms": median, "runs": n, "estimated_ms": planner's estimate, "strategy": ...,
//! "gflops": model GFLOP/s}` or `{"error": ...}`. Run by hand:
//! `echo '{"mode":"train","batch":32,"seq_len":200,"tbptt":200,"hidden":250}' |
//! cargo bench --bench matrix`.
//!
//! Model FLOPs are `Job::model_flops`, the one formula (Σ over layers 2·4·H·(I+H)·B·T; a
//! training step counts the truncated-BPTT window three times (forward, two backward
//! GEMMs) and the steps before it once).

use std::io::{BufRead, Write};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tensorfit::nn::{Job, ModelDescription, OptimConfig, ParamStore, SeedShape, TemporalOrder};
use tensorfit::session::{decide, start, Choice};
use tensorfit::DevicePolicy;

/// One cell of the matrix.
struct Cell {
    train: bool,
    batch: usize,
    seq_len: usize,
    tbptt: usize,
    hidden: usize,
    min_runs: usize,
    min_seconds: f64,
}

impl Cell {
    fn parse(line: &str) -> Result<Cell> {
        let v: Value = serde_json::from_str(line).context("a cell is one JSON object per line")?;
        let int = |key: &str| -> Result<usize> {
            v[key]
                .as_u64()
                .map(|n| n as usize)
                .with_context(|| format!("cell `{line}`: `{key}` must be a whole number"))
        };
        let train = match v["mode"].as_str() {
            Some("train") => true,
            Some("infer") => false,
            _ => bail!("cell `{line}`: `mode` must be \"train\" or \"infer\""),
        };
        let seq_len = int("seq_len")?;
        Ok(Cell {
            train,
            batch: int("batch")?,
            seq_len,
            tbptt: v["tbptt"].as_u64().map_or(seq_len, |n| n as usize),
            hidden: int("hidden")?,
            min_runs: v["min_runs"].as_u64().map_or(3, |n| n as usize).max(1),
            min_seconds: v["min_seconds"].as_f64().unwrap_or(1.0),
        })
    }

    fn model(&self) -> ModelDescription {
        SeedShape {
            hidden: self.hidden,
            ..SeedShape::SEED
        }
        .description()
    }

    fn job(&self) -> Job {
        if self.train {
            Job::Train {
                batch: self.batch,
                seq_len: self.seq_len,
                eval: None,
            }
        } else {
            Job::Eval {
                batch: self.batch,
                seq_len: self.seq_len,
            }
        }
    }

    fn flops(&self) -> f64 {
        self.job().model_flops(&self.model(), self.tbptt)
    }
}

/// Plans the cell on the CPU, runs it once to warm up, then times runs until both
/// `min_runs` runs and `min_seconds` have passed; the median of the timed runs.
fn run(cell: &Cell) -> Result<Value> {
    let cfg = cell.model();
    let job = cell.job();
    let req =
        DevicePolicy::only_cpu().request(cfg.clone(), job, (cell.tbptt, OptimConfig::default()));
    let decision = decide(&req)?;
    let Some(Choice { candidate, .. }) = decision.chosen() else {
        return Err(decision.nothing_fits().into());
    };
    let (estimated_ms, strategy) = (
        candidate.estimated_seconds * 1e3,
        candidate.strategy.clone(),
    );
    let mut session = start(&req, &decision, &ParamStore::init(&cfg, 1)?)?;
    let data = TemporalOrder::new(5).batch(cell.batch, cell.seq_len)?;
    let mut once = || -> Result<()> {
        if cell.train {
            session.trainer.train_step(&data.x, &data.labels)?;
        } else {
            session.trainer.evaluate(&data.x, &data.labels)?;
        }
        Ok(())
    };
    once()?;
    let started = Instant::now();
    let mut ms = Vec::new();
    while ms.len() < cell.min_runs || started.elapsed().as_secs_f64() < cell.min_seconds {
        let t = Instant::now();
        once()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let median = ms[ms.len() / 2];
    Ok(json!({
        "ms": median,
        "runs": ms.len(),
        "estimated_ms": estimated_ms,
        "strategy": strategy,
        "gflops": cell.flops() / median / 1e6,
    }))
}

fn main() -> Result<()> {
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = Cell::parse(&line)
            .and_then(|cell| run(&cell))
            .unwrap_or_else(|e| json!({ "error": format!("{e:#}") }));
        let mut out = stdout.lock();
        writeln!(out, "{answer}")?;
        out.flush()?;
    }
    Ok(())
}
