//! The built-in task that fits a model: [`TemporalOrder`] for the seed's classifier,
//! [`RunningMean`] for a regression (the mean-squared-error loss), [`MarkovText`] for a
//! language model (a head on every step), so the CLI trains each without a download.

use tensorfit_core::{Error, Result};

use crate::description::{InputSpec, ModelDescription};
use crate::markov_text::MarkovText;
use crate::running_mean::RunningMean;
use crate::task::{Batch, TemporalOrder};

/// A built-in task's generator, chosen by the model's head and loss.
#[derive(Debug, Clone)]
pub enum BuiltinTask {
    /// The temporal-order task, as one-hot rows or (`tokens`) as token ids.
    TemporalOrder {
        task: TemporalOrder,
        tokens: bool,
    },
    RunningMean(RunningMean),
    MarkovText(MarkovText),
}

impl BuiltinTask {
    /// The task that fits `model`, its stream started (or resumed) at `seed`; the error
    /// says what each task needs.
    pub fn for_model(model: &ModelDescription, seed: u64) -> Result<Self> {
        if TemporalOrder::fits(model).is_ok() {
            return Ok(BuiltinTask::TemporalOrder {
                task: TemporalOrder::new(seed),
                tokens: matches!(model.input, InputSpec::Tokens { .. }),
            });
        }
        if let Ok(task) = RunningMean::for_model(model, seed) {
            return Ok(BuiltinTask::RunningMean(task));
        }
        if let Ok(task) = MarkovText::for_model(model, seed) {
            return Ok(BuiltinTask::MarkovText(task));
        }
        Err(Error::input(format!(
            "no built-in task fits the model {model}: {}; {}; {}",
            TemporalOrder::needs(),
            RunningMean::NEEDS,
            MarkovText::needs()
        )))
    }

    /// Whether a built-in task fits `model`; the error says what each needs.
    pub fn fits(model: &ModelDescription) -> Result<()> {
        Self::for_model(model, 0).map(|_| ())
    }

    /// The shortest sequence the task makes.
    pub fn min_steps(&self) -> usize {
        match self {
            BuiltinTask::TemporalOrder { .. } => TemporalOrder::MIN_STEPS,
            BuiltinTask::RunningMean(_) => RunningMean::WINDOW,
            BuiltinTask::MarkovText(_) => 1,
        }
    }

    /// A minibatch of `batch` sequences of `steps` steps.
    pub fn batch(&mut self, batch: usize, steps: usize) -> Result<Batch> {
        match self {
            BuiltinTask::TemporalOrder {
                task,
                tokens: false,
            } => task.batch(batch, steps),
            BuiltinTask::TemporalOrder { task, tokens: true } => task.token_batch(batch, steps),
            BuiltinTask::RunningMean(t) => t.batch(batch, steps),
            BuiltinTask::MarkovText(t) => t.batch(batch, steps),
        }
    }

    /// The generator's state, to resume the same stream later ([`Self::for_model`] with
    /// it as the seed).
    pub fn rng_state(&self) -> u64 {
        match self {
            BuiltinTask::TemporalOrder { task, .. } => task.rng_state(),
            BuiltinTask::RunningMean(t) => t.rng_state(),
            BuiltinTask::MarkovText(t) => t.rng_state(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::description::{HeadOn, InputSpec, LossSpec};

    #[test]
    fn the_seed_gets_temporal_order_and_a_regression_gets_running_mean() {
        let seed = ModelDescription::seed();
        let task = BuiltinTask::for_model(&seed, 1).unwrap();
        assert!(matches!(task, BuiltinTask::TemporalOrder { .. }));
        let mut reg = ModelDescription::seed();
        reg.loss = LossSpec::MeanSquaredError { outputs: 2 };
        let mut task = BuiltinTask::for_model(&reg, 1).unwrap();
        assert!(matches!(task, BuiltinTask::RunningMean(_)));
        assert_eq!(task.batch(3, 5).unwrap().labels.len(), 3 * 2);
    }

    #[test]
    fn a_model_no_task_fits_is_refused_naming_both_tasks() {
        let mut d = ModelDescription::seed();
        d.head.on = HeadOn::EveryStep;
        d.input = InputSpec::Dense { features: 3 };
        let e = BuiltinTask::fits(&d).unwrap_err().to_string();
        assert!(
            e.contains("temporal-order") && e.contains("running-mean") && e.contains("next-symbol"),
            "{e}"
        );
    }

    #[test]
    fn a_stream_resumes_from_its_state() {
        let mut reg = ModelDescription::seed();
        reg.loss = LossSpec::MeanSquaredError { outputs: 1 };
        let mut a = BuiltinTask::for_model(&reg, 7).unwrap();
        a.batch(2, 6).unwrap();
        let mut b = BuiltinTask::for_model(&reg, a.rng_state()).unwrap();
        assert_eq!(a.batch(2, 6).unwrap(), b.batch(2, 6).unwrap());
    }
}
