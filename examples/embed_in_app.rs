//! Train the seed network on sequences held in a `Vec`, on whichever device it fits
//! (CUDA capped at the seed user's 336 MB), then evaluate and save it.
//!
//! `cargo run --release --example embed_in_app`

use tensorfit::core::DeviceKind;
use tensorfit::nn::Job;
use tensorfit::{Control, DevicePolicy, Model, Sequences};

fn main() -> Result<(), tensorfit::Error> {
    // 60 sequences of 30 one-hot steps; the class (0..6) is the feature hot at step 0.
    let (steps, features) = (30, 152);
    let labels: Vec<f32> = (0..60).map(|i| (i % 6) as f32).collect();
    let inputs = labels
        .iter()
        .map(|&class| {
            (0..steps * features)
                .map(|k| f32::from(k == class as usize))
                .collect()
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
