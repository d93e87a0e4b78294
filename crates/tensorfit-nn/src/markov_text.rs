//! The built-in per-step task: next-symbol prediction on text drawn from a seeded
//! order-k Markov chain, so a language model (token input, a head on every step,
//! cross-entropy over the vocabulary) trains without a download and its quality has a
//! known floor.
//!
//! After each context of the last [`MarkovText::ORDER`] symbols, the next symbol is one
//! of [`MarkovText::SUCCESSORS`] symbols the context picks (a fixed hash of it, the same
//! for every stream), with the probabilities [`MarkovText::WEIGHTS`]. Every context has
//! the same distribution over its successors, so the chain's entropy per symbol is
//! exactly `H(WEIGHTS)` ≈ 1.2955 bits ([`MarkovText::entropy_bits`]), whatever the
//! stationary distribution: the best possible mean cross-entropy is `H · ln 2` ≈ 0.898
//! nats, a perplexity of 2.45, and the best accuracy 0.6 (always the likeliest
//! successor). A model that knows only the symbol frequencies scores about
//! `log2(vocab)` bits. A sequence starts at a uniformly drawn symbol (its first
//! [`MarkovText::ORDER`] − 1 predictions have less context).
//!
//! `x` `[T, B]` holds symbols `s_0 .. s_{T-1}`, the labels `[T, B]` the next symbols
//! `s_1 .. s_T`.

use tensorfit_core::{Error, HostTensor, Result, Rng};

use crate::description::{HeadOn, InputSpec, LossSpec, ModelDescription};
use crate::task::Batch;

/// The next-symbol task for one vocabulary. Deterministic given its seed.
#[derive(Debug, Clone)]
pub struct MarkovText {
    rng: Rng,
    vocab: usize,
}

impl MarkovText {
    /// Symbols of context that decide the next one.
    pub const ORDER: usize = 1;
    /// Successors each context allows.
    pub const SUCCESSORS: usize = 3;
    /// Their probabilities, likeliest first.
    pub const WEIGHTS: [f64; 3] = [0.6, 0.3, 0.1];

    /// The task for `model`, which must read token ids, have a head on every step and
    /// cross-entropy over as many classes as the vocabulary; the error says what differs.
    pub fn for_model(model: &ModelDescription, seed: u64) -> Result<Self> {
        match (model.input, model.head.on, model.loss) {
            (
                InputSpec::Tokens { vocab, .. },
                HeadOn::EveryStep,
                LossSpec::SoftmaxCrossEntropy { classes },
            ) if classes == vocab && vocab > Self::SUCCESSORS => Ok(MarkovText {
                rng: Rng::new(seed),
                vocab,
            }),
            _ => Err(Error::input(format!(
                "{}; the model is {model}",
                Self::needs()
            ))),
        }
    }

    /// What a model needs for this task, as the errors say it.
    pub fn needs() -> String {
        format!(
            "the built-in next-symbol task needs token input of a vocabulary over {}, a head on every step and cross-entropy over as many classes as the vocabulary",
            Self::SUCCESSORS
        )
    }

    /// The chain's entropy per symbol in bits: the floor of a model's cross-entropy.
    pub fn entropy_bits() -> f64 {
        -Self::WEIGHTS.iter().map(|p| p * p.log2()).sum::<f64>()
    }

    /// The generator's state, to resume the same stream later.
    pub fn rng_state(&self) -> u64 {
        self.rng.state()
    }

    /// Successor `j` of the context `ctx` (its last `ORDER` symbols): a fixed hash, the
    /// same chain for every stream and seed.
    fn successor(&self, ctx: &[usize], j: usize) -> usize {
        let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ self.vocab as u64;
        for &s in ctx {
            h = (h ^ s as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 31;
        }
        // Distinct successors: `first`, then steps of `d` ≤ vocab / SUCCESSORS apart.
        let first = (h % self.vocab as u64) as usize;
        let d = 1 + ((h >> 32) % (self.vocab / Self::SUCCESSORS) as u64) as usize;
        (first + j * d) % self.vocab
    }

    /// The next symbol after `ctx`.
    fn next(&mut self, ctx: &[usize]) -> usize {
        let u = self.rng.uniform();
        let mut acc = 0.0;
        for (j, w) in Self::WEIGHTS.iter().enumerate() {
            acc += w;
            if u < acc {
                return self.successor(ctx, j);
            }
        }
        self.successor(ctx, Self::SUCCESSORS - 1)
    }

    /// A minibatch of `batch` sequences of `steps` symbols: `x` `[steps, batch]` ids,
    /// labels `[steps, batch]` the symbol after each.
    pub fn batch(&mut self, batch: usize, steps: usize) -> Result<Batch> {
        if steps == 0 || batch == 0 {
            return Err(Error::input(format!(
                "the next-symbol task needs at least one sequence of one step, got {batch} of {steps}"
            )));
        }
        let n = steps
            .checked_mul(batch)
            .ok_or_else(|| Error::input(format!("{batch} × {steps} symbols is too many")))?;
        let (mut x, mut labels) = (vec![0.0; n], vec![0.0; n]);
        for b in 0..batch {
            let mut text = vec![self.rng.int_inclusive(0, self.vocab - 1)];
            for _ in 0..steps {
                let from = text.len().saturating_sub(Self::ORDER);
                let ctx = text[from..].to_vec();
                let s = self.next(&ctx);
                text.push(s);
            }
            for t in 0..steps {
                x[t * batch + b] = text[t] as f32;
                labels[t * batch + b] = text[t + 1] as f32;
            }
        }
        Ok(Batch::new(HostTensor::new([steps, batch], x)?, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::description::Cell;

    pub(crate) fn language_model(vocab: usize) -> ModelDescription {
        let mut d = ModelDescription::seed();
        d.input = InputSpec::Tokens {
            vocab,
            embedding: None,
        };
        d.recurrent_mut().unwrap().cell = Cell::Lstm;
        d.head.on = HeadOn::EveryStep;
        d.head.layers.clear();
        d.loss = LossSpec::SoftmaxCrossEntropy { classes: vocab };
        d
    }

    #[test]
    fn the_text_follows_the_chain_and_its_entropy_is_that_of_the_weights() {
        let mut task = MarkovText::for_model(&language_model(20), 3).unwrap();
        let b = task.batch(4, 2000).unwrap();
        assert_eq!(b.x.shape.dims(), &[2000, 4]);
        // Empirical conditional entropy of next given current, in bits.
        let mut counts = vec![[0usize; 20]; 20];
        for (&s, &n) in b.x.data.iter().zip(&b.labels) {
            counts[s as usize][n as usize] += 1;
        }
        let total: usize = counts.iter().flatten().sum();
        let mut h = 0.0;
        for row in &counts {
            let r: usize = row.iter().sum();
            for &c in row.iter().filter(|&&c| c > 0) {
                let p = c as f64 / r as f64;
                h -= (r as f64 / total as f64) * p * p.log2();
            }
            assert!(row.iter().filter(|&&c| c > 0).count() <= MarkovText::SUCCESSORS);
        }
        let want = MarkovText::entropy_bits();
        assert!((want - 1.2955).abs() < 1e-3, "{want}");
        assert!(
            (h - want).abs() < 0.05,
            "measured {h:.4} bits, chain {want:.4}"
        );
        // The labels are the next step's input.
        assert_eq!(b.labels[0], b.x.data[4]);
    }

    #[test]
    fn other_models_are_refused_naming_what_the_task_needs() {
        let mut d = language_model(20);
        d.loss = LossSpec::SoftmaxCrossEntropy { classes: 19 };
        let e = MarkovText::for_model(&d, 0).unwrap_err().to_string();
        assert!(e.contains("as many classes as the vocabulary"), "{e}");
    }
}
