//! Train the seed network on sequences held in a `Vec`, on whichever device it fits
//! (CUDA capped at the seed user's 336 MB), then evaluate and save it.
//!
//! `cargo run --release --example embed_in_app`

use tensorfit::{Control, DeviceKind, DevicePolicy, Job, Model, Sequences};

fn main() -> Result<(), tensorfit::Error> {
    // 60 sequences of 30 steps of 152 features. Sequence i of class i % 6 has its class's
    // feature on at every step, and one other feature on, a different one at each step.
    let (steps, features) = (30, 152);
    let labels: Vec<f32> = (0..60).map(|i| (i % 6) as f32).collect();
    let inputs = (0..60)
        .map(|i| {
            let mut x = vec![0.0; steps * features];
            for t in 0..steps {
                x[t * features + i % 6] = 1.0;
                x[t * features + 6 + (7 * i + 3 * t) % 146] = 1.0;
            }
            x
        })
        .collect();
    let data = Sequences::new(inputs, labels, features)?;

    let devices = DevicePolicy::auto().cap(DeviceKind::Cuda, 336 << 20);
    let job = Job::Train {
        batch: 12,
        seq_len: steps,
        eval: Some((60, steps)),
    };
    let mut run = Model::seed().open(job, &devices)?;
    println!("training on {} ({})", run.device(), run.strategy());
    run.fit(data.batches(12, 40, 1), |s| {
        println!("step {:3}  loss {:.4}", s.step, s.loss);
        if s.loss < 0.01 {
            Control::Stop
        } else {
            Control::Continue
        }
    })?;
    let all = data.all()?;
    let report = run.evaluate(&all.x, &all.labels)?;
    println!("loss {:.4}, accuracy {:?}", report.loss, report.accuracy);
    run.save(std::path::Path::new("embedded.safetensors"))
}
