//! How a step's length and batch are cut, and the programs a step runs, as runs: a
//! program with how many times it runs in a row (a step of 4096 micro-batches of 4096
//! chunks is a handful of runs), so that planning and estimating cost what the distinct
//! programs cost, not what the job's batch and length do.

use crate::options::ProgramKey;

/// Programs, each with how many times it runs in a row.
pub type Runs = Vec<(ProgramKey, u64)>;

/// The programs of `runs`, each repeated its count.
pub(crate) fn expand(runs: &[(ProgramKey, u64)]) -> Vec<ProgramKey> {
    runs.iter()
        .flat_map(|&(k, n)| std::iter::repeat_n(k, n as usize))
        .collect()
}

/// `runs` without the last element of its last run.
pub(crate) fn without_last(mut runs: Vec<(usize, u64)>) -> Vec<(usize, u64)> {
    if let Some(last) = runs.last_mut() {
        last.1 -= 1;
        if last.1 == 0 {
            runs.pop();
        }
    }
    runs
}

/// Lengths of the state-advancing chunks over `steps` steps, at most `chunk` each: a
/// shorter first chunk, then full ones (so at most two distinct lengths are built).
pub fn carry_chunks(steps: usize, chunk: usize) -> Vec<usize> {
    sizes(&chunk_runs(steps, chunk))
}

/// [`carry_chunks`] as runs of equal lengths: `(length, how many)`.
pub fn chunk_runs(steps: usize, chunk: usize) -> Vec<(usize, u64)> {
    let chunk = chunk.max(1);
    let mut v = Vec::new();
    if steps % chunk != 0 {
        v.push((steps % chunk, 1));
    }
    if steps >= chunk {
        v.push((chunk, (steps / chunk) as u64));
    }
    v
}

/// The windows of windowed truncated BPTT over `steps` steps: `tbptt` each from the
/// start, the last one shorter when `tbptt` does not divide `steps`.
pub fn windows(steps: usize, tbptt: usize) -> Vec<usize> {
    sizes(&window_runs(steps, tbptt))
}

/// [`windows`] as runs of equal lengths.
pub(crate) fn window_runs(steps: usize, tbptt: usize) -> Vec<(usize, u64)> {
    parts(steps, tbptt.max(1))
}

/// Sizes of the micro-batches a batch of `batch` is split into (`micro` each, the last
/// smaller).
pub fn micro_batches(batch: usize, micro: Option<usize>) -> Vec<usize> {
    sizes(&micro_batch_runs(batch, micro))
}

/// [`micro_batches`] as runs of equal sizes.
pub(crate) fn micro_batch_runs(batch: usize, micro: Option<usize>) -> Vec<(usize, u64)> {
    parts(batch, micro.unwrap_or(batch).clamp(1, batch.max(1)))
}

/// `total` cut into parts of `part` (at least 1) from the start, the last one shorter
/// when `part` does not divide it, as `(size, how many)`.
fn parts(total: usize, part: usize) -> Vec<(usize, u64)> {
    let mut v = Vec::new();
    if total >= part {
        v.push((part, (total / part) as u64));
    }
    if total % part != 0 {
        v.push((total % part, 1));
    }
    v
}

/// The sizes of `runs`, each repeated its count.
fn sizes(runs: &[(usize, u64)]) -> Vec<usize> {
    runs.iter()
        .flat_map(|&(size, n)| std::iter::repeat_n(size, n as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::description::ModelDescription;
    use crate::options::{Job, TbpttMode, TrainOptions};

    /// `runs` with equal keys summed, in key order: what sums and distinct keys see.
    fn totals(runs: impl IntoIterator<Item = (ProgramKey, u64)>) -> Vec<(ProgramKey, u64)> {
        let mut m = std::collections::BTreeMap::new();
        for (k, n) in runs {
            *m.entry(k).or_insert(0) += n;
        }
        m.into_iter().collect()
    }

    #[test]
    fn runs_are_the_programs_counted_and_few_whatever_the_job() {
        let lm = ModelDescription::lstm_language_model(5, 4, 1);
        for model in [ModelDescription::seed(), lm] {
            for (tbptt, mode, chunk, micro) in [
                (3, TbpttMode::Last, 2, None),
                (3, TbpttMode::Windows, 4, Some(3)),
                (7, TbpttMode::Windows, 1, Some(1)),
                (50, TbpttMode::Last, 50, Some(2)),
            ] {
                let opts = TrainOptions {
                    tbptt,
                    tbptt_mode: mode,
                    chunk,
                    micro_batch: micro,
                    ..TrainOptions::default()
                };
                for (batch, steps) in [(1, 1), (5, 7), (8, 20), (3, 50)] {
                    let train = opts.train_programs(&model, batch, steps);
                    assert_eq!(expand(&opts.train_runs(&model, batch, steps)), train);
                    let eval = opts.eval_programs(&model, batch, steps);
                    let counted = opts.eval_runs(&model, batch, steps);
                    assert_eq!(totals(counted), totals(eval.iter().map(|&k| (k, 1))));
                }
            }
        }
        // 4096 micro-batches of 4096 one-step chunks: 16.7 million runs, two entries.
        let opts = TrainOptions {
            chunk: 1,
            micro_batch: Some(1),
            ..TrainOptions::default()
        };
        let job = Job::Eval {
            batch: 4096,
            seq_len: 4096,
        };
        let runs = opts.step_runs(&ModelDescription::seed(), job);
        assert_eq!(runs.len(), 2);
        assert_eq!(runs.iter().map(|r| r.1).sum::<u64>(), 4096 * 4096);
    }
}
