//! Data-parallel training over the ranks of one launch (`mpirun -np N tensorfit train`;
//! docs/distributed.md): every rank draws the same global batch, trains on its shard of
//! the rows, and the step is split at its gradients ([`TrainOptions::split_update`]), which
//! [`Ranks`] averages over the ranks, weighted by what each rank's mean is over (its rows,
//! or its counted steps), before each rank runs the same update. Ranks on one kind of device therefore hold the same weights after every
//! step, which [`Ranks::check_same_weights`] verifies. Ranks on different kinds (a wgpu
//! rank and a CPU rank) round the same update differently, so after each step of such a
//! mix every rank takes rank 0's training state ([`Ranks::align`]). The same exchange
//! carries each rank's stop request (Ctrl-C, SIGTERM), so that all ranks stop after the
//! same step ([`Ranks::agreed_stop`]). With `--data`, each rank reads its rows of each
//! global batch (`tensorfit_data::Shard`).
//!
//! [`TrainOptions::split_update`]: tensorfit_nn::TrainOptions::split_update

mod ranks;

use std::ops::Range;

use tensorfit_core::{Error, HostTensor, Result};
use tensorfit_dist::DistError;
use tensorfit_nn::{ModelDescription, ParamStore};

pub use ranks::Ranks;

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
    /// The global batch, shared out among the ranks (`tensorfit_data::Shard`).
    pub batch: usize,
}

impl DataParallel {
    /// The global batch over which a model with a layer that mixes the rows of its
    /// batch (BatchNorm) normalises, when it has any: such a layer is synchronised across
    /// the ranks.
    pub fn sync_batch_norm(&self, cfg: &ModelDescription) -> Option<usize> {
        let mixes_rows = cfg
            .network()
            .is_ok_and(|net| net.layers().iter().any(|l| l.traits().mixes_rows));
        mixes_rows.then_some(self.batch)
    }

    /// The host bytes of one step's communication: the gradients' copies
    /// (`GRADIENT_HOST_COPIES`) and, with BatchNorm, the gathered rows of the head's
    /// input and targets (`GATHER_HOST_COPIES`).
    pub fn host_bytes(&self, cfg: &ModelDescription) -> Result<u64> {
        let grads = tensorfit_dist::bucket_bytes(cfg.trainable_parameters()?);
        let gathered = self.sync_batch_norm(cfg).map_or(0, |b| {
            let width = cfg.body_features() + cfg.loss.targets_per_row();
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_weights_hash_sees_a_single_bit() {
        let mut a = ParamStore::new();
        a.insert("w", HostTensor::new([2], vec![1.0, 2.0]).unwrap());
        let mut b = a.clone();
        let h = weights_hash(&a);
        b.iter_mut()
            .for_each(|(_, t)| t.data[1] = f32::from_bits(2.0f32.to_bits() + 1));
        assert_ne!(h, weights_hash(&b));
    }
}
