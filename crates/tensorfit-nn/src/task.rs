//! The built-in task: a 6-class temporal-order problem, so training needs no download.
//!
//! After Hochreiter & Schmidhuber (1997), experiment 6a. Each sequence is a run of random
//! distractor symbols in which two marker symbols are planted: a first marker from
//! {A, B, C} somewhere in the first window (10–20% of the length) and a second from
//! {X, Y} in a later window (50–60%). The class is the pair, 3 × 2 = 6 classes, so the
//! network must remember which marker came early while reading everything after it.
//! Symbols are one-hot over 152 features, the seed network's input width: 0–2 are the
//! first markers, 3–4 the second markers, 5–151 the distractors. A model on token input
//! with a vocabulary of 152 gets the same symbols as ids ([`TemporalOrder::batch_for`]).
//!
//! With truncated BPTT, only the last `L` steps receive a gradient: to learn this task,
//! `L` must reach back to the first marker (a user-visible consequence of truncation,
//! which the learning test and the CLI's defaults respect).

use tensorfit_core::{Error, HostTensor, Result};

use crate::description::{InputSpec, LossSpec, ModelDescription};

use tensorfit_core::Rng;

/// One minibatch: `x` `[T, B, features]` (or `[T, B]` token ids), time-major, and its
/// labels: `[B]` class indices (a regression's `[B, outputs]` values; with a head on
/// every step `[T, B]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub x: HostTensor,
    pub labels: Vec<f32>,
    /// Each sequence's own number of steps when the batch is padded to its longest
    /// (`x`'s steps past a sequence's length are padding: masked, never learned from);
    /// `None`: every sequence has all `T` steps.
    pub lengths: Option<Vec<usize>>,
}

impl Batch {
    /// A batch whose sequences all have `x`'s steps.
    pub fn new(x: HostTensor, labels: Vec<f32>) -> Batch {
        Batch {
            x,
            labels,
            lengths: None,
        }
    }
}

/// The temporal-order task generator. Deterministic given its seed.
#[derive(Debug, Clone)]
pub struct TemporalOrder {
    rng: Rng,
}

impl TemporalOrder {
    /// Features per step (the seed network's input width).
    pub const FEATURES: usize = 152;
    /// Number of classes.
    pub const CLASSES: usize = 6;
    /// Shortest sequence that has room for both marker windows.
    pub const MIN_STEPS: usize = 4;

    pub fn new(seed: u64) -> Self {
        TemporalOrder {
            rng: Rng::new(seed),
        }
    }

    /// Whether `model` can learn this task: dense input of [`Self::FEATURES`] or tokens
    /// of a vocabulary that size, a head on the last step and softmax cross-entropy over
    /// [`Self::CLASSES`]; the error says what differs.
    pub fn fits(model: &ModelDescription) -> Result<()> {
        let input = match model.input {
            InputSpec::Dense { features } => features,
            InputSpec::Tokens { vocab, .. } => vocab,
        };
        let fits = input == Self::FEATURES
            && model.head.on.per_sequence()
            && model.loss
                == (LossSpec::SoftmaxCrossEntropy {
                    classes: Self::CLASSES,
                });
        if fits {
            return Ok(());
        }
        Err(Error::input(format!(
            "{}; the model is {model}",
            Self::needs()
        )))
    }

    /// What a model needs for this task, as the errors say it.
    pub fn needs() -> String {
        format!(
            "the built-in temporal-order task needs dense input of {0} features or tokens of a vocabulary of {0}, a head on the last step and cross-entropy over {1} classes",
            Self::FEATURES,
            Self::CLASSES
        )
    }

    /// The generator's state, to resume the same stream later.
    pub fn rng_state(&self) -> u64 {
        self.rng.state()
    }

    /// A minibatch of `batch` sequences of `steps` symbols in the form `model` reads:
    /// one-hot rows for dense input, token ids for token input (after [`Self::fits`]).
    pub fn batch_for(
        &mut self,
        model: &ModelDescription,
        batch: usize,
        steps: usize,
    ) -> Result<Batch> {
        Self::fits(model)?;
        match model.input {
            InputSpec::Dense { .. } => self.batch(batch, steps),
            InputSpec::Tokens { .. } => self.token_batch(batch, steps),
        }
    }

    /// A minibatch of `batch` sequences of `steps` symbols as token ids, `x` `[T, B]`:
    /// the symbols [`Self::batch`] would give from the same state.
    pub fn token_batch(&mut self, batch: usize, steps: usize) -> Result<Batch> {
        let (symbols, labels) = self.symbols(batch, steps)?;
        let ids = symbols.into_iter().map(|s| s as f32).collect();
        Ok(Batch::new(HostTensor::new([steps, batch], ids)?, labels))
    }

    /// A minibatch of `batch` sequences of `steps` symbols, one-hot.
    pub fn batch(&mut self, batch: usize, steps: usize) -> Result<Batch> {
        let (symbols, labels) = self.symbols(batch, steps)?;
        let f = Self::FEATURES;
        let mut x = vec![0.0f32; symbols.len() * f];
        for (row, &symbol) in symbols.iter().enumerate() {
            x[row * f + symbol] = 1.0;
        }
        Ok(Batch::new(HostTensor::new([steps, batch, f], x)?, labels))
    }

    /// The symbols of `batch` sequences of `steps` steps, time-major (`[T, B]`), and
    /// their labels.
    fn symbols(&mut self, batch: usize, steps: usize) -> Result<(Vec<usize>, Vec<f32>)> {
        if steps < Self::MIN_STEPS {
            return Err(Error::input(format!(
                "the temporal-order task needs sequences of at least {} steps, got {steps}",
                Self::MIN_STEPS
            )));
        }
        if batch == 0 {
            return Err(Error::input("batch must be at least 1"));
        }
        let f = Self::FEATURES;
        let numel = steps
            .checked_mul(batch)
            .and_then(|n| n.checked_mul(f))
            .ok_or_else(|| Error::input(format!("batch {batch} × length {steps} is too large")))?;
        let mut symbols = vec![0usize; numel / f];
        let mut labels = Vec::with_capacity(batch);
        // Marker windows: [10%, 20%] and [50%, 60%] of the length, kept apart and in range.
        let w1 = (steps / 10, (steps / 5).max(steps / 10));
        let w2_lo = (steps / 2).max(w1.1 + 1);
        let w2 = (w2_lo, (steps * 6 / 10).max(w2_lo).min(steps - 1));
        for b in 0..batch {
            let first = self.rng.int_inclusive(0, 2);
            let second = self.rng.int_inclusive(0, 1);
            let t1 = self.rng.int_inclusive(w1.0, w1.1);
            let t2 = self.rng.int_inclusive(w2.0, w2.1);
            for t in 0..steps {
                let symbol = if t == t1 {
                    first
                } else if t == t2 {
                    3 + second
                } else {
                    self.rng.int_inclusive(5, f - 1)
                };
                symbols[t * batch + b] = symbol;
            }
            labels.push((first * 2 + second) as f32);
        }
        Ok((symbols, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_one_hot_and_labels_match_markers() {
        let a = TemporalOrder::new(3).batch(16, 40).unwrap();
        let b = TemporalOrder::new(3).batch(16, 40).unwrap();
        assert_eq!(a, b);
        let f = TemporalOrder::FEATURES;
        for bi in 0..16 {
            let mut first = None;
            let mut second = None;
            for t in 0..40 {
                let row = &a.x.data[(t * 16 + bi) * f..(t * 16 + bi + 1) * f];
                assert_eq!(row.iter().sum::<f32>(), 1.0);
                let s = row.iter().position(|&v| v == 1.0).unwrap();
                if s < 3 {
                    assert!(first.is_none());
                    first = Some(s);
                } else if s < 5 {
                    second = Some(s - 3);
                }
            }
            assert_eq!(a.labels[bi] as usize, first.unwrap() * 2 + second.unwrap());
        }
        let classes: std::collections::BTreeSet<u32> = TemporalOrder::new(1)
            .batch(200, 10)
            .unwrap()
            .labels
            .iter()
            .map(|&l| l as u32)
            .collect();
        assert_eq!(classes.len(), 6);
    }

    #[test]
    fn the_task_fits_the_seed_and_names_what_differs_in_another_model() {
        TemporalOrder::fits(&ModelDescription::seed()).unwrap();
        let mut d = ModelDescription::seed();
        d.loss = LossSpec::SoftmaxCrossEntropy { classes: 5 };
        let e = TemporalOrder::fits(&d).unwrap_err().to_string();
        assert!(
            e.contains("6 classes") && e.contains("cross_entropy 5"),
            "{e}"
        );
        let mut d = ModelDescription::seed();
        d.head.on = crate::description::HeadOn::EveryStep;
        assert!(TemporalOrder::fits(&d).is_err());
    }

    #[test]
    fn a_token_model_gets_the_same_symbols_as_ids() {
        let mut d = ModelDescription::seed();
        d.input = InputSpec::Tokens {
            vocab: TemporalOrder::FEATURES,
            embedding: None,
        };
        let ids = TemporalOrder::new(4).batch_for(&d, 8, 20).unwrap();
        let hot = TemporalOrder::new(4).batch(8, 20).unwrap();
        assert_eq!(ids.x.shape.dims(), [20, 8]);
        assert_eq!(ids.labels, hot.labels);
        let f = TemporalOrder::FEATURES;
        for (row, &id) in ids.x.data.iter().enumerate() {
            assert_eq!(hot.x.data[row * f + id as usize], 1.0, "row {row}");
        }
        d.input = InputSpec::Tokens {
            vocab: 65,
            embedding: Some(8),
        };
        let e = TemporalOrder::fits(&d).unwrap_err().to_string();
        assert!(e.contains("vocabulary of 152"), "{e}");
    }

    #[test]
    fn too_short_or_empty_is_an_error() {
        assert!(TemporalOrder::new(0).batch(4, 3).is_err());
        assert!(TemporalOrder::new(0).batch(0, 10).is_err());
        assert!(TemporalOrder::new(0).batch(usize::MAX, 1 << 40).is_err());
    }
}
