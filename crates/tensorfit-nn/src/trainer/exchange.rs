//! A training step split at its gradients ([`TrainOptions::split_update`]): the gradient
//! program, then the host's [`GradientExchange`] (data-parallel ranks average the
//! gradients and the loss there), then the update program on what it returns.
//!
//! [`TrainOptions::split_update`]: crate::options::TrainOptions::split_update

use tensorfit_core::{Error, HostTensor, Result};

use super::Trainer;
use crate::options::ProgramKey;

/// What happens to a step's gradients between backward and the update.
pub trait GradientExchange {
    /// Replaces `grads` (one per trainable parameter, in the model's table order) and
    /// `loss` (the mean over this process's rows) by the values the update is to use.
    /// `step` is the 1-based step they belong to; a step repeated after a device
    /// failure passes the same `step` again.
    fn exchange(&mut self, step: u64, grads: &mut [Vec<f32>], loss: &mut f32) -> Result<()>;
}

/// One process: the gradients are used as they are.
#[derive(Debug, Default, Clone, Copy)]
pub struct LocalGradients;

impl GradientExchange for LocalGradients {
    fn exchange(&mut self, _step: u64, _grads: &mut [Vec<f32>], _loss: &mut f32) -> Result<()> {
        Ok(())
    }
}

impl Trainer {
    /// Runs `keys` (carried chunks, the gradient program, the update program last) over
    /// the whole batch `x`, exchanging the gradients before the update; returns the loss
    /// as exchanged and this process's probabilities.
    pub(super) fn run_split(
        &mut self,
        keys: &[ProgramKey],
        x: &HostTensor,
        labels: &[f32],
        scalars: &[f32],
        step: u64,
        exchange: &mut dyn GradientExchange,
    ) -> Result<(f32, HostTensor)> {
        let (Some((update, run)), Some(batch)) = (keys.split_last(), x.shape.dims().get(1)) else {
            return Err(Error::Graph(
                "a split step needs its programs and a batch".into(),
            ));
        };
        let (mut loss, probs) = self.run_sequence(run, x, 0..*batch, labels, None)?;
        let computed = run
            .last()
            .ok_or_else(|| Error::Graph("a split step needs a gradient program".into()))?;
        self.ensure_program(*update)?;
        let (p, u) = (&self.programs[computed], &self.programs[update]);
        let backend = self.backend.as_mut();
        // In the update program's order (the model's table order), the same on every rank.
        let mut grads = Vec::with_capacity(u.ids.grads.len());
        for (name, _) in &u.ids.grads {
            let Some((_, g)) = p.ids.grads.iter().find(|(n, _)| n == name) else {
                return Err(Error::Graph(format!(
                    "program `{computed}` computes no gradient of `{name}`"
                )));
            };
            grads.push(p.exe.read(backend, *g)?);
        }
        exchange.exchange(step, &mut grads, &mut loss)?;
        for ((_, input), g) in u.ids.grads.iter().zip(&grads) {
            u.exe.write(backend, *input, g)?;
        }
        if let Some(s) = u.ids.scalars {
            u.exe.write(backend, s, scalars)?;
        }
        u.exe.run(backend)?;
        Ok((loss, probs))
    }
}
