//! The strategies a job can run with: choices that save memory and leave the results
//! unchanged (streaming the inference parts in time chunks, evaluating in micro-batches,
//! recomputing the truncated-BPTT window in sub-segments), and the sizes a job may have.

use std::fmt::Write as _;

use tensorfit_core::{Error, Result};
use tensorfit_nn::{Job, ModelDescription, TrainOptions};

use crate::session::Request;

/// The memory-saving choices that leave results unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    /// Longest chunk of time steps run at once where only inference runs.
    pub chunk: usize,
    /// Micro-batch size for the inference parts.
    pub micro_batch: Option<usize>,
    /// Training: recompute activations in sub-segments of this many steps.
    pub recompute: Option<usize>,
}

impl Strategy {
    /// The strategy in words, for `job`. Micro-batches of a training job apply only to
    /// its evaluations (training itself is never split: BatchNorm's batch statistics
    /// would change).
    pub fn describe(&self, job: Job) -> String {
        let mut s = if self.chunk >= inference_dims(job).1 {
            "whole sequence".to_string()
        } else {
            format!("streamed in time chunks of {}", self.chunk)
        };
        match (self.micro_batch, job) {
            (Some(m), Job::Train { .. }) => {
                let _ = write!(s, ", evaluation in micro-batches of {m}");
            }
            (Some(m), Job::Eval { .. }) => {
                let _ = write!(s, ", micro-batches of {m}");
            }
            (None, _) => {}
        }
        if let Some(r) = self.recompute {
            let _ = write!(s, ", recompute every {r} steps");
        }
        s
    }

    pub(crate) fn options(&self, req: &Request) -> TrainOptions {
        TrainOptions {
            tbptt: req.tbptt,
            tbptt_mode: req.tbptt_mode,
            chunk: self.chunk,
            micro_batch: self.micro_batch,
            recompute: self.recompute,
            optim: req.optim,
            seed: req.seed,
            padded: req.padded,
            split_update: req.data_parallel.is_some(),
            sync_batch_norm: req.data_parallel.and_then(|d| d.sync_batch_norm(&req.cfg)),
            carry_across: req.carry_across,
        }
    }
}

/// The (batch, length) of the job's inference parts: what streaming applies to.
pub(crate) fn inference_dims(job: Job) -> (usize, usize) {
    match job {
        Job::Eval { batch, seq_len } => (batch, seq_len),
        Job::Train { eval: Some(d), .. } => d,
        Job::Train { batch, seq_len, .. } => (batch, seq_len),
    }
}

/// Every strategy worth planning for `job` of `cfg` (training with BPTT length `tbptt`),
/// the plainest first.
pub fn strategies(cfg: &ModelDescription, job: Job, tbptt: usize) -> Vec<Strategy> {
    let (batch, steps) = inference_dims(job);
    // Chunks and micro-batches change only the inference parts: evaluations, and the
    // steps of a training sequence before its truncated-BPTT window. A plan that differs
    // in nothing else is not planned twice.
    let (streamed, split) = match job {
        Job::Train {
            eval: None,
            seq_len,
            ..
        } => (seq_len - tbptt.min(seq_len), false),
        _ => (steps, true),
    };
    // A layer that reads each sequence whole (bidirectional) runs it in one chunk.
    let splits = cfg.network().is_ok_and(|net| net.reads_whole().is_none());
    let mut chunks = vec![steps];
    chunks.extend(
        [1000, 500, 250, 100, 50, 20, 10, 5, 2, 1]
            .into_iter()
            .filter(|&c| c < streamed && splits),
    );
    let mut micros = vec![None];
    let mut m = batch;
    while split && m > 1 {
        m = m.div_ceil(2);
        micros.push(Some(m));
    }
    // Recomputation keeps L/S border states and S steps of activations, so sub-segments
    // shorter than √L only cost memory: halve from L down to ⌈√L⌉.
    let mut recomputes = vec![None];
    if let (Job::Train { seq_len, .. }, true) = (job, tensorfit_nn::recomputable(cfg)) {
        let len = tbptt.min(seq_len);
        let floor = (len as f64).sqrt().ceil() as usize;
        let mut r = len;
        while r > floor {
            r = r.div_ceil(2).max(floor);
            recomputes.push(Some(r));
        }
    }
    let mut out = Vec::new();
    for &recompute in &recomputes {
        for &micro_batch in &micros {
            for &chunk in &chunks {
                out.push(Strategy {
                    chunk,
                    micro_batch,
                    recompute,
                });
            }
        }
    }
    out
}

/// Largest number of input elements in one job (2^40 floats = 4 TiB): beyond any
/// machine, small enough that sizes computed from it cannot overflow.
const MAX_JOB_ELEMENTS: u128 = 1 << 40;

/// Refuses impossible sizes before anything is planned or allocated.
pub(crate) fn check_job(cfg: &ModelDescription, job: Job, tbptt: usize) -> Result<()> {
    // Each batch with the flag that sets its size: a training run's evaluations have
    // their own (`--eval-batch`).
    let mut dims = vec![(inference_dims(job), "--batch")];
    if let Job::Train {
        batch,
        seq_len,
        eval,
    } = job
    {
        if eval.is_some() {
            dims[0].1 = "--eval-batch";
        }
        dims.push(((batch, seq_len), "--batch"));
    }
    for &((batch, steps), flag) in &dims {
        if batch == 0 || steps == 0 {
            return Err(Error::input(format!(
                "batch {batch} × length {steps}: batch must be at least 1 and length at least 1"
            )));
        }
        let (width, of) = match cfg.input_features() >= cfg.body_features() {
            true => (cfg.input_features(), "input features"),
            false => (cfg.body_features(), "features out of the body"),
        };
        // Checked: two lengths near `usize::MAX` and a width overflow even u128.
        let elements = (batch as u128)
            .checked_mul(steps as u128)
            .and_then(|n| n.checked_mul(width as u128))
            .filter(|&n| n <= MAX_JOB_ELEMENTS);
        if elements.is_none() {
            let values = batch as f64 * steps as f64 * width as f64;
            return Err(Error::input(format!(
                "a batch of {batch} sequences of {steps} steps, {width} {of} per step, is {values:.1e} values: more than any device holds (2^40 values, 4 TiB as f32); lower {flag} or --seq-len"
            )));
        }
    }
    // After the lengths: a length of 0 makes the default truncation 0 too.
    if matches!(job, Job::Train { .. }) && tbptt == 0 {
        return Err(Error::input(
            "the truncated-BPTT length (tbptt, --tbptt) must be at least 1",
        ));
    }
    Ok(())
}
