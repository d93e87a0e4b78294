//! Global pooling over time, each sequence over its own steps (Keras's
//! `GlobalAveragePooling1D` and `GlobalMaxPooling1D` with a mask): `mean_time`,
//! `max_time`, and their gradients `mean_time_backward` and `max_time_backward`.
//!
//! Sequences are `[T, B, F]` (`dims` = `(T, B, F)`), pooled rows `[B, F]`. Each kernel
//! is a memory-bound pass over whole rows and stays single-threaded and plain: it is the
//! reference the GPU kernels are tested against. Every size is checked against the
//! slices first, and every length (or step `at`) before anything is written, so the loops
//! cannot index out of bounds and a bad value leaves the outputs untouched.

use tensorfit_core::args::*;
use tensorfit_core::seq_lengths::check_lengths;
use tensorfit_core::{Error, PoolKernels, Result, Shape};

use super::bidir::in_kernel;
use super::{check_len, HostKernels};

/// `(T, B, F)`: the steps, batch rows and features of a pooled sequence.
type Dims = (usize, usize, usize);

/// How many steps each row pools: `lengths[b]`, each checked to be a whole number in
/// `0..=T` (an [`Error::Input`] naming `kernel` and the row), or `T` for every row.
pub(crate) fn row_ends(
    kernel: &str,
    (steps, batch): (usize, usize),
    lengths: Option<&[f32]>,
) -> Result<Vec<usize>> {
    let Some(lengths) = lengths else {
        return Ok(vec![steps; batch]);
    };
    check_len(kernel, "lengths", lengths, batch)?;
    check_lengths("lengths", lengths, steps).map_err(|e| in_kernel(kernel, e))?;
    Ok(lengths.iter().map(|&l| l as usize).collect())
}

/// `out[b] = (1 / L_b) Σ_{t < L_b} x[t, b]` for `x` `[T, B, F]` (`dims`) and `out`
/// `[B, F]`, summed in step order then divided; 0 for a row of no steps. `L_b` is
/// `lengths[b]`, or `T` without lengths.
pub fn mean_time(
    (steps, batch, width): Dims,
    lengths: Option<&[f32]>,
    x: &[f32],
    out: &mut [f32],
) -> Result<()> {
    const K: &str = "mean_time";
    let step = batch.saturating_mul(width);
    check_len(K, "x", x, steps.saturating_mul(step))?;
    check_len(K, "out", out, step)?;
    let ends = row_ends(K, (steps, batch), lengths)?;
    out.fill(0.0);
    for t in 0..steps {
        for (b, _) in ends.iter().enumerate().filter(|&(_, &end)| t < end) {
            let row = &x[t * step + b * width..][..width];
            let sum = &mut out[b * width..][..width];
            sum.iter_mut().zip(row).for_each(|(s, &v)| *s += v);
        }
    }
    for (b, &end) in ends.iter().enumerate().filter(|&(_, &end)| end > 0) {
        let mean = &mut out[b * width..][..width];
        mean.iter_mut().for_each(|s| *s /= end as f32);
    }
    Ok(())
}

/// The gradient of [`mean_time`]: `dx[t, b] = dout[b] / L_b` for `t < L_b`, else 0, for
/// `dout` `[B, F]` and `dx` `[T, B, F]` (`dims`).
pub fn mean_time_backward(
    (steps, batch, width): Dims,
    lengths: Option<&[f32]>,
    dout: &[f32],
    dx: &mut [f32],
) -> Result<()> {
    const K: &str = "mean_time_backward";
    let step = batch.saturating_mul(width);
    check_len(K, "dout", dout, step)?;
    check_len(K, "dx", dx, steps.saturating_mul(step))?;
    let ends = row_ends(K, (steps, batch), lengths)?;
    for t in 0..steps {
        for (b, &end) in ends.iter().enumerate() {
            let to = &mut dx[t * step + b * width..][..width];
            if t < end {
                let from = &dout[b * width..][..width];
                to.iter_mut()
                    .zip(from)
                    .for_each(|(d, &g)| *d = g / end as f32);
            } else {
                to.fill(0.0);
            }
        }
    }
    Ok(())
}

/// `out[b, f] = max_{t < L_b} x[t, b, f]` and `at[b, f]` the first step holding it (as
/// `f32`), for `x` `[T, B, F]` (`dims`) and `out`, `at` `[B, F]`; for a row of no steps,
/// `out` 0 and `at` -1. A NaN is the maximum (as `torch.max`): the first NaN step wins.
pub fn max_time(
    (steps, batch, width): Dims,
    lengths: Option<&[f32]>,
    x: &[f32],
    out: &mut [f32],
    at: &mut [f32],
) -> Result<()> {
    const K: &str = "max_time";
    let step = batch.saturating_mul(width);
    check_len(K, "x", x, steps.saturating_mul(step))?;
    check_len(K, "out", out, step)?;
    check_len(K, "at", at, step)?;
    let ends = row_ends(K, (steps, batch), lengths)?;
    for (b, &end) in ends.iter().enumerate() {
        let best = &mut out[b * width..][..width];
        let best_at = &mut at[b * width..][..width];
        if end == 0 {
            best.fill(0.0);
            best_at.fill(-1.0);
            continue;
        }
        best.copy_from_slice(&x[b * width..][..width]);
        best_at.fill(0.0);
        for t in 1..end {
            let row = &x[t * step + b * width..][..width];
            for ((m, a), &v) in best.iter_mut().zip(best_at.iter_mut()).zip(row) {
                if replaces(v, *m) {
                    (*m, *a) = (v, t as f32);
                }
            }
        }
    }
    Ok(())
}

/// Whether `v`, seen after `best`, is the new maximum: larger, or the first NaN (a NaN,
/// once held, stays). The GPU kernels compare the same way.
fn replaces(v: f32, best: f32) -> bool {
    !best.is_nan() && (v.is_nan() || v > best)
}

/// The gradient of [`max_time`]: `dx` `[T, B, F]` (`dims`) zero except
/// `dx[at[b, f], b, f] = dout[b, f]`, nothing where `at` is -1. An `at` that is not a
/// whole number in `-1..T` is an [`Error::Input`] naming the kernel, row and feature.
pub fn max_time_backward(
    (steps, batch, width): Dims,
    at: &[f32],
    dout: &[f32],
    dx: &mut [f32],
) -> Result<()> {
    const K: &str = "max_time_backward";
    let step = batch.saturating_mul(width);
    check_len(K, "dout", dout, step)?;
    check_len(K, "at", at, step)?;
    check_len(K, "dx", dx, steps.saturating_mul(step))?;
    let whole_step = |a: f32| a.fract() == 0.0 && a >= -1.0 && (a as f64) < steps as f64;
    if let Some(k) = at.iter().position(|&a| !whole_step(a)) {
        return Err(Error::Input(format!(
            "{K}: `at` {} of batch row {}, feature {} is not a whole step in -1..{steps}",
            at[k],
            k / width,
            k % width
        )));
    }
    dx.fill(0.0);
    for (k, (&a, &g)) in at.iter().zip(dout).enumerate() {
        if a >= 0.0 {
            let (b, f) = (k / width, k % width);
            dx[(a as usize * batch + b) * width + f] = g;
        }
    }
    Ok(())
}

impl<'a> PoolKernels for HostKernels<'a> {
    fn mean_time(
        &mut self,
        s: MeanTimeInputs<&Shape>,
        i: MeanTimeInputs<Self::In>,
        o: MeanTimeOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        mean_time(dims, i.lengths, i.x, o.out)
    }

    fn mean_time_backward(
        &mut self,
        steps: usize,
        s: MeanTimeBackwardInputs<&Shape>,
        i: MeanTimeBackwardInputs<Self::In>,
        o: MeanTimeBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        mean_time_backward(dims, i.lengths, i.dout, o.dx)
    }

    fn max_time(
        &mut self,
        s: MaxTimeInputs<&Shape>,
        i: MaxTimeInputs<Self::In>,
        o: MaxTimeOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        max_time(dims, i.lengths, i.x, o.out, o.at)
    }

    fn max_time_backward(
        &mut self,
        steps: usize,
        s: MaxTimeBackwardInputs<&Shape>,
        i: MaxTimeBackwardInputs<Self::In>,
        o: MaxTimeBackwardOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (steps, s.dout.dim(0), s.dout.dim(1));
        max_time_backward(dims, i.at, i.dout, o.dx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[T, B, F]` values with no ties along time: `x[t, b, f]` = a distinct step value
    /// per `t` (a permutation of the steps, different for each row and feature) plus a
    /// small fraction naming `(b, f)`.
    fn sequence(steps: usize, batch: usize, width: usize) -> Vec<f32> {
        let mut x = Vec::new();
        for t in 0..steps {
            for b in 0..batch {
                x.extend((0..width).map(|f| {
                    let rank = (t * 7 + b * 3 + f * 5) % steps;
                    rank as f32 - steps as f32 / 2.0 + (b * 10 + f) as f32 / 100.0
                }));
            }
        }
        x
    }

    /// The naive mean and maximum of each (row, feature), in f64: `(mean, max, at)`.
    fn naive(dims: Dims, lengths: &[usize], x: &[f32]) -> Vec<(f64, f64, f64)> {
        let (_, batch, width) = dims;
        let mut want = Vec::new();
        for (b, &len) in lengths.iter().enumerate() {
            for f in 0..width {
                let column: Vec<f64> = (0..len)
                    .map(|t| x[(t * batch + b) * width + f] as f64)
                    .collect();
                if len == 0 {
                    want.push((0.0, 0.0, -1.0));
                    continue;
                }
                let mean = column.iter().sum::<f64>() / len as f64;
                let (mut max, mut at) = (column[0], 0);
                for (t, &v) in column.iter().enumerate() {
                    if v > max {
                        (max, at) = (v, t);
                    }
                }
                want.push((mean, max, at as f64));
            }
        }
        want
    }

    #[test]
    fn each_row_pools_its_own_steps_as_the_naive_mean_and_maximum() {
        let dims @ (steps, batch, width) = (5, 5, 3);
        let x = sequence(steps, batch, width);
        for lengths in [vec![5, 0, 1, 3, 2], vec![5; 5]] {
            let l: Vec<f32> = lengths.iter().map(|&v| v as f32).collect();
            let mut mean = vec![f32::NAN; batch * width];
            let (mut max, mut at) = (mean.clone(), mean.clone());
            mean_time(dims, Some(&l), &x, &mut mean).unwrap();
            max_time(dims, Some(&l), &x, &mut max, &mut at).unwrap();
            for (k, &(m, mx, a)) in naive(dims, &lengths, &x).iter().enumerate() {
                assert!((mean[k] as f64 - m).abs() < 1e-6, "{k}: {} {m}", mean[k]);
                assert_eq!((max[k] as f64, at[k] as f64), (mx, a), "{k}");
            }
        }
        // Without lengths every row pools all its steps.
        let (mut whole, mut full) = (vec![0.0; 15], vec![0.0; 15]);
        mean_time(dims, None, &x, &mut whole).unwrap();
        mean_time(dims, Some(&[5.0; 5]), &x, &mut full).unwrap();
        assert_eq!(whole, full);
        // Empty tensors are nothing to do.
        mean_time((0, 2, 3), None, &[], &mut [0.0; 6]).unwrap();
        max_time((3, 2, 0), Some(&[1.0, 2.0]), &[], &mut [], &mut []).unwrap();
    }

    #[test]
    fn the_first_step_of_a_tie_and_the_first_nan_are_the_maximum() {
        // T = 4, B = 1, F = 3: feature 0 ties at steps 1 and 3, feature 1 has a NaN at
        // steps 2 and 3 after a larger value, feature 2 starts with a NaN.
        let nan = f32::NAN;
        let x = [
            0.0, 5.0, nan, //
            2.0, 1.0, 9.0, //
            1.0, nan, 1.0, //
            2.0, nan, 3.0,
        ];
        let (mut max, mut at) = ([0.0; 3], [0.0; 3]);
        max_time((4, 1, 3), None, &x, &mut max, &mut at).unwrap();
        assert_eq!(max[0], 2.0);
        assert!(max[1].is_nan() && max[2].is_nan(), "{max:?}");
        assert_eq!(at, [1.0, 2.0, 0.0]);
    }

    #[test]
    fn the_gradients_are_the_adjoints_of_the_forwards() {
        // Σ out · g = Σ x · dx for every x and g: the backward kernels are the transposes.
        let dims @ (steps, batch, width) = (4, 4, 3);
        let x = sequence(steps, batch, width);
        let g: Vec<f32> = (0..batch * width).map(|k| 2.0 + (k as f32).cos()).collect();
        let dot = |a: &[f32], b: &[f32]| -> f64 {
            a.iter().zip(b).map(|(&a, &b)| a as f64 * b as f64).sum()
        };
        let lengths = [4.0, 0.0, 1.0, 3.0];
        let mut out = vec![0.0; batch * width];
        let mut dx = vec![f32::NAN; x.len()];
        mean_time(dims, Some(&lengths), &x, &mut out).unwrap();
        mean_time_backward(dims, Some(&lengths), &g, &mut dx).unwrap();
        assert!((dot(&out, &g) - dot(&x, &dx)).abs() < 1e-5);
        // Row 1 (no steps) and row 2 after its first step get nothing.
        assert!((0..steps).all(|t| dx[(t * batch + 1) * width..][..width] == [0.0; 3]));
        assert_eq!(dx[(batch + 2) * width..][..width], [0.0; 3]);

        let mut at = vec![0.0; batch * width];
        dx.fill(f32::NAN);
        max_time(dims, Some(&lengths), &x, &mut out, &mut at).unwrap();
        max_time_backward(dims, &at, &g, &mut dx).unwrap();
        assert!((dot(&out, &g) - dot(&x, &dx)).abs() < 1e-5);
        assert_eq!(dx.iter().filter(|&&v| v != 0.0).count(), 3 * width);
    }

    #[test]
    fn a_bad_length_is_an_input_error_naming_the_op_and_its_row() {
        let dims = (3, 2, 2);
        let x = sequence(3, 2, 2);
        let (mut out, mut at, mut dx) = ([0.0; 4], [0.0; 4], [0.0; 12]);
        for bad in [4.0, -1.0, 1.5, f32::NAN] {
            let l = [3.0, bad];
            let errors = [
                ("mean_time", mean_time(dims, Some(&l), &x, &mut out)),
                ("max_time", max_time(dims, Some(&l), &x, &mut out, &mut at)),
                (
                    "mean_time_backward",
                    mean_time_backward(dims, Some(&l), &out, &mut dx),
                ),
            ];
            for (kernel, result) in errors {
                let err = result.unwrap_err();
                let msg = err.to_string();
                assert!(matches!(err, Error::Input(_)), "{msg}");
                assert!(msg.contains(kernel) && msg.contains("batch row 1"), "{msg}");
            }
        }
        let err = mean_time(dims, Some(&[3.0]), &x, &mut out).unwrap_err();
        assert!(err.to_string().contains("`lengths`"), "{err}");
        assert!(mean_time(dims, None, &x[1..], &mut out).is_err());
        assert!(max_time(dims, None, &x, &mut out, &mut at[1..]).is_err());
        assert!(mean_time_backward(dims, None, &out, &mut dx[1..]).is_err());
    }

    #[test]
    fn a_step_at_that_is_not_a_whole_step_is_an_input_error_naming_its_place() {
        let dims = (3, 2, 2);
        let dout = [1.0, 2.0, 3.0, 4.0];
        let mut dx = [f32::NAN; 12];
        for bad in [3.0, -2.0, 0.5, f32::NAN, f32::INFINITY] {
            let at = [0.0, -1.0, 2.0, bad];
            let err = max_time_backward(dims, &at, &dout, &mut dx).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Input(_)), "{msg}");
            assert!(
                msg.contains("max_time_backward") && msg.contains("batch row 1, feature 1"),
                "{msg}"
            );
            // Nothing written.
            assert!(dx.iter().all(|v| v.is_nan()));
        }
        let at = [0.0, -1.0, 2.0, 1.0];
        max_time_backward(dims, &at, &dout, &mut dx).unwrap();
        let mut want = [0.0; 12];
        (want[0], want[8 + 2], want[4 + 3]) = (1.0, 3.0, 4.0);
        assert_eq!(dx, want);
        assert!(max_time_backward(dims, &at[1..], &dout, &mut dx).is_err());
        assert!(max_time_backward(dims, &at, &dout, &mut dx[1..]).is_err());
    }
}
