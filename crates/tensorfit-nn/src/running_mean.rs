//! The built-in regression task: the noisy mean of the last few inputs, so a model with
//! the mean-squared-error loss trains without a download.
//!
//! Each step's input is `features` values uniform in [-1, 1]. A sequence's target `k`
//! (of the loss's `outputs`) is the mean of feature `k mod features` over its last
//! [`RunningMean::WINDOW`] steps, plus Gaussian noise of standard deviation
//! [`RunningMean::NOISE`]: the model must remember a few recent values and average
//! them. Predicting zero scores `1 / (3 · WINDOW) + NOISE²` ≈ 0.086; a perfect model
//! scores `NOISE²` = 0.0025.

use tensorfit_core::{Error, HostTensor, Result, Rng};

use crate::description::{HeadOn, InputSpec, LossSpec, ModelDescription};
use crate::task::Batch;

/// The running-mean task generator for one model's widths. Deterministic given its
/// seed.
#[derive(Debug, Clone)]
pub struct RunningMean {
    rng: Rng,
    features: usize,
    outputs: usize,
}

impl RunningMean {
    /// Steps averaged into a target.
    pub const WINDOW: usize = 4;
    /// Standard deviation of the noise added to each target.
    pub const NOISE: f32 = 0.05;

    /// What a model needs for this task, as the errors say it.
    pub const NEEDS: &'static str =
        "the built-in running-mean task needs dense input, a head on the last step and the mse loss";

    /// The task for `model`, which must have dense input, a head on the last step and
    /// the mean-squared-error loss; the error says what differs.
    pub fn for_model(model: &ModelDescription, seed: u64) -> Result<Self> {
        let parts = (model.input, model.head.on, model.loss);
        let (
            InputSpec::Dense { features },
            HeadOn::LAST_STEP,
            LossSpec::MeanSquaredError { outputs },
        ) = parts
        else {
            return Err(Error::input(format!(
                "{}; the model is {model}",
                Self::NEEDS
            )));
        };
        Ok(RunningMean {
            rng: Rng::new(seed),
            features,
            outputs,
        })
    }

    /// Whether `model` can learn this task; the error says what differs.
    pub fn fits(model: &ModelDescription) -> Result<()> {
        Self::for_model(model, 0).map(|_| ())
    }

    /// The generator's state, to resume the same stream later ([`Self::for_model`] with
    /// it as the seed).
    pub fn rng_state(&self) -> u64 {
        self.rng.state()
    }

    /// The mean squared error of always predicting zero: the score to beat.
    pub fn baseline_mse() -> f32 {
        1.0 / (3.0 * Self::WINDOW as f32) + Self::NOISE * Self::NOISE
    }

    /// A minibatch of `batch` sequences of `steps` steps: `x` `[steps, batch, features]`,
    /// `labels` the targets `[batch, outputs]`.
    pub fn batch(&mut self, batch: usize, steps: usize) -> Result<Batch> {
        if steps < Self::WINDOW || batch == 0 {
            return Err(Error::input(format!(
                "the running-mean task needs at least one sequence of at least {} steps, got {batch} of {steps}",
                Self::WINDOW
            )));
        }
        let f = self.features;
        let numel = steps
            .checked_mul(batch)
            .and_then(|n| n.checked_mul(f))
            .ok_or_else(|| Error::input(format!("batch {batch} × length {steps} is too large")))?;
        let x: Vec<f32> = (0..numel)
            .map(|_| self.rng.uniform_range(-1.0, 1.0))
            .collect();
        let mut labels = Vec::with_capacity(batch * self.outputs);
        for b in 0..batch {
            for k in 0..self.outputs {
                let window = steps - Self::WINDOW..steps;
                let sum: f32 = window.map(|t| x[(t * batch + b) * f + k % f]).sum();
                labels.push(sum / Self::WINDOW as f32 + Self::NOISE * self.rng.normal());
            }
        }
        Ok(Batch::new(HostTensor::new([steps, batch, f], x)?, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regression() -> ModelDescription {
        let mut d = ModelDescription::seed();
        d.input = InputSpec::Dense { features: 3 };
        d.loss = LossSpec::MeanSquaredError { outputs: 2 };
        d
    }

    #[test]
    fn targets_are_the_mean_of_the_last_window_within_the_noise() {
        let mut task = RunningMean::for_model(&regression(), 5).unwrap();
        let (batch, steps) = (64, 9);
        let b = task.batch(batch, steps).unwrap();
        let mut worst = 0.0f32;
        for s in 0..batch {
            for k in 0..2 {
                let mean: f32 = (steps - 4..steps)
                    .map(|t| b.x.data[(t * batch + s) * 3 + k])
                    .sum::<f32>()
                    / 4.0;
                worst = worst.max((b.labels[s * 2 + k] - mean).abs());
            }
        }
        // 128 draws of N(0, 0.05²): beyond 5 σ would be a bug, not bad luck.
        assert!(worst > 0.0 && worst < 0.25, "{worst}");
        let again = RunningMean::for_model(&regression(), 5)
            .unwrap()
            .batch(batch, steps);
        assert_eq!(again.unwrap(), b);
    }

    #[test]
    fn only_a_last_step_mse_model_fits_and_short_sequences_are_refused() {
        assert!(RunningMean::fits(&ModelDescription::seed()).is_err());
        let mut d = regression();
        d.head.on = HeadOn::EveryStep;
        assert!(RunningMean::fits(&d).is_err());
        let mut task = RunningMean::for_model(&regression(), 0).unwrap();
        assert!(task.batch(4, 3).is_err());
        assert!(task.batch(0, 10).is_err());
    }
}
