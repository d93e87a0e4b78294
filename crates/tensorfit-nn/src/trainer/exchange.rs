//! A training step split at its gradients ([`TrainOptions::split_update`]): the gradient
//! program, then the host's [`GradientExchange`] (data-parallel ranks average the
//! gradients and the loss there), then the update program on what it returns.
//!
//! [`TrainOptions::split_update`]: crate::options::TrainOptions::split_update

use std::ops::Range;

use tensorfit_core::{Error, HostTensor, Result};

use super::run::Scored;
use super::Trainer;
use crate::options::{ProgramKey, ProgramKind};

/// What happens to a step's gradients between backward and the update.
pub trait GradientExchange {
    /// Replaces `grads` (one per trainable parameter, in the model's table order) and
    /// `loss` (the mean over this process's rows) by the values the update is to use.
    /// `step` is the 1-based step they belong to; a step repeated after a device
    /// failure passes the same `step` again.
    fn exchange(&mut self, step: u64, grads: &mut [Vec<f32>], loss: &mut f32) -> Result<()>;

    /// With BatchNorm synchronised over ranks: the rows of every rank (this rank's are
    /// `mine`, `width` values each), in rank order, and where this rank's are among them.
    /// By default, one process: its rows are all.
    fn gather_rows(
        &mut self,
        _step: u64,
        mine: &[f32],
        width: usize,
    ) -> Result<(Vec<f32>, Range<usize>)> {
        Ok((mine.to_vec(), 0..mine.len() / width.max(1)))
    }
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
    /// the whole batch `x` (of `lengths`, if padded), exchanging the gradients before the
    /// update, with the optimizer's scalars and dropout key of the step's one update from
    /// `scalars`; returns what the gradient program scored, its loss as exchanged.
    pub(super) fn run_split(
        &mut self,
        keys: &[ProgramKey],
        (x, lengths): (&HostTensor, Option<&[f32]>),
        labels: &[f32],
        scalars: &mut dyn FnMut() -> Option<(Vec<f32>, [f32; 2])>,
        exchange: &mut dyn GradientExchange,
    ) -> Result<Vec<Scored>> {
        let (Some((update, run)), Some(&batch)) = (keys.split_last(), x.shape.dims().get(1)) else {
            return Err(Error::Graph(
                "a split step needs its programs and a batch".into(),
            ));
        };
        let (values, dropout_key) = scalars().ok_or_else(|| {
            Error::Graph("a split step runs without the optimizer's scalars".into())
        })?;
        let step = self.step + 1;
        if run.iter().any(|k| k.kind == ProgramKind::HeadInput) {
            if lengths.is_some() {
                return Err(Error::input(
                    "BatchNorm over the global batch of several ranks does not take padded batches (sequences of different lengths) yet: give sequences of one length, or train as one process",
                ));
            }
            let steps = x.shape.dims().first().copied().unwrap_or(0);
            let segment = run.last().map_or(0, |k| k.steps);
            let (loss, probs) = self.run_sync(keys, x, labels, &values, step, exchange)?;
            return Ok(vec![Scored {
                steps: steps - segment..steps,
                loss,
                probs: probs.data,
                labels: labels.to_vec(),
            }]);
        }
        // The gradient program takes the step's dropout key; its scalars are the update's.
        let mut key_once = Some((Vec::new(), dropout_key));
        let mut scored =
            self.run_sequence(run, (x, lengths), 0..batch, labels, &mut || key_once.take())?;
        let computed = run
            .last()
            .ok_or_else(|| Error::Graph("a split step needs a gradient program".into()))?;
        let grads = self.read_grads(*computed)?;
        let mut last = scored
            .pop()
            .ok_or_else(|| Error::Graph("the gradient program scored nothing".into()))?;
        last.loss = self.exchange_and_update(grads, *update, last.loss, &values, step, exchange)?;
        Ok(vec![last])
    }

    /// The gradients program `key` computed, by parameter name: read right after it ran,
    /// before the next program reuses its memory.
    pub(super) fn read_grads(&mut self, key: ProgramKey) -> Result<Vec<(String, Vec<f32>)>> {
        let p = &self.programs[&key];
        let backend = self.backend.as_mut();
        p.ids
            .grads
            .iter()
            .map(|(name, g)| Ok((name.clone(), p.exe.read(backend, *g)?)))
            .collect()
    }

    /// Passes `computed` (gradients by name) and `loss` through `exchange`, and runs the
    /// `update` program on what it returns; returns the loss it returned.
    pub(super) fn exchange_and_update(
        &mut self,
        mut computed: Vec<(String, Vec<f32>)>,
        update: ProgramKey,
        mut loss: f32,
        scalars: &[f32],
        step: u64,
        exchange: &mut dyn GradientExchange,
    ) -> Result<f32> {
        self.ensure_program(update)?;
        let u = &self.programs[&update];
        // In the update program's order (the model's table order), the same on every rank.
        let mut grads = Vec::with_capacity(u.ids.grads.len());
        for (name, _) in &u.ids.grads {
            let Some(at) = computed.iter().position(|(n, _)| n == name) else {
                return Err(Error::Graph(format!(
                    "no program of the step computes the gradient of `{name}`"
                )));
            };
            grads.push(computed.swap_remove(at).1);
        }
        exchange.exchange(step, &mut grads, &mut loss)?;
        let backend = self.backend.as_mut();
        for ((_, input), g) in u.ids.grads.iter().zip(&grads) {
            u.exe.write(backend, *input, g)?;
        }
        if let Some(s) = u.ids.scalars {
            u.exe.write(backend, s, scalars)?;
        }
        u.exe.run(backend)?;
        Ok(loss)
    }
}
