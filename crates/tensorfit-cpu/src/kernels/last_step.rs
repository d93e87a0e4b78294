//! Each row's own last step of a padded batch of sequences (see
//! `tensorfit_core::seq_lengths`): the gather that reads it and the scatter that is its
//! gradient.

use tensorfit_core::seq_lengths::last_step;

/// `out[b] = x[L_b - 1, b]` for every row `b` with `L_b = lengths[b] ≥ 1`, from `x`
/// `[T, B, F]` into `out` `[B, F]`; rows of empty sequences keep what `out` held. The
/// lengths have been checked against `T` by the caller.
pub fn gather_last_steps(lengths: &[f32], x: &[f32], out: &mut [f32]) {
    let width = out.len() / lengths.len().max(1);
    let step = lengths.len() * width;
    for (b, (row, &len)) in out.chunks_mut(width).zip(lengths).enumerate() {
        if let Some(t) = last_step(len) {
            row.copy_from_slice(&x[t * step + b * width..][..width]);
        }
    }
}
