//! Train a character-level language model on a text file held in memory, then generate
//! text from it with the streaming API: the library's way of doing what
//! `tensorfit train --data book.txt` and `tensorfit generate` do on the command line. The
//! model is saved with its vocabulary as `char_lm.safetensors`, which `tensorfit generate
//! --checkpoint char_lm.safetensors --prime "the "` continues too.
//!
//! `cargo run --release --example char_lm [-- book.txt]` (default: `examples/data/corpus.txt`)

use std::path::PathBuf;

use tensorfit::core::Rng;
use tensorfit::data::{CharVocab, TextVocab};
use tensorfit::{
    Control, DevicePolicy, Job, Model, ModelDescription, OptimConfig, Sequences, Training,
};

/// Characters per training window.
const WINDOW: usize = 32;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/data/corpus.txt"),
        PathBuf::from,
    );
    let text = std::fs::read_to_string(&path)?;
    // The vocabulary: the text's distinct characters (id 0 stands for any other).
    let vocab = CharVocab::new(text.chars().collect());
    let id = |c: char| vocab.id(c) as f32;
    let ids: Vec<f32> = text.chars().map(id).collect();

    // Windows of the text; the label of each step is the next character.
    let (inputs, labels): (Vec<Vec<f32>>, Vec<Vec<f32>>) = (0..(ids.len() - 1) / WINDOW)
        .map(|w| {
            let at = w * WINDOW;
            (
                ids[at..at + WINDOW].to_vec(),
                ids[at + 1..at + WINDOW + 1].to_vec(),
            )
        })
        .unzip();
    let data = Sequences::with_step_labels(inputs, labels, 1)?;
    println!(
        "{}: {} characters, {} distinct, {} windows of {WINDOW}",
        path.display(),
        ids.len(),
        vocab.len() - 1,
        data.len()
    );

    let description = ModelDescription::lstm_language_model(vocab.len(), 64, 1);
    let training = Training {
        tbptt: Some(WINDOW),
        optim: OptimConfig::adam(0.02),
        ..Training::default()
    };
    let model = Model::new(description, 1)?.with_training(training);
    let batch = 4.min(data.len());
    let job = Job::Train {
        batch,
        seq_len: WINDOW,
        eval: None,
    };
    let mut run = model.open(job, &DevicePolicy::auto())?;
    println!("training on {} ({})", run.device(), run.strategy());
    run.fit(data.batches(batch, 60, 1), |s| {
        if s.step % 20 == 0 {
            println!(
                "step {:4}  loss {:.4}  ({:.2} bits per character)",
                s.step,
                s.loss,
                s.loss / std::f32::consts::LN_2
            );
        }
        Control::Continue
    })?;

    // The trained model with its vocabulary, for `tensorfit generate`.
    let mut trained = run.model()?;
    let text_vocab = TextVocab {
        chars: vocab.clone(),
        labels: None,
    };
    text_vocab.store(trained.metadata_mut());
    trained.save(std::path::Path::new("char_lm.safetensors"))?;
    println!("saved char_lm.safetensors");

    // Generation: one stream, fed the prime, then each sampled character in turn.
    let mut stream = trained.stream(1, &DevicePolicy::auto())?;
    let mut rng = Rng::new(1);
    let prime = "the ";
    let mut probs = Vec::new();
    for c in prime.chars() {
        probs = stream.step(&[id(c)])?;
    }
    let mut out = String::from(prime);
    for _ in 0..120 {
        let next = sample(&probs, 0.5, &mut rng);
        out.extend(vocab.char(next as u32));
        probs = stream.step(&[next as f32])?;
    }
    println!("{out}");
    Ok(())
}

/// A draw from `probs` sharpened by `temperature` (below 1: likelier characters more often).
fn sample(probs: &[f32], temperature: f32, rng: &mut Rng) -> usize {
    let weights: Vec<f64> = probs
        .iter()
        .map(|&p| f64::from(p.max(1e-12)).powf(1.0 / f64::from(temperature)))
        .collect();
    let mut left = rng.uniform() * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        left -= w;
        if left <= 0.0 {
            return i;
        }
    }
    weights.len() - 1
}
