//! Each row's own step of a padded batch of sequences (see
//! `tensorfit_core::seq_lengths::step_at`): the gather that reads it (`slice_time` with
//! lengths, and an LSTM's `h_n`) and the scatter that is its gradient.

use tensorfit_core::seq_lengths::{check_lengths, step_at};
use tensorfit_core::Result;

/// `out[b] = x[s, b]` with `s = step_at(t, lengths[b])`, from `x` `[T, B, F]` into `out`
/// `[B, F]`; rows of empty sequences keep what `out` held. The lengths have been checked
/// against `T` by the caller.
pub fn gather_steps(t: usize, lengths: &[f32], x: &[f32], out: &mut [f32]) {
    let width = out.len() / lengths.len().max(1);
    let step = lengths.len() * width;
    for (b, (row, &len)) in out.chunks_mut(width).zip(lengths).enumerate() {
        if let Some(s) = step_at(t, len) {
            row.copy_from_slice(&x[s * step + b * width..][..width]);
        }
    }
}

/// `slice_time` with lengths: [`gather_steps`], zero for empty sequences.
pub fn slice_time(t: usize, lengths: &[f32], x: &[f32], out: &mut [f32]) -> Result<()> {
    check_lengths("lengths", lengths, x.len() / out.len().max(1))?;
    out.fill(0.0);
    gather_steps(t, lengths, x, out);
    Ok(())
}

/// `scatter_time` with lengths, the gradient of [`slice_time`]: `out` `[T, B, F]` zero
/// except `out[s, b] = x[b]` with `s = step_at(t, lengths[b])`.
pub fn scatter_time(t: usize, lengths: &[f32], x: &[f32], out: &mut [f32]) -> Result<()> {
    check_lengths("lengths", lengths, out.len() / x.len().max(1))?;
    let width = x.len() / lengths.len().max(1);
    let step = x.len();
    out.fill(0.0);
    for (b, (row, &len)) in x.chunks(width).zip(lengths).enumerate() {
        if let Some(s) = step_at(t, len) {
            out[s * step + b * width..][..width].copy_from_slice(row);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_reads_its_own_last_step_and_the_scatter_puts_it_back() {
        // T = 3, B = 3, F = 2; lengths 2, 0, 3.
        let x: Vec<f32> = (0..18).map(|v| v as f32).collect();
        let lengths = [2.0, 0.0, 3.0];
        let mut out = [f32::NAN; 6];
        slice_time(2, &lengths, &x, &mut out).unwrap();
        assert_eq!(out, [6.0, 7.0, 0.0, 0.0, 16.0, 17.0]);
        slice_time(0, &lengths, &x, &mut out).unwrap();
        assert_eq!(out, [0.0, 1.0, 0.0, 0.0, 4.0, 5.0]);
        let mut dx = [f32::NAN; 18];
        scatter_time(2, &lengths, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut dx).unwrap();
        let mut want = [0.0; 18];
        (want[6], want[7], want[16], want[17]) = (1.0, 2.0, 5.0, 6.0);
        assert_eq!(dx, want);
        let err = slice_time(2, &[4.0, 0.0, 1.0], &x, &mut out).unwrap_err();
        assert!(err.to_string().contains("batch row 0"), "{err}");
    }
}
