//! `tensorfit generate`: text from a character-level language model, one character at a
//! time through a [`tensorfit::Stream`]: the prime is fed step by step, then each sampled
//! character is printed as soon as it is drawn and fed back as the next step.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tensorfit::data::CharVocab;
use tensorfit::nn::{InputSpec, LossSpec};
use tensorfit::Model;

use super::data_vocab::TextVocab;
use super::{at_least_one, DeviceArgs, Exit};
use tensorfit::core::Rng;

#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    /// A checkpoint of a token-input model with cross-entropy over its vocabulary.
    #[arg(long)]
    checkpoint: PathBuf,
    /// Text the model reads before it writes (with no character vocabulary in the
    /// checkpoint: token ids separated by spaces).
    #[arg(long, default_value = "")]
    prime: String,
    /// Characters (tokens) to generate.
    #[arg(long, default_value_t = 500, value_parser = at_least_one::<usize>)]
    length: usize,
    /// Sampling temperature: below 1 sharper, above 1 flatter; must be above 0.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    temperature: f64,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    dev: DeviceArgs,
}

/// The character vocabulary a checkpoint holds, if any (written by training on a text
/// file, `data_vocab.rs`): the one place generation looks.
fn char_vocabulary(model: &Model) -> Result<Option<CharVocab>> {
    Ok(TextVocab::load(model.metadata())?.map(|v| v.chars))
}

/// How tokens are read from the prime and written out: characters, or ids.
enum Tokens {
    Chars(CharVocab),
    Ids,
}

impl Tokens {
    fn parse(&self, prime: &str, vocab: usize) -> Result<Vec<usize>> {
        match self {
            Tokens::Chars(v) => {
                let mut unknown: Vec<String> = Vec::new();
                for c in prime.chars().filter(|&c| v.id(c) == 0) {
                    let shown = format!("{c:?}");
                    if !unknown.contains(&shown) {
                        unknown.push(shown);
                    }
                }
                if !unknown.is_empty() {
                    errln!(
                        "note: --prime: {} {} not among the characters of the model's training text; read as the unknown character",
                        unknown.join(", "),
                        if unknown.len() == 1 { "is" } else { "are" }
                    );
                }
                Ok(prime.chars().map(|c| v.id(c) as usize).collect())
            }
            Tokens::Ids => prime
                .split_whitespace()
                .map(|w| match w.parse::<usize>() {
                    Ok(id) if id < vocab => Ok(id),
                    _ => bail!(
                        "--prime: `{w}` is not a token id in 0..{vocab} (the checkpoint has no character vocabulary, so the prime is ids separated by spaces)"
                    ),
                })
                .collect(),
        }
    }

    fn show(&self, id: usize) -> String {
        match self {
            Tokens::Chars(v) => v.char(id as u32).map(String::from).unwrap_or_default(),
            Tokens::Ids => format!("{id} "),
        }
    }
}

pub fn run(a: GenerateArgs) -> Result<Exit> {
    if !(a.temperature > 0.0 && a.temperature.is_finite()) {
        bail!(
            "--temperature must be a number above 0, got {}",
            a.temperature
        );
    }
    let model = Model::load(&a.checkpoint)?;
    let d = model.description();
    let vocab = match (d.input, d.loss) {
        (InputSpec::Tokens { vocab, .. }, LossSpec::SoftmaxCrossEntropy { classes })
            if classes == vocab =>
        {
            vocab
        }
        _ => bail!(
            "--checkpoint {}: {d} is not a language model (generate needs token input and cross-entropy over the same vocabulary)",
            a.checkpoint.display()
        ),
    };
    let tokens = match char_vocabulary(&model)
        .with_context(|| format!("--checkpoint {}", a.checkpoint.display()))?
    {
        Some(v) => Tokens::Chars(v),
        None => Tokens::Ids,
    };
    let prime = tokens.parse(&a.prime, vocab)?;
    let mut stream = model.stream(1, &a.dev.policy()?)?;
    let mut rng = Rng::new(a.seed);
    let mut stdout = std::io::stdout().lock();
    // With no prime, the model starts from id 0 (the unknown character).
    let mut probs = Vec::new();
    for &id in prime.iter().chain(prime.is_empty().then_some(&0)) {
        probs = stream.step(&[id as f32])?;
    }
    // Only ids that print are drawn: id 0 of a character vocabulary is the unknown
    // character, and a model's `vocab` may pass its text's characters (ids beyond them
    // are no character), both of which print as nothing.
    let drawn = match &tokens {
        Tokens::Chars(v) => 1..v.len().min(vocab),
        Tokens::Ids => 0..vocab,
    };
    if drawn.is_empty() {
        bail!(
            "--checkpoint {}: its character vocabulary has no character to write",
            a.checkpoint.display()
        );
    }
    for _ in 0..a.length {
        let id = drawn.start
            + sample(
                probs.get(drawn.clone()).unwrap_or_default(),
                a.temperature,
                &mut rng,
            );
        // A closed stdout (`| head`) ends the text, not the run with a panic.
        if write!(stdout, "{}", tokens.show(id))
            .and_then(|_| stdout.flush())
            .is_err()
        {
            break;
        }
        probs = stream.step(&[id as f32])?;
    }
    let _ = writeln!(stdout);
    Ok(Exit::Success)
}

/// Draws an index from the softmax probabilities `probs` sharpened (or flattened) by
/// `temperature`: p_i^(1/T), renormalised, which is softmax(logits / T).
fn sample(probs: &[f32], temperature: f64, rng: &mut Rng) -> usize {
    let logs: Vec<f64> = probs
        .iter()
        .map(|&p| (p as f64).max(f64::MIN_POSITIVE).ln() / temperature)
        .collect();
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = logs.iter().map(|l| (l - top).exp()).collect();
    let mut u = rng.uniform() * weights.iter().sum::<f64>();
    for (i, w) in weights.iter().enumerate() {
        if u < *w {
            return i;
        }
        u -= w;
    }
    weights.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_temperature_draws_the_most_probable_token() {
        let mut rng = Rng::new(3);
        let probs = [0.2, 0.5, 0.3];
        assert!((0..200).all(|_| sample(&probs, 0.01, &mut rng) == 1));
    }

    #[test]
    fn temperature_one_draws_in_proportion_to_the_probabilities() {
        let mut rng = Rng::new(4);
        let probs = [0.1f32, 0.6, 0.3];
        let mut counts = [0usize; 3];
        for _ in 0..20_000 {
            counts[sample(&probs, 1.0, &mut rng)] += 1;
        }
        for (c, p) in counts.iter().zip(probs) {
            assert!(
                (*c as f64 / 20_000.0 - p as f64).abs() < 0.015,
                "{counts:?}"
            );
        }
    }

    #[test]
    fn a_high_temperature_flattens_the_draw() {
        let mut rng = Rng::new(5);
        let probs = [0.05, 0.9, 0.05];
        let ones = (0..10_000)
            .filter(|_| sample(&probs, 100.0, &mut rng) == 1)
            .count();
        assert!(
            ones < 4_000,
            "{ones} of 10000 draws were the most probable token"
        );
    }
}
