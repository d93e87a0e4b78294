//! The seed case: the Deeplearning4j user's evaluation of 100 sequences of length 2000
//! crashed a GeForce GTX 750 (2 GB, of which 1.67 GB in use and 336 MB free). Here the
//! CPU backend is capped to those figures, as a stand-in for that card: tensorfit plans
//! before it runs, prints why it chose what it chose, and stays under the cap.
//!
//! `cargo run --release --example seed_case`

use anyhow::{bail, Result};
use tensorfit::core::DeviceKind;
use tensorfit::nn::{Job, ModelDescription, OptimConfig, ParamStore, TemporalOrder};
use tensorfit::plan::{format_bytes, parse_size};
use tensorfit::session::{decide, start};
use tensorfit::DevicePolicy;

fn main() -> Result<()> {
    let cfg = ModelDescription::seed();
    let params = ParamStore::init(&cfg, 1)?;
    let data = TemporalOrder::new(3).batch(100, 2000)?;
    for cap in ["1.67GiB", "336MB"] {
        let job = Job::Eval {
            batch: 100,
            seq_len: 2000,
        };
        let cpu = DevicePolicy::only_cpu().cap(DeviceKind::Cpu, parse_size(cap)?);
        let req = cpu.request(cfg.clone(), job, (50, OptimConfig::default()));
        println!("== evaluation of 100 × 2000 under a {cap} cap");
        let decision = decide(&req)?;
        print!("{}", decision.table());
        if decision.chosen.is_none() {
            bail!("nothing fits under {cap}");
        }
        let mut session = start(&req, &decision, &params)?;
        let report = session.trainer.evaluate(&data.x, &data.labels)?;
        println!(
            "ran: loss {:.4}; estimated peak {}, measured peak {}\n",
            report.loss,
            format_bytes(session.plan.peak_bytes()),
            format_bytes(session.measured_peak_bytes())
        );
    }
    Ok(())
}
