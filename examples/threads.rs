//! A runner trained on a worker thread while the main thread waits for its reports, then
//! a stream served from another thread: the front door's `Runner` and `Stream` are `Send`,
//! so they move into threads, a server's state or `spawn_blocking`.
//!
//! `cargo run --release --example threads`

use std::sync::mpsc;
use std::thread;

use tensorfit::{Control, DevicePolicy, Job, Model, Sequences};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 24 sequences of 8 steps of 152 features; a sequence's class is the feature on at
    // its first step.
    let labels: Vec<f32> = (0..24).map(|i| (i % 6) as f32).collect();
    let inputs = labels
        .iter()
        .map(|&c| (0..8 * 152).map(|k| f32::from(k == c as usize)).collect())
        .collect();
    let data = Sequences::new(inputs, labels, 152)?;
    let job = Job::Train {
        batch: 8,
        seq_len: 8,
        eval: None,
    };
    let devices = DevicePolicy::auto();
    let mut run = Model::seed().open(job, &devices)?;

    // Train on a worker; its losses come back over a channel as they happen.
    let (losses, seen) = mpsc::channel();
    let trainer = thread::spawn(move || -> tensorfit::Result<_> {
        run.fit(data.batches(8, 40, 1), |s| {
            losses.send((s.step, s.loss)).ok();
            Control::Continue
        })?;
        run.model()
    });
    for (step, loss) in seen {
        if step % 20 == 0 {
            println!("step {step:3}  loss {loss:.4}");
        }
    }
    let model = trainer
        .join()
        .map_err(|_| "the training thread panicked")??;

    // Serve one feed from another thread: the stream keeps its state between requests.
    let mut stream = model.stream(1, &devices)?;
    let (requests, inbox) = mpsc::channel::<Vec<f32>>();
    let (replies, answers) = mpsc::channel();
    let server = thread::spawn(move || {
        for x in inbox {
            replies.send(stream.step(&x)).ok();
        }
    });
    // A sequence of class 3, one step per request: feature 3 on, then 7 steps of nothing.
    for t in 0..8 {
        let x: Vec<f32> = (0..152).map(|k| f32::from(t == 0 && k == 3)).collect();
        requests.send(x)?;
        let probs = answers.recv()??;
        println!("step {t}: class {}", tensorfit::nn::argmax(&probs));
    }
    drop(requests);
    server.join().map_err(|_| "the serving thread panicked")?;
    Ok(())
}
