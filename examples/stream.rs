//! Stateful inference over a stream: two sensor feeds of the seed network's 152 features,
//! one step per call, the LSTM state kept on the device between calls; feed 1 restarts
//! half-way. Takes a checkpoint (`tensorfit train --save seed.safetensors`), else the
//! seed network's untrained weights.
//!
//! `cargo run --release --example stream [-- seed.safetensors]`

use std::path::PathBuf;

use tensorfit::nn::argmax;
use tensorfit::{DevicePolicy, Model};

fn main() -> Result<(), tensorfit::Error> {
    let model = match std::env::args().nth(1) {
        Some(path) => Model::load(&PathBuf::from(path))?,
        None => Model::seed(),
    };
    let width = model.description().input_features();
    let mut stream = model.stream(2, &DevicePolicy::auto())?;
    println!("{}", stream.plan().table());
    for t in 0..20 {
        if t == 10 {
            stream.reset_sequence(1)?; // feed 1 starts a new sequence; feed 0 goes on
        }
        // Feed 0 is hot at feature t, feed 1 at feature 2t (both in 0..width).
        let mut x = vec![0.0; 2 * width];
        x[t % width] = 1.0;
        x[width + (2 * t) % width] = 1.0;
        let probs = stream.step(&x)?;
        let classes = probs.len() / 2;
        let (a, b) = (&probs[..classes], &probs[classes..]);
        println!(
            "step {t:2}: feed 0 → class {}, feed 1 → class {}",
            argmax(a),
            argmax(b)
        );
    }
    Ok(())
}
