//! [`Ranks`]: this process's place among the ranks, and each step's exchange — the
//! gradients and loss averaged, weighted by what each rank's mean is over, with the
//! ranks' device kinds and stop requests in the same all-reduce.

use std::ops::Range;
use std::time::{Duration, Instant};

use tensorfit_core::{DeviceKind, Error, Result};
use tensorfit_data::Shard;
use tensorfit_dist::{agree_path, AllReducePath, Communicator, DistError, GradientBucket};
use tensorfit_nn::trainer::GradientExchange;
use tensorfit_nn::{ParamStore, Trainer};

use super::{dist_error, weights_hash, DataParallel};
use crate::devices::parse_id;
use crate::registry;

/// The signals a rank may ask to stop for (SIGINT, SIGTERM, SIGHUP), counted in each
/// step's exchange; the ranks agree on the one most of them received (ties: the first
/// here). Any other number counts as the first.
const STOP_SIGNALS: [i32; 3] = [2, 15, 1];

/// What one step's exchange agreed on, kept for a repeated step.
#[derive(Debug, Clone)]
struct Averaged {
    step: u64,
    grads: Vec<Vec<f32>>,
    loss: f32,
    stop: Option<i32>,
}

/// This process's place among the ranks, and the averaging of each step's gradients.
#[derive(Debug)]
pub struct Ranks {
    comm: Box<dyn Communicator>,
    /// The global batch: the rows every rank's gradients are weighted against.
    batch: usize,
    /// The next step's global batch and what this rank's mean is over ([`Ranks::set_step`]);
    /// `None`: the rows of a global batch of `batch`.
    step_share: Option<(usize, usize)>,
    bucket: Option<GradientBucket>,
    /// The last step averaged and its results: a step repeated after a device failure
    /// (the session's fallback) takes them again instead of a second all-reduce, which
    /// the other ranks, already past it, would pair with their next step's.
    averaged: Option<Averaged>,
    /// The last step's gathered rows (synchronised BatchNorm), kept for a repeated step
    /// as `averaged` is.
    gathered: Option<(u64, Vec<f32>)>,
    /// The kind of device this rank's step runs on (set before each step).
    device: Option<DeviceKind>,
    /// Whether the ranks of the last exchange ran on more than one kind of device.
    mixed: bool,
    /// The signal this rank received, to be told to the others at the next exchange.
    stop_asked: Option<i32>,
    /// Communication time so far (waiting for the other ranks included).
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
            step_share: None,
            bucket: None,
            averaged: None,
            gathered: None,
            device: None,
            mixed: false,
            stop_asked: None,
            communication: Duration::ZERO,
        })
    }

    /// Checks with every other rank that each of `settings` (a name as messages say it,
    /// and its value as text) is the same on all. When they are not, every rank gets the
    /// same message, naming each setting that differs and the ranks of each value (an
    /// error is a failed exchange). Before any other collective: ranks that differ may
    /// call them with buffers of other lengths.
    pub fn agree(&mut self, settings: &[(&str, String)]) -> Result<Option<String>> {
        match tensorfit_dist::agree(self.comm.as_mut(), settings) {
            Ok(()) => Ok(None),
            Err(e @ DistError::Disagree(_)) => Ok(Some(e.to_string())),
            Err(e) => Err(dist_error(e)),
        }
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// This rank among the ranks, as the data pipeline shares out batches.
    pub fn shard(&self) -> Shard {
        Shard {
            rank: self.rank(),
            ranks: self.size(),
        }
    }

    /// The run as the planner sees it.
    pub fn data_parallel(&self) -> DataParallel {
        DataParallel {
            ranks: self.size(),
            batch: self.batch,
        }
    }

    /// This rank's rows of the next step's global batch.
    pub fn rows(&self) -> Range<usize> {
        let global = self.step_share.map_or(self.batch, |(g, _)| g);
        self.shard().rows(global)
    }

    /// The next step's global batch has `global` rows (batches of a file differ), and
    /// this rank's loss is a mean over `units`: its rows, or for a head on every step the
    /// steps its labels count (0 for a rank that only holds a stand-in row). The exchange
    /// weighs each rank's means by its units.
    pub fn set_step(&mut self, global: usize, units: usize) {
        self.step_share = Some((global, units));
    }

    /// The communicator, for the run's other collectives (a barrier before rank 0
    /// writes a checkpoint).
    pub fn comm(&mut self) -> &mut dyn Communicator {
        self.comm.as_mut()
    }

    /// Communication time so far (the steps' collectives and the validations' sums),
    /// waiting for the other ranks included.
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

    /// This rank received `signal` (its number): the next exchange tells every rank, and
    /// all stop after that step ([`Ranks::agreed_stop`]).
    pub fn ask_stop(&mut self, signal: i32) {
        self.stop_asked.get_or_insert(signal);
    }

    /// The signal the ranks agreed to stop for at the last exchange, if any rank asked.
    pub fn agreed_stop(&self) -> Option<i32> {
        self.averaged.as_ref().and_then(|a| a.stop)
    }

    /// Sums `values` over the ranks (a validation's totals), counted as communication.
    pub fn sum(&mut self, values: &mut [f32]) -> Result<()> {
        let start = Instant::now();
        self.comm.all_reduce_sum(values).map_err(dist_error)?;
        self.communication += start.elapsed();
        Ok(())
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

    /// Chooses, with every other rank, how the gradient bucket is summed: over NCCL on
    /// the GPUs when every rank trains on CUDA and can use NCCL, else over the host
    /// communicator. `device` is this rank's (`cuda:1`). A collective call.
    pub fn choose_all_reduce(&mut self, device: &str) -> Result<AllReducePath> {
        let (kind, ordinal) = parse_id(device).unwrap_or((DeviceKind::Cpu, 0));
        let path = agree_path(self.comm.as_mut(), kind == DeviceKind::Cuda).map_err(dist_error)?;
        // Without the `cuda` feature no rank trains on CUDA, and the path is the host's.
        #[cfg(feature = "cuda")]
        if path == AllReducePath::Nccl {
            let host = std::mem::replace(&mut self.comm, Box::new(tensorfit_dist::Solo));
            let nccl = tensorfit_dist::NcclCommunicator::join(host, ordinal);
            self.comm = Box::new(nccl.map_err(dist_error)?);
        }
        #[cfg(not(feature = "cuda"))]
        let _ = ordinal;
        Ok(path)
    }

    /// After this rank's last step: tells the others that it ended, in an exchange as long
    /// as a step's (a rank still stepping gets it in its step's exchange, and fails naming
    /// this rank, instead of waiting for an exchange that never comes); fails when any
    /// rank went on stepping. `trainable`: the model's trainable parameters, the
    /// gradients' length when this rank took no step. (A rank whose next collective is
    /// another — the gathered rows of BatchNorm, a validation's sums — is not reached:
    /// the ranks' start-up agreement on the run's length is what prevents that.)
    pub fn end(&mut self, trainable: usize) -> Result<()> {
        let size = self.size();
        let len = match &self.bucket {
            Some(b) => b.len(),
            None => trainable + slot_sizes(size).iter().sum::<usize>(),
        };
        let mut all = vec![0.0; len];
        all[len - size + self.rank()] = 1.0;
        let start = Instant::now();
        self.comm.all_reduce_sum(&mut all).map_err(dist_error)?;
        self.communication += start.elapsed();
        let ended = &all[len - size..];
        let went_on: Vec<f32> = ended
            .iter()
            .map(|&e| f32::from(u8::from(e == 0.0)))
            .collect();
        let went_on = ranks_in(&went_on);
        if !went_on.is_empty() {
            return Err(Error::input(format!(
                "{went_on} went on to another step after the last step of rank {}: the ranks disagree on the run's length (no rank died)",
                self.rank()
            )));
        }
        Ok(())
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

/// The lengths of the values a step's exchange holds after the gradients: the loss, the
/// units, the device kinds, the stop signals, and one for each of `ranks` that ended.
fn slot_sizes(ranks: usize) -> [usize; 5] {
    [
        1,
        1,
        registry::built_in_kinds().len(),
        STOP_SIGNALS.len(),
        ranks,
    ]
}

/// The ranks whose value in `flags` (one per rank) is not 0: "rank 1", "ranks 0, 2"; empty
/// when none.
fn ranks_in(flags: &[f32]) -> String {
    let ranks: Vec<String> = (0..flags.len())
        .filter(|&r| flags[r] != 0.0)
        .map(|r| r.to_string())
        .collect();
    match ranks.len() {
        0 => String::new(),
        1 => format!("rank {}", ranks[0]),
        _ => format!("ranks {}", ranks.join(", ")),
    }
}

/// The signal most ranks asked to stop for, from the averaged counts of each (ties: the
/// first of [`STOP_SIGNALS`]); `None` when none asked.
fn agreed_signal(counts: &[f32]) -> Option<i32> {
    let (best, &count) = counts
        .iter()
        .enumerate()
        .rev()
        .max_by(|a, b| a.1.total_cmp(b.1))?;
    (count > 0.0).then_some(STOP_SIGNALS[best])
}

impl GradientExchange for Ranks {
    /// Replaces this rank's mean gradients and loss by the means over the global batch:
    /// each rank's weighted by its units (rows, or counted steps), so that uneven shards
    /// give what one process with the whole batch computes.
    fn exchange(&mut self, step: u64, grads: &mut [Vec<f32>], loss: &mut f32) -> Result<()> {
        if let Some(a) = self.averaged.as_ref().filter(|a| a.step == step) {
            for (out, avg) in grads.iter_mut().zip(&a.grads) {
                out.copy_from_slice(avg);
            }
            *loss = a.loss;
            return Ok(());
        }
        let units = self
            .step_share
            .map_or(self.rows().len(), |(_, units)| units) as f32;
        let mut loss_slot = [*loss * units];
        let mut units_slot = [units];
        // One-hot of this rank's device kind over tensorfit's own kinds (every rank's build
        // lists them, built or not, in the same order; a provider one process registered
        // is not in it, so the ranks' slots stay the same size and such a device counts
        // as mixed): averaged, one kind reads 1 on every rank exactly when all ran on it.
        let mut kinds: Vec<f32> = registry::built_in_kinds()
            .into_iter()
            .map(|k| f32::from(u8::from(self.device == Some(k))))
            .collect();
        let asked = self.stop_asked.take();
        let mut stops = STOP_SIGNALS.map(|s| f32::from(u8::from(asked == Some(s))));
        if asked.is_some_and(|s| !STOP_SIGNALS.contains(&s)) {
            stops[0] = 1.0;
        }
        // A rank that ended its run says so in the last values ([`Ranks::end`]); a rank
        // that steps leaves them 0.
        let mut ended = vec![0.0; self.size()];
        let bucket = self.bucket.get_or_insert_with(|| {
            let mut sizes: Vec<usize> = grads.iter().map(Vec::len).collect();
            sizes.extend(slot_sizes(ended.len()));
            GradientBucket::new(sizes)
        });
        let mut slices: Vec<&mut [f32]> = Vec::with_capacity(grads.len() + 5);
        for g in grads.iter_mut() {
            if units != 1.0 {
                g.iter_mut().for_each(|v| *v *= units);
            }
            slices.push(g);
        }
        slices.extend([
            &mut loss_slot[..],
            &mut units_slot[..],
            &mut kinds[..],
            &mut stops[..],
            &mut ended[..],
        ]);
        let start = Instant::now();
        bucket
            .average(self.comm.as_mut(), &mut slices)
            .map_err(dist_error)?;
        self.communication += start.elapsed();
        let gone = ranks_in(&ended);
        if !gone.is_empty() {
            return Err(Error::input(format!(
                "{gone} ended its run (its last step done) while rank {} went on to step {step}: the ranks disagree on the run's length (no rank died)",
                self.rank()
            )));
        }
        // Both are averaged over the ranks: their quotient is the weighted mean. Ranks
        // that all count nothing (every label ignored) give a zero gradient.
        let total = units_slot[0];
        let divide = |v: &mut f32| *v = if total > 0.0 { *v / total } else { 0.0 };
        grads.iter_mut().flatten().for_each(divide);
        divide(&mut loss_slot[0]);
        *loss = loss_slot[0];
        self.mixed = !kinds.contains(&1.0);
        self.averaged = Some(Averaged {
            step,
            grads: grads.to_vec(),
            loss: *loss,
            stop: agreed_signal(&stops),
        });
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
        let global = self.step_share.map_or(self.batch, |(g, _)| g);
        if rows.is_empty() {
            return Err(Error::input(format!(
                "a BatchNorm over the global batch needs a row on every rank, and a batch of {global} rows on {} ranks leaves rank {} none: choose a --batch that leaves the last batch of an epoch at least one row per rank",
                self.size(),
                self.rank()
            )));
        }
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
        let mut all = vec![0.0; global * width];
        all[rows.start * width..rows.end * width].copy_from_slice(mine);
        self.sum(&mut all)?;
        self.gathered = Some((step, all.clone()));
        Ok((all, rows))
    }
}

#[cfg(test)]
mod tests;
