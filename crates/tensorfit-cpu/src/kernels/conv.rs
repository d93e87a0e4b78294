//! The ops a 1-D convolution over time is built from (see `tensorfit_core::ConvTaps`):
//! `unfold_time`, the columns of the taps of every step, its gradient `fold_time`, and
//! `reshape`, a plain copy.
//!
//! Sequences are `[T, B, C]` (`dims` = `(T, B, C)`), columns `[T, B, C·K]` with tap `k`
//! of feature `c` in column `c·K + k` (PyTorch's weight layout `[Cout, Cin, K]`
//! flattened). Like the other kernels that only move values (`bidir.rs`, `pool.rs`)
//! these are memory-bound passes that stay single-threaded and plain: the reference the
//! GPU kernels are tested against. Every size and every length is checked before
//! anything is written.

use tensorfit_core::args::*;
use tensorfit_core::{ConvKernels, ConvTaps, Result, Shape};

use super::pool::row_ends;
use super::{check_len, HostKernels};
use crate::backend_error;

/// `(T, B, C)`: the steps, batch rows and features of a sequence.
type Dims = (usize, usize, usize);

/// Checks `taps` (an error naming `kernel`) and returns the columns per row, `C·K`.
fn columns(kernel: &str, taps: ConvTaps, channels: usize) -> Result<usize> {
    taps.check()
        .map_err(|m| backend_error(format!("{kernel}: {m}")))?;
    channels.checked_mul(taps.kernel).ok_or_else(|| {
        backend_error(format!(
            "{kernel}: {channels} features of {} taps",
            taps.kernel
        ))
    })
}

/// `cols[t, b, c·K + k] = x[taps.source(t, k, L_b), b, c]`, 0 where there is no source
/// (before the sequence, after it, and every row `t ≥ L_b`), for `x` `[T, B, C]` (`dims`)
/// and `cols` `[T, B, C·K]`. `L_b` is `lengths[b]`, or `T` without lengths; a length
/// that is not a whole number in `0..=T` is an `Error::Input` naming the kernel and row.
pub fn unfold_time(
    taps: ConvTaps,
    (steps, batch, channels): Dims,
    lengths: Option<&[f32]>,
    x: &[f32],
    cols: &mut [f32],
) -> Result<()> {
    const K: &str = "unfold_time";
    let width = columns(K, taps, channels)?;
    check_len(
        K,
        "x",
        x,
        steps.saturating_mul(batch).saturating_mul(channels),
    )?;
    check_len(
        K,
        "cols",
        cols,
        steps.saturating_mul(batch).saturating_mul(width),
    )?;
    let ends = row_ends(K, (steps, batch), lengths)?;
    for t in 0..steps {
        for (b, &end) in ends.iter().enumerate() {
            let row = &mut cols[(t * batch + b) * width..][..width];
            for k in 0..taps.kernel {
                // Tap k of every feature: columns k, K + k, 2K + k, ...
                let tap = row.iter_mut().skip(k).step_by(taps.kernel);
                match taps.source(t, k, end) {
                    Some(s) => {
                        let from = &x[(s * batch + b) * channels..][..channels];
                        tap.zip(from).for_each(|(c, &v)| *c = v);
                    }
                    None => tap.for_each(|c| *c = 0.0),
                }
            }
        }
    }
    Ok(())
}

/// The gradient (adjoint) of [`unfold_time`]: `dx[s, b, c] = Σ_k dcols[t, b, c·K + k]`
/// over the taps `k` with a step `t = taps.reader(s, k, L_b)`, summed in tap order from
/// 0; 0 for `s ≥ L_b`. `dcols` `[T, B, C·K]`, `dx` `[T, B, C]` (`dims`).
pub fn fold_time(
    taps: ConvTaps,
    (steps, batch, channels): Dims,
    lengths: Option<&[f32]>,
    dcols: &[f32],
    dx: &mut [f32],
) -> Result<()> {
    const K: &str = "fold_time";
    let width = columns(K, taps, channels)?;
    check_len(
        K,
        "dcols",
        dcols,
        steps.saturating_mul(batch).saturating_mul(width),
    )?;
    check_len(
        K,
        "dx",
        dx,
        steps.saturating_mul(batch).saturating_mul(channels),
    )?;
    let ends = row_ends(K, (steps, batch), lengths)?;
    for s in 0..steps {
        for (b, &end) in ends.iter().enumerate() {
            let sum = &mut dx[(s * batch + b) * channels..][..channels];
            sum.fill(0.0);
            for k in 0..taps.kernel {
                if let Some(t) = taps.reader(s, k, end) {
                    let row = &dcols[(t * batch + b) * width..][..width];
                    let tap = row.iter().skip(k).step_by(taps.kernel);
                    sum.iter_mut().zip(tap).for_each(|(d, &g)| *d += g);
                }
            }
        }
    }
    Ok(())
}

/// `out = x`, element for element (a reshape moves no element in row-major order).
pub fn reshape(x: &[f32], out: &mut [f32]) -> Result<()> {
    check_len("reshape", "out", out, x.len())?;
    out.copy_from_slice(x);
    Ok(())
}

impl<'a> ConvKernels for HostKernels<'a> {
    fn unfold_time(
        &mut self,
        taps: ConvTaps,
        s: UnfoldTimeInputs<&Shape>,
        i: UnfoldTimeInputs<Self::In>,
        o: UnfoldTimeOutputs<Self::Out>,
    ) -> Result<()> {
        let dims = (s.x.dim(0), s.x.dim(1), s.x.dim(2));
        unfold_time(taps, dims, i.lengths, i.x, o.cols)
    }

    fn fold_time(
        &mut self,
        taps: ConvTaps,
        s: FoldTimeInputs<&Shape>,
        i: FoldTimeInputs<Self::In>,
        o: FoldTimeOutputs<Self::Out>,
    ) -> Result<()> {
        let channels = s.dcols.dim(2) / taps.kernel.max(1);
        let dims = (s.dcols.dim(0), s.dcols.dim(1), channels);
        fold_time(taps, dims, i.lengths, i.dcols, o.dx)
    }

    fn reshape(
        &mut self,
        _: &Shape,
        _: ReshapeInputs<&Shape>,
        i: ReshapeInputs<Self::In>,
        o: ReshapeOutputs<Self::Out>,
    ) -> Result<()> {
        reshape(i.x, o.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Error;

    fn taps(kernel: usize, dilation: usize, left: usize) -> ConvTaps {
        ConvTaps {
            kernel,
            dilation,
            left,
        }
    }

    /// `[T, B, C]` values that name their place: `t·100 + b·10 + c + 1` (none is 0).
    fn sequence((steps, batch, channels): Dims) -> Vec<f32> {
        let mut x = Vec::new();
        for t in 0..steps {
            for b in 0..batch {
                x.extend((0..channels).map(|c| (t * 100 + b * 10 + c + 1) as f32));
            }
        }
        x
    }

    /// PyTorch's `conv1d` of one sequence of `len` steps alone, `x[.., b, ..]`, with
    /// `padding` `left` before it and a weight `w` `[C·K]` (one output channel), written
    /// out in f64: `y[t] = Σ_{c, k} w[c·K + k] · xp[t + k·dilation, c]` for the padded
    /// `xp`, for `t < len`.
    fn conv1d(taps: ConvTaps, dims: Dims, x: &[f32], b: usize, len: usize, w: &[f32]) -> Vec<f64> {
        let (_, batch, channels) = dims;
        let padded = |p: usize, c: usize| -> f64 {
            match p.checked_sub(taps.left).filter(|&s| s < len) {
                Some(s) => x[(s * batch + b) * channels + c] as f64,
                None => 0.0,
            }
        };
        (0..len)
            .map(|t| {
                let mut y = 0.0;
                for c in 0..channels {
                    for k in 0..taps.kernel {
                        y += w[c * taps.kernel + k] as f64 * padded(t + k * taps.dilation, c);
                    }
                }
                y
            })
            .collect()
    }

    #[test]
    fn columns_times_a_weight_are_each_sequence_convolved_alone() {
        let dims @ (steps, batch, channels) = (7, 4, 3);
        let x = sequence(dims);
        let cases = [
            taps(3, 1, 2), // causal
            taps(3, 2, 2), // 'same', dilation 2
            taps(4, 1, 1), // 'same' of an odd span: the extra step on the right
            taps(2, 3, 0), // no padding before
            taps(1, 1, 0), // one tap: a copy
            taps(3, 4, 8), // a span longer than most rows
        ];
        for taps in cases {
            let width = channels * taps.kernel;
            let w: Vec<f32> = (0..width).map(|j| 0.5 + (j as f32 * 1.3).sin()).collect();
            for lengths in [None, Some(vec![7.0, 0.0, 1.0, 4.0])] {
                let mut cols = vec![f32::NAN; steps * batch * width];
                unfold_time(taps, dims, lengths.as_deref(), &x, &mut cols).unwrap();
                for b in 0..batch {
                    let len = lengths.as_ref().map_or(steps, |l| l[b] as usize);
                    let want = conv1d(taps, dims, &x, b, len, &w);
                    for t in 0..steps {
                        let row = &cols[(t * batch + b) * width..][..width];
                        if t >= len {
                            assert!(row.iter().all(|&v| v == 0.0), "{taps:?} t {t} b {b}");
                            continue;
                        }
                        let got: f64 = row.iter().zip(&w).map(|(&c, &w)| c as f64 * w as f64).sum();
                        assert!((got - want[t]).abs() < 1e-9, "{taps:?} t {t} b {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn one_column_is_the_step_of_its_tap() {
        // T = 5, B = 1, C = 2, K = 3, dilation 2, left 2: step 2 reads steps 0, 2, 4.
        let dims = (5, 1, 2);
        let x = sequence(dims);
        let mut cols = vec![f32::NAN; 5 * 6];
        unfold_time(taps(3, 2, 2), dims, None, &x, &mut cols).unwrap();
        assert_eq!(cols[2 * 6..3 * 6], [1.0, 201.0, 401.0, 2.0, 202.0, 402.0]);
        assert_eq!(cols[0..6], [0.0, 1.0, 201.0, 0.0, 2.0, 202.0]);
        assert_eq!(cols[4 * 6..5 * 6], [201.0, 401.0, 0.0, 202.0, 402.0, 0.0]);
    }

    #[test]
    fn fold_time_is_the_adjoint_of_unfold_time() {
        // Σ cols · g = Σ x · fold(g) for every x and g.
        let dims @ (steps, batch, channels) = (6, 5, 2);
        let x = sequence(dims);
        let dot = |a: &[f32], b: &[f32]| -> f64 {
            a.iter().zip(b).map(|(&a, &b)| a as f64 * b as f64).sum()
        };
        for taps in [taps(3, 1, 2), taps(3, 2, 2), taps(2, 1, 0), taps(1, 3, 0)] {
            let width = channels * taps.kernel;
            let g: Vec<f32> = (0..steps * batch * width)
                .map(|k| (k as f32).cos())
                .collect();
            for lengths in [None, Some(vec![6.0, 0.0, 1.0, 3.0, 5.0])] {
                let l = lengths.as_deref();
                let mut cols = vec![0.0; g.len()];
                let mut dx = vec![f32::NAN; x.len()];
                unfold_time(taps, dims, l, &x, &mut cols).unwrap();
                fold_time(taps, dims, l, &g, &mut dx).unwrap();
                let (a, b) = (dot(&cols, &g), dot(&x, &dx));
                assert!((a - b).abs() < 1e-6 * a.abs().max(1.0), "{taps:?} {a} {b}");
                // At lengths, row 1 (no steps) gets nothing, nor row 2 after its first step.
                if lengths.is_some() {
                    for t in 0..steps {
                        assert_eq!(dx[(t * batch + 1) * channels..][..channels], [0.0; 2]);
                    }
                    assert_eq!(dx[(batch + 2) * channels..][..channels], [0.0; 2]);
                }
            }
        }
    }

    #[test]
    fn bad_lengths_taps_or_sizes_are_errors_naming_the_kernel_and_write_nothing() {
        let dims = (3, 2, 2);
        let x = sequence(dims);
        let (mut cols, mut dx) = ([f32::NAN; 36], [f32::NAN; 12]);
        let t = taps(3, 1, 1);
        for bad in [4.0, -1.0, 1.5, f32::NAN] {
            let l = [3.0, bad];
            let errors = [
                ("unfold_time", unfold_time(t, dims, Some(&l), &x, &mut cols)),
                ("fold_time", fold_time(t, dims, Some(&l), &cols, &mut dx)),
            ];
            for (kernel, result) in errors {
                let err = result.unwrap_err();
                let msg = err.to_string();
                assert!(matches!(err, Error::Input(_)), "{msg}");
                assert!(msg.contains(kernel) && msg.contains("batch row 1"), "{msg}");
            }
        }
        assert!(cols.iter().chain(&dx).all(|v| v.is_nan()));
        for bad in [taps(0, 1, 0), taps(3, 0, 0), taps(3, 1, 3)] {
            let err = unfold_time(bad, dims, None, &x, &mut cols).unwrap_err();
            assert!(err.to_string().contains("unfold_time"), "{err}");
            assert!(fold_time(bad, dims, None, &cols, &mut dx).is_err());
        }
        assert!(unfold_time(t, dims, None, &x[1..], &mut cols).is_err());
        assert!(unfold_time(t, dims, None, &x, &mut cols[1..]).is_err());
        assert!(fold_time(t, dims, None, &cols[1..], &mut dx).is_err());
        assert!(fold_time(t, dims, Some(&[1.0]), &cols, &mut dx).is_err());
        assert!(reshape(&x, &mut dx[1..]).is_err());
        // Empty tensors are nothing to do.
        unfold_time(t, (0, 2, 2), None, &[], &mut []).unwrap();
        fold_time(t, (3, 2, 0), Some(&[1.0, 2.0]), &[], &mut []).unwrap();
    }
}
