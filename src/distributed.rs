//! Data-parallel training over the ranks of one launch (`mpirun -np N tensorfit train`;
//! docs/distributed.md): every rank draws the same global batch, trains on its shard of
//! the rows, and the step is split at its gradients ([`TrainOptions::split_update`]), which
//! [`Ranks`] averages over the ranks, weighted by their rows, before each rank runs the
//! same update. Ranks on one kind of device therefore hold the same weights after every
//! step, which [`Ranks::check_same_weights`] verifies. Ranks on different kinds (a wgpu
//! rank and a CPU rank) round the same update differently, so after each step of such a
//! mix every rank takes rank 0's training state ([`Ranks::align`]).
//!
//! [`TrainOptions::split_update`]: tensorfit_nn::TrainOptions::split_update

use std::ops::Range;
use std::time::{Duration, Instant};

use tensorfit_core::{DeviceKind, Error, HostTensor, Result};
use tensorfit_dist::{Communicator, DistError, GradientBucket};
use tensorfit_nn::trainer::GradientExchange;
use tensorfit_nn::{HeadLayerKind, ModelDescription, ParamStore, Trainer};

/// The kinds of device a rank may train on, as counted in each step's exchange.
const KINDS: [DeviceKind; 3] = [DeviceKind::Cpu, DeviceKind::Wgpu, DeviceKind::Cuda];

/// Host copies of a step's gradients while they are averaged: the copy read from the
/// device, the flat bucket, and the MPI communicator's send and receive staging. The
/// plan's host section counts this many × 4 bytes per trainable parameter.
const GRADIENT_HOST_COPIES: u64 = 4;

/// Host copies of the gathered head inputs with synchronised BatchNorm: the gathered
/// table, MPI's send and receive staging, and the head program's inputs split from it.
const GATHER_HOST_COPIES: u64 = 4;

/// What the planner knows of a data-parallel run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataParallel {
    /// The number of ranks.
    pub ranks: usize,
    /// The global batch, shared out among the ranks ([`shard`]).
    pub batch: usize,
}

impl DataParallel {
    /// The global batch over which a model with BatchNorm normalises, when it has any.
    pub fn sync_batch_norm(&self, cfg: &ModelDescription) -> Option<usize> {
        let has = cfg
            .head
            .layers
            .iter()
            .any(|l| l.kind == HeadLayerKind::BatchNorm);
        has.then_some(self.batch)
    }

    /// The host bytes of one step's communication: the gradients' copies
    /// (`GRADIENT_HOST_COPIES`) and, with BatchNorm, the gathered rows of the head's
    /// input and targets (`GATHER_HOST_COPIES`).
    pub fn host_bytes(&self, cfg: &ModelDescription) -> Result<u64> {
        let grads = tensorfit_dist::bucket_bytes(cfg.trainable_parameters()?);
        let gathered = self.sync_batch_norm(cfg).map_or(0, |b| {
            let width = cfg.recurrent.hidden + cfg.loss.targets_per_row();
            (b * width * 4) as u64 * GATHER_HOST_COPIES
        });
        Ok(grads
            .saturating_mul(GRADIENT_HOST_COPIES)
            .saturating_add(gathered))
    }
}

fn dist_error(e: DistError) -> Error {
    Error::input(format!("data-parallel training: {e}"))
}

/// The rows of a global batch of `batch` that `rank` of `ranks` trains on: contiguous,
/// the first `batch % ranks` ranks one row more (10 rows on 3 ranks: 4, 3, 3).
pub fn shard(batch: usize, rank: usize, ranks: usize) -> Range<usize> {
    let ranks = ranks.max(1);
    let (base, extra) = (batch / ranks, batch % ranks);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

/// Rows `rows` of a batch: `x` `[T, B, …]` (dense `[T, B, F]` or token ids `[T, B]`)
/// and its targets, `per_row` per row.
pub fn shard_rows(
    x: &HostTensor,
    targets: &[f32],
    per_row: usize,
    rows: Range<usize>,
) -> Result<(HostTensor, Vec<f32>)> {
    let dims = x.shape.dims();
    let (Some(&steps), Some(&batch)) = (dims.first(), dims.get(1)) else {
        return Err(Error::input(format!(
            "a batch to shard is [time, batch, ...], got {}",
            x.shape
        )));
    };
    if rows.end > batch || targets.len() != batch * per_row {
        return Err(Error::input(format!(
            "rows {rows:?} of a batch of {batch} rows with {} targets ({per_row} per row)",
            targets.len()
        )));
    }
    let width: usize = dims[2..].iter().product();
    let mut data = Vec::with_capacity(steps * rows.len() * width);
    for t in 0..steps {
        let at = (t * batch + rows.start) * width;
        data.extend_from_slice(&x.data[at..at + rows.len() * width]);
    }
    let mut shape = dims.to_vec();
    shape[1] = rows.len();
    let x = HostTensor::new(shape.as_slice(), data)?;
    Ok((
        x,
        targets[rows.start * per_row..rows.end * per_row].to_vec(),
    ))
}

/// This process's place among the ranks, and the averaging of each step's gradients.
#[derive(Debug)]
pub struct Ranks {
    comm: Box<dyn Communicator>,
    /// The global batch: the rows every rank's gradients are weighted against.
    batch: usize,
    bucket: Option<GradientBucket>,
    /// The last step averaged and its results: a step repeated after a device failure
    /// (the session's fallback) takes them again instead of a second all-reduce, which
    /// the other ranks, already past it, would pair with their next step's.
    averaged: Option<(u64, Vec<Vec<f32>>, f32)>,
    /// The last step's gathered rows (synchronised BatchNorm), kept for a repeated step
    /// as `averaged` is.
    gathered: Option<(u64, Vec<f32>)>,
    /// The kind of device this rank's step runs on (set before each step).
    device: Option<DeviceKind>,
    /// Whether the ranks of the last exchange ran on more than one kind of device.
    mixed: bool,
    /// Time spent in collectives so far (waiting for the other ranks included).
    communication: Duration,
}

impl Ranks {
    /// `comm`'s ranks training on shards of a global batch of `batch` rows; every rank
    /// needs at least one row.
    pub fn new(comm: Box<dyn Communicator>, batch: usize) -> Result<Ranks> {
        if batch < comm.size() {
            return Err(Error::input(format!(
                "--batch {batch} is the global batch, shared by {} ranks: it must be at least one row per rank",
                comm.size()
            )));
        }
        Ok(Ranks {
            comm,
            batch,
            bucket: None,
            averaged: None,
            gathered: None,
            device: None,
            mixed: false,
            communication: Duration::ZERO,
        })
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// The run as the planner sees it.
    pub fn data_parallel(&self) -> DataParallel {
        DataParallel {
            ranks: self.size(),
            batch: self.batch,
        }
    }

    /// This rank's rows of each global batch.
    pub fn rows(&self) -> Range<usize> {
        shard(self.batch, self.rank(), self.size())
    }

    /// The communicator, for the run's other collectives (a barrier before rank 0
    /// writes a checkpoint).
    pub fn comm(&mut self) -> &mut dyn Communicator {
        self.comm.as_mut()
    }

    /// Time spent in the training steps' collectives so far, waiting for the other ranks
    /// included.
    pub fn communication(&self) -> Duration {
        self.communication
    }

    /// The device this rank's next step runs on, counted in its exchange.
    pub fn set_device(&mut self, kind: DeviceKind) {
        self.device = Some(kind);
    }

    /// Whether the last step's ranks ran on more than one kind of device (their weights
    /// then differ by rounding until [`Ranks::align`]).
    pub fn devices_differ(&self) -> bool {
        self.mixed
    }

    /// Copies rank 0's parameters, running statistics and optimizer state into every
    /// rank's `trainer`: after a step of ranks on different devices, so that all go on
    /// from the same weights.
    pub fn align(&mut self, trainer: &mut Trainer) -> Result<()> {
        let mut ck = trainer.checkpoint()?;
        let start = Instant::now();
        for (_, t) in ck.params.iter_mut().chain(ck.optimizer.iter_mut()) {
            self.comm
                .broadcast_f32(&mut t.data, 0)
                .map_err(dist_error)?;
        }
        self.communication += start.elapsed();
        trainer.restore_state(&ck)
    }

    /// Fails unless every rank holds the same `params` bit for bit; returns their hash.
    pub fn check_same_weights(&mut self, params: &ParamStore, step: u64) -> Result<u64> {
        let mine = weights_hash(params);
        let mut root = mine.to_le_bytes();
        self.comm
            .broadcast_bytes(&mut root, 0)
            .map_err(dist_error)?;
        // Every rank learns whether any differs, so that all stop together.
        let mut differs = [f32::from(u8::from(u64::from_le_bytes(root) != mine))];
        self.comm.all_reduce_sum(&mut differs).map_err(dist_error)?;
        if differs[0] > 0.0 {
            return Err(Error::input(format!(
                "after step {step}, the weights of {} of {} ranks differ from rank 0's (this rank's hash {mine:016x}, rank 0's {:016x})",
                differs[0],
                self.size(),
                u64::from_le_bytes(root)
            )));
        }
        Ok(mine)
    }
}

/// FNV-1a over the parameters' names and the bits of their values, in name order.
pub fn weights_hash(params: &ParamStore) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, t) in params.iter() {
        eat(name.as_bytes());
        for v in &t.data {
            eat(&v.to_bits().to_le_bytes());
        }
    }
    h
}

impl GradientExchange for Ranks {
    /// Replaces this rank's mean gradients and loss over its rows by the means over the
    /// global batch: each rank's weighted by its share of the rows, so that uneven shards
    /// give what one process with the whole batch computes.
    fn exchange(&mut self, step: u64, grads: &mut [Vec<f32>], loss: &mut f32) -> Result<()> {
        if let Some((_, g, l)) = self.averaged.as_ref().filter(|(s, ..)| *s == step) {
            for (out, avg) in grads.iter_mut().zip(g) {
                out.copy_from_slice(avg);
            }
            *loss = *l;
            return Ok(());
        }
        // `average` divides the sum by the number of ranks; a rank of `rows` rows counts
        // rows · ranks / batch times its mean (exactly 1 for even shards).
        let weight = (self.rows().len() * self.size()) as f32 / self.batch as f32;
        let mut loss_slot = [*loss * weight];
        // One-hot of this rank's device kind: averaged, one kind reads 1 on every rank
        // exactly when all ranks ran on it.
        let mut kinds = KINDS.map(|k| f32::from(u8::from(self.device == Some(k))));
        let bucket = self.bucket.get_or_insert_with(|| {
            let mut sizes: Vec<usize> = grads.iter().map(Vec::len).collect();
            sizes.extend([1, KINDS.len()]);
            GradientBucket::new(sizes)
        });
        let mut slices: Vec<&mut [f32]> = Vec::with_capacity(grads.len() + 1);
        for g in grads.iter_mut() {
            if weight != 1.0 {
                g.iter_mut().for_each(|v| *v *= weight);
            }
            slices.push(g);
        }
        slices.push(&mut loss_slot);
        slices.push(&mut kinds);
        let start = Instant::now();
        bucket
            .average(self.comm.as_mut(), &mut slices)
            .map_err(dist_error)?;
        self.communication += start.elapsed();
        *loss = loss_slot[0];
        self.mixed = !kinds.contains(&1.0);
        self.averaged = Some((step, grads.to_vec(), *loss));
        Ok(())
    }

    /// Every rank's rows in rank order: one all-reduce of a zero-filled table in which
    /// each rank fills its own rows (exact: every other rank adds zeros).
    fn gather_rows(
        &mut self,
        step: u64,
        mine: &[f32],
        width: usize,
    ) -> Result<(Vec<f32>, Range<usize>)> {
        let rows = self.rows();
        if mine.len() != rows.len() * width {
            return Err(Error::input(format!(
                "rank {} gathers {} values for its {} rows of {width}",
                self.rank(),
                mine.len(),
                rows.len()
            )));
        }
        if let Some((_, all)) = self.gathered.as_ref().filter(|(s, _)| *s == step) {
            return Ok((all.clone(), rows));
        }
        let mut all = vec![0.0; self.batch * width];
        all[rows.start * width..rows.end * width].copy_from_slice(mine);
        let start = Instant::now();
        self.comm.all_reduce_sum(&mut all).map_err(dist_error)?;
        self.communication += start.elapsed();
        self.gathered = Some((step, all.clone()));
        Ok((all, rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_dist::Solo;

    #[test]
    fn shards_cover_the_batch_in_order_with_the_first_ranks_one_row_longer() {
        let rows: Vec<Range<usize>> = (0..3).map(|r| shard(10, r, 3)).collect();
        assert_eq!(rows, [0..4, 4..7, 7..10]);
        assert_eq!(shard(8, 1, 2), 4..8);
        assert_eq!(shard(5, 0, 1), 0..5);
    }

    #[test]
    fn a_shard_holds_its_rows_of_every_step_and_their_targets() {
        // [T=2, B=3, F=2]: value = 100 t + 10 b + f.
        let data = (0..2)
            .flat_map(|t| {
                (0..3).flat_map(move |b| (0..2).map(move |f| (100 * t + 10 * b + f) as f32))
            })
            .collect();
        let x = HostTensor::new([2, 3, 2], data).unwrap();
        let (got, targets) = shard_rows(&x, &[0.0, 1.0, 2.0], 1, 1..3).unwrap();
        assert_eq!(got.shape.dims(), [2, 2, 2]);
        assert_eq!(
            got.data,
            [10.0, 11.0, 20.0, 21.0, 110.0, 111.0, 120.0, 121.0]
        );
        assert_eq!(targets, [1.0, 2.0]);
        let err = shard_rows(&x, &[0.0; 3], 1, 2..4).unwrap_err();
        assert!(
            err.to_string().contains("rows 2..4 of a batch of 3"),
            "{err}"
        );
    }

    #[test]
    fn one_rank_keeps_its_gradients_and_a_repeated_step_gets_the_same_average() {
        let mut ranks = Ranks::new(Box::new(Solo), 4).unwrap();
        let mut grads = vec![vec![1.0f32, -2.0], vec![0.5]];
        let mut loss = 0.25;
        ranks.exchange(1, &mut grads, &mut loss).unwrap();
        assert_eq!(
            (grads.clone(), loss),
            (vec![vec![1.0, -2.0], vec![0.5]], 0.25)
        );
        let (mut again, mut l) = (vec![vec![9.0f32, 9.0], vec![9.0]], 9.0);
        ranks.exchange(1, &mut again, &mut l).unwrap();
        assert_eq!((again, l), (grads, 0.25));
    }

    #[test]
    fn a_global_batch_smaller_than_the_ranks_is_refused_naming_the_flag() {
        #[derive(Debug)]
        struct Three;
        impl Communicator for Three {
            fn rank(&self) -> usize {
                0
            }
            fn size(&self) -> usize {
                3
            }
            fn all_reduce_sum(&mut self, _: &mut [f32]) -> std::result::Result<(), DistError> {
                Ok(())
            }
            fn broadcast_bytes(
                &mut self,
                _: &mut [u8],
                _: usize,
            ) -> std::result::Result<(), DistError> {
                Ok(())
            }
            fn broadcast_f32(
                &mut self,
                _: &mut [f32],
                _: usize,
            ) -> std::result::Result<(), DistError> {
                Ok(())
            }
            fn barrier(&mut self) -> std::result::Result<(), DistError> {
                Ok(())
            }
        }
        let err = Ranks::new(Box::new(Three), 2).unwrap_err();
        assert!(
            err.to_string()
                .contains("--batch 2 is the global batch, shared by 3 ranks"),
            "{err}"
        );
    }

    #[test]
    fn the_weights_hash_sees_a_single_bit() {
        let mut a = ParamStore::new();
        a.insert("w", HostTensor::new([2], vec![1.0, 2.0]).unwrap());
        let mut b = a.clone();
        let h = weights_hash(&a);
        b.iter_mut()
            .for_each(|(_, t)| t.data[1] = f32::from_bits(2.0f32.to_bits() + 1));
        assert_ne!(h, weights_hash(&b));
        assert_eq!(
            Ranks::new(Box::new(Solo), 1)
                .unwrap()
                .check_same_weights(&a, 1)
                .unwrap(),
            h
        );
    }
}
