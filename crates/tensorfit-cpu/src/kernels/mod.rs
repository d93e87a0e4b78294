//! The kernels of the CPU backend: one file per op family, one function per
//! [`tensorfit_core::Op`], named as `Op::name` names it in every backend.
//!
//! Kernels work on host slices, so they can be called (and tested) without a backend.
//! Every kernel checks the lengths of its slices against the dimensions it is given and
//! returns an error on a mismatch, so indexing inside a kernel cannot go out of bounds
//! whoever calls it. Layouts follow the op conventions: row-major, contiguous, sequences
//! time-major `[T, B, F]`.

pub mod adam;
pub mod batchnorm;
pub mod elementwise;
pub mod fastmath;
pub mod gemm;
pub mod gemm_fast;
pub mod lstm;
pub mod softmax;

use tensorfit_core::Result;

use crate::backend_error;

/// Below this many elements a fused pass runs on one thread: splitting work across
/// rayon's pool costs a few microseconds, more than a small pass takes.
pub const PARALLEL_MIN_ELEMENTS: usize = 16_384;

/// Checks that `slice` (called `what` in the message of kernel `kernel`) has `want`
/// elements.
pub(crate) fn check_len(kernel: &str, what: &str, slice: &[f32], want: usize) -> Result<()> {
    if slice.len() == want {
        Ok(())
    } else {
        Err(backend_error(format!(
            "{kernel}: `{what}` has {} elements, expected {want}",
            slice.len()
        )))
    }
}

/// Helpers shared by the kernels' unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    /// A tiny deterministic generator (splitmix64), so tests need no `rand`.
    pub struct Rng(pub u64);

    impl Rng {
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in [-1, 1).
        pub fn uniform(&mut self) -> f32 {
            ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }

        /// Uniform integer in [lo, hi].
        pub fn range(&mut self, lo: usize, hi: usize) -> usize {
            lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
        }

        pub fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.uniform()).collect()
        }
    }

    /// |a - b| <= atol + rtol·|b| for every element, with the first failure in the message.
    pub fn assert_close(what: &str, got: &[f32], want: &[f64], atol: f64, rtol: f64) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
            let diff = (g as f64 - w).abs();
            assert!(
                diff <= atol + rtol * w.abs(),
                "{what}[{k}]: got {g}, want {w} (diff {diff:e})"
            );
        }
    }
}
