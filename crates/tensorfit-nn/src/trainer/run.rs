//! Running a sequence through a step's programs, and evaluation and prediction on it.
//!
//! A program with a loss gets the labels of its own steps and rows: a head on the last
//! step has one label (or `K` targets) per sequence; a head on every step one per step
//! and sequence, `[T, B]` (`[T, B, K]`) time-major like `x`, so a program over steps
//! `t0..t1` reads their block. Evaluation of a head on every step scores each chunk of
//! the stream (its programs carry their state on, [`crate::options::ProgramKind::EvalCarry`]).

use std::ops::Range;

use tensorfit_core::{Error, HostTensor, Result, Shape};

use super::{padded, Trainer};
use crate::batch_input::{check_batch, write_steps};
use crate::description::{HeadOn, ModelDescription};
use crate::every_step::{loss_scale, Tally};
use crate::options::{micro_batches, ProgramKey};

/// What an evaluation produced.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalReport {
    /// The mean loss: cross-entropy (over the steps not ignored, with a head on every
    /// step), or the mean squared error for a regression.
    pub loss: f32,
    /// The fraction of rows (of steps, with a head on every step) whose most probable
    /// class is the label; `None` for a regression.
    pub accuracy: Option<f32>,
    /// `exp(loss)` for cross-entropy; `None` for a regression.
    pub perplexity: Option<f32>,
    /// Softmax probabilities `[B, classes]` (`[T, B, classes]` with a head on every
    /// step), or a regression's predictions `[B, outputs]` (`[T, B, outputs]`).
    pub probs: HostTensor,
}

/// One program's results: the steps it scored, its mean loss and its outputs
/// `[steps, rows, classes]` (`[rows, classes]` on the last step).
pub(super) struct Scored {
    pub steps: Range<usize>,
    pub loss: f32,
    pub probs: Vec<f32>,
    pub labels: Vec<f32>,
}

/// The labels of steps `steps` and sequences `rows` of a batch of `batch`, for a program
/// with a loss: per sequence for a head on the last step, per step and sequence
/// (time-major) for one on every step.
pub(super) fn labels_of(
    model: &ModelDescription,
    labels: &[f32],
    batch: usize,
    steps: Range<usize>,
    rows: Range<usize>,
) -> Vec<f32> {
    let per = model.loss.targets_per_row();
    match model.head.on {
        HeadOn::Sequence(_) => labels[rows.start * per..rows.end * per].to_vec(),
        HeadOn::EveryStep => steps
            .flat_map(|t| {
                let from = (t * batch + rows.start) * per;
                labels[from..from + rows.len() * per].iter().copied()
            })
            .collect(),
    }
}

impl Trainer {
    /// Starts from zeros (or a carrying call's state, `trainer/carry_across.rs`, which
    /// then gets the final state) and runs `keys` in order over sequences `rows` of `x` (of
    /// `lengths`, if padded: each program gets its chunk's share of them), time step
    /// after time step; each program with a loss gets its labels (and a
    /// training program the optimizer's next `scalars` and its update's dropout key) and
    /// returns what it scored.
    pub(super) fn run_sequence(
        &mut self,
        keys: &[ProgramKey],
        (x, lengths): (&HostTensor, Option<&[f32]>),
        rows: Range<usize>,
        labels: &[f32],
        scalars: &mut dyn FnMut() -> Option<(Vec<f32>, [f32; 2])>,
    ) -> Result<Vec<Scored>> {
        let Some(last) = keys.last() else {
            return Err(Error::Graph("a run needs at least one program".into()));
        };
        let all = x.shape.dims().get(1).copied().unwrap_or(0);
        self.check_planned(keys)?;
        self.load_carried(last.batch, rows.clone())?;
        let mut t = 0;
        let mut scored = Vec::new();
        for &key in keys {
            self.ensure_program(key)?;
            let p = &self.programs[&key];
            let backend = self.backend.as_mut();
            let start = t;
            for (i, &(input, len)) in p.ids.xs.iter().enumerate() {
                if let Some(&l) = p.ids.lengths.get(i) {
                    let within = padded::lengths_within(lengths, t..t + len, rows.clone());
                    p.exe.write(backend, l, &within)?;
                }
                write_steps(backend, p.exe.view(input), x, t..t + len, rows.clone())?;
                t += len;
            }
            if p.ids.labels.is_empty() {
                p.exe.run(backend)?;
                continue;
            }
            let mine = labels_of(&self.model, labels, all, start..t, rows.clone());
            // One labels input, or one per sub-segment of `xs` (a head on every step
            // recomputed), each taking its steps' run of the time-major labels.
            if let [l] = p.ids.labels[..] {
                p.exe.write(backend, l, &mine)?;
            } else {
                let per_step = mine.len() / (t - start).max(1);
                let mut at = 0;
                for (&l, &(_, len)) in p.ids.labels.iter().zip(&p.ids.xs) {
                    p.exe.write(backend, l, &mine[at..at + len * per_step])?;
                    at += len * per_step;
                }
            }
            if let Some(s) = p.ids.loss_scale {
                p.exe.write(backend, s, &[loss_scale(&mine)])?;
            }
            if p.ids.scalars.is_some() || p.ids.dropout_key.is_some() {
                let (values, dropout_key) = scalars().ok_or_else(|| {
                    Error::Graph(format!(
                        "training program `{key}` run without the optimizer's scalars"
                    ))
                })?;
                if let Some(s) = p.ids.scalars {
                    p.exe.write(backend, s, &values)?;
                }
                if let Some(k) = p.ids.dropout_key {
                    p.exe.write(backend, k, &dropout_key)?;
                }
            }
            p.exe.run(backend)?;
            let loss = match p.ids.loss {
                Some(l) => p.exe.read(backend, l)?.first().copied().unwrap_or(f32::NAN),
                None => f32::NAN,
            };
            let mut probs = Vec::new();
            for &pr in &p.ids.probs {
                probs.extend(p.exe.read(backend, pr)?);
            }
            scored.push(Scored {
                steps: start..t,
                loss,
                probs,
                labels: mine,
            });
        }
        self.save_carried(last.batch, rows)?;
        Ok(scored)
    }

    /// Zeroes the carried state of batch size `batch`: every sequence starts from zeros.
    fn zero_carried(&mut self, batch: usize) -> Result<()> {
        self.reset_stream(batch, None)
    }

    /// Zeroes the carried state, runs the carry programs of `keys` over their chunks of
    /// sequences `rows` of `x`, and writes the last program's steps of `x`, which is left
    /// to run; returns its key.
    pub(super) fn start_sequence(
        &mut self,
        keys: &[ProgramKey],
        x: &HostTensor,
        rows: Range<usize>,
    ) -> Result<ProgramKey> {
        let Some(&last) = keys.last() else {
            return Err(Error::Graph("a run needs at least one program".into()));
        };
        self.check_planned(keys)?;
        self.zero_carried(last.batch)?;
        let mut t = 0;
        for &key in keys {
            self.ensure_program(key)?;
            let p = &self.programs[&key];
            let backend = self.backend.as_mut();
            for &(input, len) in &p.ids.xs {
                write_steps(backend, p.exe.view(input), x, t..t + len, rows.clone())?;
                t += len;
            }
            if key != last {
                p.exe.run(backend)?;
            }
        }
        Ok(last)
    }

    /// Runs the model in inference form (running statistics) over whole sequences.
    pub fn evaluate(&mut self, x: &HostTensor, labels: &[f32]) -> Result<EvalReport> {
        self.evaluate_at(x, labels, None)
    }

    /// [`Trainer::evaluate`] on a padded batch of `lengths` (as in
    /// [`Trainer::train_step_at`]).
    pub fn evaluate_at(
        &mut self,
        x: &HostTensor,
        labels: &[f32],
        lengths: Option<&[f32]>,
    ) -> Result<EvalReport> {
        let (steps, batch) = check_batch(&self.model, x, labels)?;
        let keys = self.opts.eval_programs(&self.model, batch, steps);
        let lengths = self.check_lengths(lengths, batch, steps, &keys)?;
        let classes = self.model.loss.outputs();
        let every_step = self.model.head.on == HeadOn::EveryStep;
        let out_rows = if every_step { steps * batch } else { batch };
        let mut probs = vec![0.0; out_rows * classes];
        let mut summed = Summed::default();
        let mut start = 0;
        for m in micro_batches(batch, self.opts.micro_batch) {
            // One micro-batch: its own chunks, reading its sequences out of `x` in place
            // (no host copy of them).
            let keys = self.opts.eval_programs(&self.model, m, steps);
            let rows = start..start + m;
            for s in self.run_sequence(&keys, (x, lengths), rows.clone(), labels, &mut || None)? {
                place(&mut probs, &s, (batch, classes), rows.clone(), every_step);
                summed.add(&self.model, &s);
            }
            start += m;
        }
        let (loss, tally) = (summed.loss(), summed.tally);
        let classify = self.model.loss.is_classification();
        let shape = if every_step {
            vec![steps, batch, classes]
        } else {
            vec![batch, classes]
        };
        Ok(EvalReport {
            loss,
            accuracy: classify.then(|| tally.accuracy()),
            perplexity: classify.then(|| loss.exp()),
            probs: HostTensor::new(Shape(shape), probs)?,
        })
    }

    /// Class probabilities `[B, classes]`, or a regression's predictions `[B, outputs]`,
    /// for `x` `[T, B, input]` (inference form); `[T, B, ..]` with a head on every step.
    pub fn predict(&mut self, x: &HostTensor) -> Result<HostTensor> {
        self.predict_at(x, None)
    }

    /// [`Trainer::predict`] on a padded batch of `lengths` (as in
    /// [`Trainer::train_step_at`]): each sequence's outputs at its own last step, or at
    /// each of its steps (the padded steps' outputs are not its).
    pub fn predict_at(&mut self, x: &HostTensor, lengths: Option<&[f32]>) -> Result<HostTensor> {
        let d = x.shape.dims();
        let (steps, batch) = (
            d.first().copied().unwrap_or(0),
            d.get(1).copied().unwrap_or(0),
        );
        let rows = match self.model.head.on {
            HeadOn::Sequence(_) => batch,
            HeadOn::EveryStep => batch.saturating_mul(steps),
        };
        let targets = rows.saturating_mul(self.model.loss.targets_per_row());
        Ok(self.evaluate_at(x, &vec![0.0; targets], lengths)?.probs)
    }
}

/// The mean loss over programs, each weighted by the rows it counted (steps not
/// ignored, or targets), and their tally of right answers, summed as they come.
#[derive(Debug, Default)]
pub(super) struct Summed {
    pub tally: Tally,
    loss_sum: f64,
    weight: f64,
}

impl Summed {
    pub fn add(&mut self, model: &ModelDescription, s: &Scored) {
        let counted = if model.loss.is_classification() {
            let before = self.tally.counted;
            self.tally.add(&s.probs, &s.labels, model.loss.outputs());
            self.tally.counted - before
        } else {
            s.labels.len()
        };
        self.loss_sum += s.loss as f64 * counted as f64;
        self.weight += counted as f64;
    }

    /// The weighted mean loss (0 when nothing counted).
    pub fn loss(&self) -> f32 {
        if self.weight > 0.0 {
            (self.loss_sum / self.weight) as f32
        } else {
            0.0
        }
    }
}

/// Copies a program's outputs into the whole batch's: rows `rows` of `[B, C]`, or steps
/// `s.steps` × rows `rows` of `[T, B, C]`.
fn place(
    out: &mut [f32],
    s: &Scored,
    (batch, classes): (usize, usize),
    rows: Range<usize>,
    every_step: bool,
) {
    let width = rows.len() * classes;
    let block = |t: usize| (t * batch + rows.start) * classes;
    if every_step {
        for (u, t) in s.steps.clone().enumerate() {
            out[block(t)..block(t) + width].copy_from_slice(&s.probs[u * width..(u + 1) * width]);
        }
    } else {
        out[block(0)..block(0) + width].copy_from_slice(&s.probs[..width]);
    }
}
