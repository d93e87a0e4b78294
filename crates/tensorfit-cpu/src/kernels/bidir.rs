//! The ops a bidirectional recurrent layer is built from, which only move values:
//! `reverse_time` (each sequence backwards from its own end, the reverse direction's
//! input; see `tensorfit_core::seq_lengths::reversed_step`), `concat_features` (both
//! directions' outputs side by side) and `slice_features` (one part of the features
//! back, the gradient of the concatenation).
//!
//! Each is a memory-bound copy of whole rows (`copy_from_slice`); like the elementwise
//! kernels they stay single-threaded and simple. Every size is checked against the
//! slices first, so the row loops cannot index out of bounds.

use tensorfit_core::seq_lengths::{check_lengths, reversed_step};
use tensorfit_core::{Error, Result};

use super::check_len;
use crate::backend_error;

/// `y[t, b] = x[reversed_step(t, L_b), b]` for `x`, `y` `[T, B, F]` (`dims`), with
/// `L_b = lengths[b]`, or `T` for every row without lengths: each row reversed over its
/// own steps, its padding passed through. A length that is not a whole number in
/// `0..=T` is an [`Error::Input`] naming the kernel and the row.
pub fn reverse_time(
    (steps, batch, width): (usize, usize, usize),
    lengths: Option<&[f32]>,
    x: &[f32],
    y: &mut [f32],
) -> Result<()> {
    const K: &str = "reverse_time";
    let step = batch.saturating_mul(width);
    check_len(K, "x", x, steps.saturating_mul(step))?;
    check_len(K, "y", y, x.len())?;
    if let Some(l) = lengths {
        check_len(K, "lengths", l, batch)?;
        check_lengths("lengths", l, steps).map_err(|e| in_kernel(K, e))?;
    }
    for t in 0..steps {
        for b in 0..batch {
            let s = match lengths {
                Some(l) => reversed_step(t, l[b]),
                None => steps - 1 - t,
            };
            let from = s * step + b * width;
            let to = t * step + b * width;
            y[to..to + width].copy_from_slice(&x[from..from + width]);
        }
    }
    Ok(())
}

/// `out[r] = [a[r], b[r]]` for `rows` rows of `a` `[rows, Fa]` and `b` `[rows, Fb]`
/// (either may have no features).
pub fn concat_features(
    rows: usize,
    (a, fa): (&[f32], usize),
    (b, fb): (&[f32], usize),
    out: &mut [f32],
) -> Result<()> {
    const K: &str = "concat_features";
    let width = fa.saturating_add(fb);
    check_len(K, "a", a, rows.saturating_mul(fa))?;
    check_len(K, "b", b, rows.saturating_mul(fb))?;
    check_len(K, "out", out, rows.saturating_mul(width))?;
    for r in 0..rows {
        let row = &mut out[r * width..(r + 1) * width];
        row[..fa].copy_from_slice(&a[r * fa..(r + 1) * fa]);
        row[fa..].copy_from_slice(&b[r * fb..(r + 1) * fb]);
    }
    Ok(())
}

/// `out[r] = x[r, start..start + width]` for every row of `x` `[rows, features]`.
pub fn slice_features(
    (start, width): (usize, usize),
    (x, rows, features): (&[f32], usize, usize),
    out: &mut [f32],
) -> Result<()> {
    const K: &str = "slice_features";
    let end = start
        .checked_add(width)
        .filter(|&e| width > 0 && e <= features);
    let Some(end) = end else {
        return Err(backend_error(format!(
            "{K}: features {start}.. (width {width}) are not inside rows of {features}"
        )));
    };
    check_len(K, "x", x, rows.saturating_mul(features))?;
    check_len(K, "out", out, rows.saturating_mul(width))?;
    for (r, row) in out.chunks_exact_mut(width).enumerate() {
        row.copy_from_slice(&x[r * features + start..r * features + end]);
    }
    Ok(())
}

/// `e` with the kernel's name in front, so that a bad length names the op it was given to.
pub(crate) fn in_kernel(kernel: &str, e: Error) -> Error {
    match e {
        Error::Input(message) => Error::Input(format!("{kernel}: {message}")),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[T, B, F]` values that name their place: `t·100 + b·10 + f`.
    fn sequence(steps: usize, batch: usize, width: usize) -> Vec<f32> {
        let mut x = Vec::new();
        for t in 0..steps {
            for b in 0..batch {
                x.extend((0..width).map(|f| (t * 100 + b * 10 + f) as f32));
            }
        }
        x
    }

    #[test]
    fn each_row_runs_backwards_from_its_own_end_and_its_padding_stays() {
        let (steps, batch, width) = (4, 5, 3);
        let x = sequence(steps, batch, width);
        let lengths = [4.0, 0.0, 1.0, 3.0, 2.0];
        let mut y = vec![f32::NAN; x.len()];
        reverse_time((steps, batch, width), Some(&lengths), &x, &mut y).unwrap();
        for t in 0..steps {
            for (b, &len) in lengths.iter().enumerate() {
                // The naive rule, written out: L - 1 - t inside, t in the padding.
                let len = len as usize;
                let s = if t < len { len - 1 - t } else { t };
                for f in 0..width {
                    let at = (t * batch + b) * width + f;
                    assert_eq!(y[at], (s * 100 + b * 10 + f) as f32, "t {t} b {b} f {f}");
                }
            }
        }
        // Its own inverse.
        let mut back = vec![f32::NAN; x.len()];
        reverse_time((steps, batch, width), Some(&lengths), &y, &mut back).unwrap();
        assert_eq!(back, x);
    }

    #[test]
    fn without_lengths_every_row_is_reversed_whole() {
        let x = sequence(3, 2, 1);
        let mut y = vec![f32::NAN; x.len()];
        reverse_time((3, 2, 1), None, &x, &mut y).unwrap();
        assert_eq!(y, [200.0, 210.0, 100.0, 110.0, 0.0, 10.0]);
        // Full lengths are the same.
        let mut z = vec![f32::NAN; x.len()];
        reverse_time((3, 2, 1), Some(&[3.0, 3.0]), &x, &mut z).unwrap();
        assert_eq!(z, y);
        // Empty tensors are nothing to do.
        reverse_time((0, 2, 3), None, &[], &mut []).unwrap();
        reverse_time((3, 2, 0), Some(&[1.0, 2.0]), &[], &mut []).unwrap();
    }

    #[test]
    fn a_bad_length_is_an_input_error_naming_the_op_and_its_row() {
        let x = sequence(3, 2, 2);
        let mut y = vec![0.0; x.len()];
        for bad in [4.0, -1.0, 1.5, f32::NAN] {
            let err = reverse_time((3, 2, 2), Some(&[3.0, bad]), &x, &mut y).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, Error::Input(_)), "{msg}");
            assert!(
                msg.contains("reverse_time") && msg.contains("batch row 1"),
                "{msg}"
            );
        }
        let err = reverse_time((3, 2, 2), Some(&[3.0]), &x, &mut y).unwrap_err();
        assert!(err.to_string().contains("`lengths`"), "{err}");
        assert!(reverse_time((3, 2, 2), None, &x, &mut y[1..]).is_err());
        assert!(reverse_time((4, 2, 2), None, &x, &mut y).is_err());
    }

    #[test]
    fn concatenated_rows_hold_a_then_b_and_slices_take_them_back() {
        let (rows, fa, fb) = (3, 2, 3);
        let a: Vec<f32> = (0..rows * fa).map(|v| v as f32).collect();
        let b: Vec<f32> = (0..rows * fb).map(|v| 100.0 + v as f32).collect();
        let mut out = vec![f32::NAN; rows * (fa + fb)];
        concat_features(rows, (&a, fa), (&b, fb), &mut out).unwrap();
        for r in 0..rows {
            for j in 0..fa + fb {
                let want = if j < fa {
                    a[r * fa + j]
                } else {
                    b[r * fb + j - fa]
                };
                assert_eq!(out[r * (fa + fb) + j], want, "row {r} feature {j}");
            }
        }
        let mut back_a = vec![f32::NAN; a.len()];
        slice_features((0, fa), (&out, rows, fa + fb), &mut back_a).unwrap();
        assert_eq!(back_a, a);
        let mut back_b = vec![f32::NAN; b.len()];
        slice_features((fa, fb), (&out, rows, fa + fb), &mut back_b).unwrap();
        assert_eq!(back_b, b);
        let mut middle = vec![f32::NAN; rows];
        slice_features((2, 1), (&out, rows, fa + fb), &mut middle).unwrap();
        assert_eq!(middle, [100.0, 103.0, 106.0]);
        // An operand of no features adds none.
        let mut same = vec![f32::NAN; a.len()];
        concat_features(rows, (&a, fa), (&[], 0), &mut same).unwrap();
        assert_eq!(same, a);
    }

    #[test]
    fn mismatched_rows_and_slices_outside_the_features_are_errors() {
        let (a, b) = ([0.0; 6], [0.0; 6]);
        let mut out = [0.0; 12];
        // b has 2 rows of 3 where a has 3 rows of 2.
        let err = concat_features(3, (&a, 2), (&b, 3), &mut out[..9]).unwrap_err();
        assert!(err.to_string().contains("`b`"), "{err}");
        assert!(concat_features(3, (&a, 2), (&b, 2), &mut out[..11]).is_err());
        let x = [0.0; 10];
        let mut out = [0.0; 4];
        for (start, width) in [(0, 0), (4, 2), (5, 1), (1, usize::MAX)] {
            let err = slice_features((start, width), (&x, 2, 5), &mut out[..2 * width.min(2)]);
            let msg = err.unwrap_err().to_string();
            assert!(msg.contains("slice_features"), "{msg}");
        }
        assert!(slice_features((1, 2), (&x, 2, 5), &mut out[..3]).is_err());
        assert!(slice_features((1, 2), (&x[..9], 2, 5), &mut out).is_err());
    }
}
