//! Train the seed network on the built-in task through the library API, in a few lines.
//!
//! `cargo run --release --example train_seed`

use anyhow::Result;
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::{
    ModelDescription, OptimConfig, ParamStore, TemporalOrder, TrainOptions, Trainer,
};

fn main() -> Result<()> {
    let cfg = ModelDescription::seed();
    let params = ParamStore::init(&cfg, 1)?;
    let opts = TrainOptions {
        tbptt: 30,
        chunk: 30,
        optim: OptimConfig::adam(2e-3),
        ..TrainOptions::default()
    };
    let mut trainer = Trainer::new(Box::new(CpuBackend::new()), cfg, &params, opts)?;
    let mut data = TemporalOrder::new(1);
    let held_out = TemporalOrder::new(2).batch(128, 30)?;
    for step in 1..=60 {
        let batch = data.batch(32, 30)?;
        let r = trainer.train_step(&batch.x, &batch.labels)?;
        if step % 20 == 0 {
            let e = trainer.evaluate(&held_out.x, &held_out.labels)?;
            println!(
                "step {step}: loss {:.4}, held-out accuracy {:.1}%",
                r.loss,
                100.0 * e.accuracy.unwrap_or(f32::NAN)
            );
        }
    }
    Ok(())
}
