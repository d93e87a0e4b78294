//! Gradient averaging for data-parallel training: every parameter's gradient, flattened
//! in parameter order into one bucket, summed over ranks and divided by their number, so
//! every rank takes the same optimizer step (PyTorch DDP's buckets, here one).
use crate::{Communicator, DistError};

/// Bytes of the host bucket for `param_count` f32 gradients: the buffer the planner's
/// "communication" category will count (the MPI communicator stages as much again).
pub const fn bucket_bytes(param_count: usize) -> u64 {
    param_count as u64 * std::mem::size_of::<f32>() as u64
}

/// One flat buffer for the gradients of a fixed list of parameters, reused every step.
#[derive(Debug, Clone)]
pub struct GradientBucket {
    sizes: Vec<usize>,
    flat: Vec<f32>,
}

impl GradientBucket {
    /// A bucket for parameters of these element counts, in the order every rank passes them.
    pub fn new(sizes: Vec<usize>) -> Self {
        let total = sizes.iter().sum();
        GradientBucket {
            sizes,
            flat: vec![0.0; total],
        }
    }

    /// The values the bucket holds: every rank's all-reduce of it is this long.
    pub fn len(&self) -> usize {
        self.flat.len()
    }

    /// Whether the bucket holds no value.
    pub fn is_empty(&self) -> bool {
        self.flat.is_empty()
    }

    /// The bucket's size in bytes ([`bucket_bytes`] of its parameter count).
    pub fn bytes(&self) -> u64 {
        bucket_bytes(self.flat.len())
    }

    /// Replaces each gradient by its mean over ranks. Every rank must call it with
    /// gradients of the sizes the bucket was made for, in the same order; the results
    /// are bitwise identical on every rank.
    pub fn average(
        &mut self,
        comm: &mut dyn Communicator,
        grads: &mut [&mut [f32]],
    ) -> Result<(), DistError> {
        self.check(grads)?;
        let mut at = 0;
        for g in grads.iter() {
            self.flat[at..at + g.len()].copy_from_slice(g);
            at += g.len();
        }
        comm.all_reduce_sum(&mut self.flat)?;
        let ranks = comm.size() as f32;
        let mut at = 0;
        for g in grads.iter_mut() {
            for (out, &sum) in g.iter_mut().zip(&self.flat[at..]) {
                *out = sum / ranks;
            }
            at += g.len();
        }
        Ok(())
    }

    fn check(&self, grads: &[&mut [f32]]) -> Result<(), DistError> {
        let layout = |detail| DistError::Layout {
            what: "gradient bucket",
            detail,
        };
        if grads.len() != self.sizes.len() {
            return Err(layout(format!(
                "{} gradients passed, the bucket was made for {}",
                grads.len(),
                self.sizes.len()
            )));
        }
        match grads
            .iter()
            .zip(&self.sizes)
            .position(|(g, &n)| g.len() != n)
        {
            Some(i) => Err(layout(format!(
                "gradient {i} has {} values, the bucket was made for {}",
                grads[i].len(),
                self.sizes[i]
            ))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solo;

    #[test]
    fn the_bucket_counts_four_bytes_per_parameter() {
        assert_eq!(bucket_bytes(1_434_406), 5_737_624);
        assert_eq!(GradientBucket::new(vec![3, 5]).bytes(), 32);
    }

    #[test]
    fn one_rank_keeps_its_gradients() {
        let mut bucket = GradientBucket::new(vec![2, 1]);
        let (mut a, mut b) = (vec![1.0f32, -2.0], vec![0.5f32]);
        bucket.average(&mut Solo, &mut [&mut a, &mut b]).unwrap();
        assert_eq!((a, b), (vec![1.0, -2.0], vec![0.5]));
    }

    #[test]
    fn gradients_of_the_wrong_size_are_named() {
        let mut bucket = GradientBucket::new(vec![2, 1]);
        let (mut a, mut b) = (vec![1.0f32, -2.0], vec![0.5f32, 0.0]);
        let err = bucket
            .average(&mut Solo, &mut [&mut a, &mut b])
            .unwrap_err();
        assert!(err.to_string().contains("gradient 1 has 2 values"), "{err}");
        let err = bucket.average(&mut Solo, &mut [&mut a]).unwrap_err();
        assert!(err.to_string().contains("1 gradients passed"), "{err}");
    }
}
