//! BatchNorm across ranks, as PyTorch's `SyncBatchNorm`: the statistics of the global
//! batch from each rank's shard, and the backward pass's per-channel sums.
//!
//! Forward: each rank computes its shard's per-channel (count, mean, biased variance) —
//! what a BatchNorm forward computes anyway — and the ranks exchange them (PyTorch
//! all-gathers mean, inverse std and count); every rank then merges them in rank order in
//! f64 (Chan, Golub & LeVeque's pairwise update), so all ranks get the same bytes and no
//! `E[x²] − mean²` cancellation. The gather is one all-reduce of a zero-filled
//! rank × (1 + 2·channels) buffer in which each rank fills its own row.
//!
//! Backward: the per-channel sums of dy and of dy·(x − mean) are summed over ranks (one
//! all-reduce, as PyTorch does) before each rank forms its shard's input gradient with
//! the global count.
//!
//! Training does not call these: BatchNorm sits in the head, so `tensorfit train` gathers
//! the head's input rows from every rank and runs the head over the global batch instead
//! (docs/distributed.md, "SyncBatchNorm"). These are the host side of a BatchNorm
//! collective inside a graph, should one be written.
use crate::{Communicator, DistError};

/// Per-channel statistics of a batch (a shard's, or the global batch's).
#[derive(Debug, Clone, PartialEq)]
pub struct BatchStats {
    /// Rows (samples) the statistics are over.
    pub count: usize,
    pub mean: Vec<f32>,
    /// Biased variance (divided by `count`), the one that normalises.
    pub var: Vec<f32>,
}

impl BatchStats {
    /// The statistics of `x`, `rows × channels` in row-major order (a host shard).
    pub fn of(x: &[f32], channels: usize) -> Result<Self, DistError> {
        if channels == 0 || !x.len().is_multiple_of(channels) {
            return Err(DistError::Layout {
                what: "BatchNorm input",
                detail: format!("{} values are not rows of {channels} channels", x.len()),
            });
        }
        let count = x.len() / channels;
        let mut mean = vec![0.0f64; channels];
        for row in x.chunks_exact(channels) {
            for (m, &v) in mean.iter_mut().zip(row) {
                *m += v as f64;
            }
        }
        mean.iter_mut().for_each(|m| *m /= count.max(1) as f64);
        let mut m2 = vec![0.0f64; channels];
        for row in x.chunks_exact(channels) {
            for ((s, &v), &m) in m2.iter_mut().zip(row).zip(&mean) {
                *s += (v as f64 - m).powi(2);
            }
        }
        Ok(BatchStats {
            count,
            mean: mean.iter().map(|&m| m as f32).collect(),
            var: m2
                .iter()
                .map(|&s| (s / count.max(1) as f64) as f32)
                .collect(),
        })
    }

    /// The unbiased variance (divided by `count − 1`) that running statistics track.
    pub fn unbiased_var(&self) -> Vec<f32> {
        let n = self.count as f64;
        let scale = if self.count > 1 { n / (n - 1.0) } else { 1.0 };
        self.var
            .iter()
            .map(|&v| (v as f64 * scale) as f32)
            .collect()
    }
}

/// Rows a rank may count: the count travels as an `f32`, exact up to 2^24.
const MAX_ROWS: usize = 1 << 24;

/// The global batch's statistics from this rank's `local` ones; called by every rank
/// with the same number of channels (a rank with an empty shard passes `count` 0).
pub fn sync_batch_stats(
    comm: &mut dyn Communicator,
    local: &BatchStats,
) -> Result<BatchStats, DistError> {
    let channels = local.mean.len();
    if local.var.len() != channels || local.count > MAX_ROWS {
        return Err(DistError::Layout {
            what: "SyncBatchNorm statistics",
            detail: format!(
                "{} means, {} variances over {} rows (at most {MAX_ROWS} rows per rank)",
                channels,
                local.var.len(),
                local.count
            ),
        });
    }
    let row = 1 + 2 * channels;
    let mut table = vec![0.0f32; comm.size() * row];
    let mine = &mut table[comm.rank() * row..][..row];
    mine[0] = local.count as f32;
    mine[1..=channels].copy_from_slice(&local.mean);
    mine[1 + channels..].copy_from_slice(&local.var);
    comm.all_reduce_sum(&mut table)?;

    let mut count = 0.0f64;
    let mut mean = vec![0.0f64; channels];
    let mut m2 = vec![0.0f64; channels];
    for rank in table.chunks_exact(row) {
        let n = rank[0] as f64;
        if n == 0.0 {
            continue;
        }
        let total = count + n;
        for c in 0..channels {
            let (m, v) = (rank[1 + c] as f64, rank[1 + channels + c] as f64);
            let delta = m - mean[c];
            m2[c] += n * v + delta * delta * count * n / total;
            mean[c] += delta * n / total;
        }
        count = total;
    }
    if count == 0.0 {
        return Err(DistError::Layout {
            what: "SyncBatchNorm statistics",
            detail: "every rank's shard is empty".into(),
        });
    }
    Ok(BatchStats {
        count: count as usize,
        mean: mean.iter().map(|&m| m as f32).collect(),
        var: m2.iter().map(|&s| (s / count) as f32).collect(),
    })
}

/// Sums the backward pass's per-channel `sum_dy` and `sum_dy_xmu` (Σ dy·(x − mean))
/// over ranks, in place.
pub fn sync_backward_sums(
    comm: &mut dyn Communicator,
    sum_dy: &mut [f32],
    sum_dy_xmu: &mut [f32],
) -> Result<(), DistError> {
    let channels = sum_dy.len();
    if sum_dy_xmu.len() != channels {
        return Err(DistError::Layout {
            what: "SyncBatchNorm backward sums",
            detail: format!(
                "{channels} sums of dy but {} of dy·(x − mean)",
                sum_dy_xmu.len()
            ),
        });
    }
    let mut both = [&*sum_dy, &*sum_dy_xmu].concat();
    comm.all_reduce_sum(&mut both)?;
    sum_dy.copy_from_slice(&both[..channels]);
    sum_dy_xmu.copy_from_slice(&both[channels..]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solo;

    #[test]
    fn one_rank_gets_back_its_own_statistics() {
        let x = [1.0f32, 10.0, 3.0, 20.0, 5.0, 60.0];
        let local = BatchStats::of(&x, 2).unwrap();
        assert_eq!(local.count, 3);
        assert_eq!(local.mean, [3.0, 30.0]);
        assert_eq!(local.var, [8.0 / 3.0, 1400.0 / 3.0]);
        assert_eq!(local.unbiased_var(), [4.0, 700.0]);
        assert_eq!(sync_batch_stats(&mut Solo, &local).unwrap(), local);
    }

    #[test]
    fn a_batch_that_is_not_whole_rows_is_refused_with_its_sizes() {
        let err = BatchStats::of(&[1.0; 5], 2).unwrap_err();
        assert!(
            err.to_string().contains("5 values are not rows of 2"),
            "{err}"
        );
    }

    #[test]
    fn backward_sums_of_mismatched_lengths_are_refused() {
        let err = sync_backward_sums(&mut Solo, &mut [0.0; 2], &mut [0.0; 3]).unwrap_err();
        assert!(err.to_string().contains("2 sums of dy but 3"), "{err}");
    }
}
