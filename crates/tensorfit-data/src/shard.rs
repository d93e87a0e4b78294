//! Each rank's share of the batches when several processes train one model
//! data-parallel (`mpirun -np N tensorfit train --data`, docs/distributed.md): every rank
//! makes the same epoch order of global batches from the same seed, and reads only its
//! rows of each, so that N ranks × their rows are exactly one process's batch. Validation
//! is shared out by whole batches instead, so that each batch is scored as one process
//! scores it and the ranks only sum their totals.

use std::ops::Range;

/// One rank of `ranks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub rank: usize,
    pub ranks: usize,
}

/// A rank's part of one global batch: the sequences it reads, and which rows of the
/// global batch they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankBatch {
    /// The sequence indices to read: the rows `rows` of the global batch, or, when the
    /// global batch has fewer rows than there are ranks and this rank gets none, the
    /// global batch's first sequence as a stand-in (a program needs a row to run; a rank
    /// without rows counts for nothing in the average, see `rows`).
    pub indices: Vec<usize>,
    /// This rank's rows of the global batch (empty for a stand-in).
    pub rows: Range<usize>,
    /// Rows of the global batch.
    pub global: usize,
}

impl Shard {
    /// The rows of a global batch of `batch` that this rank trains on: contiguous, the
    /// first `batch % ranks` ranks one row more (10 rows on 3 ranks: 4, 3, 3).
    pub fn rows(&self, batch: usize) -> Range<usize> {
        let ranks = self.ranks.max(1);
        let (base, extra) = (batch / ranks, batch % ranks);
        let start = self.rank * base + self.rank.min(extra);
        start..start + base + usize::from(self.rank < extra)
    }

    /// This rank's part of the global batch `batch` (sequence indices).
    pub fn of_batch(&self, batch: &[usize]) -> RankBatch {
        let rows = self.rows(batch.len());
        let indices = match batch.get(rows.clone()) {
            Some(mine) if !mine.is_empty() => mine.to_vec(),
            _ => batch.iter().take(1).copied().collect(),
        };
        RankBatch {
            indices,
            rows,
            global: batch.len(),
        }
    }

    /// This rank's part of every global batch of `order`, in order.
    pub fn of_order(&self, order: &[Vec<usize>]) -> Vec<RankBatch> {
        order.iter().map(|b| self.of_batch(b)).collect()
    }

    /// The whole batches of `order` this rank evaluates: batches `rank`, `rank + ranks`,
    /// … (a rank gets none when there are fewer batches than ranks).
    pub fn whole_batches(&self, order: &[Vec<usize>]) -> Vec<Vec<usize>> {
        order
            .iter()
            .skip(self.rank)
            .step_by(self.ranks.max(1))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards(ranks: usize) -> Vec<Shard> {
        (0..ranks).map(|rank| Shard { rank, ranks }).collect()
    }

    #[test]
    fn the_ranks_rows_of_a_batch_put_together_in_rank_order_are_the_batch() {
        let batch: Vec<usize> = vec![7, 3, 9, 1, 4, 8, 2, 6];
        for ranks in 1..=5 {
            let parts: Vec<RankBatch> = shards(ranks).iter().map(|s| s.of_batch(&batch)).collect();
            let joined: Vec<usize> = parts.iter().flat_map(|p| p.indices.clone()).collect();
            assert_eq!(joined, batch, "{ranks} ranks");
            assert!(parts.iter().all(|p| p.global == 8));
        }
        let rows: Vec<Range<usize>> = shards(3).iter().map(|s| s.rows(10)).collect();
        assert_eq!(rows, [0..4, 4..7, 7..10]);
    }

    #[test]
    fn a_rank_without_rows_in_a_short_batch_reads_a_stand_in_and_owns_no_rows() {
        let parts: Vec<RankBatch> = shards(3).iter().map(|s| s.of_batch(&[5, 2])).collect();
        assert_eq!(parts[0].indices, [5]);
        assert_eq!(parts[1].indices, [2]);
        assert_eq!(parts[2].indices, [5]);
        assert!(parts[2].rows.is_empty());
        assert_eq!(parts[0].rows, 0..1);
    }

    #[test]
    fn validation_batches_are_dealt_out_whole_in_turn() {
        let order: Vec<Vec<usize>> = (0..5).map(|b| vec![b * 10, b * 10 + 1]).collect();
        let dealt: Vec<Vec<Vec<usize>>> =
            shards(2).iter().map(|s| s.whole_batches(&order)).collect();
        assert_eq!(
            dealt[0],
            [order[0].clone(), order[2].clone(), order[4].clone()]
        );
        assert_eq!(dealt[1], [order[1].clone(), order[3].clone()]);
        assert!(Shard { rank: 6, ranks: 7 }.whole_batches(&order).is_empty());
    }
}
