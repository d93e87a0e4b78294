//! `dropout`: inverted dropout with the counter-based mask of `tensorfit_core::dropout`,
//! which this kernel follows exactly (the WGSL and CUDA kernels are tested against it).

use rayon::prelude::*;
use tensorfit_core::dropout::{element_bits, key_from_input, site_key};
use tensorfit_core::{DropoutParams, Result};

use super::gemm_fast::{self, vectorize};
use super::{check_len, PARALLEL_MIN_ELEMENTS};
use crate::backend_error;

/// `y[i] = x[i] · m[i]`, `m[i]` = `1 / (1 - p)` where element `offset + i` of the mask is
/// kept, else 0 (a product, as PyTorch's: a NaN stays NaN); the mask is drawn from `key`
/// (`[2]`, the step's key as two 16-bit halves) and `p.site`.
pub fn dropout(p: DropoutParams, x: &[f32], key: &[f32], y: &mut [f32]) -> Result<()> {
    const K: &str = "dropout";
    check_len(K, "y", y, x.len())?;
    let key = key_from_input(key).map_err(|m| backend_error(format!("{K}: {m}")))?;
    let (k, threshold, scale) = (site_key(key, p.site), p.threshold(), p.scale());
    // Integer hashing and one multiply: the same bits at any vector width, so the loop
    // may run vectorised (AVX-512 where the CPU has it; written with indices and a
    // product, it is ten times faster than with a branch to 0).
    let token = gemm_fast::simd();
    let apply = |start: usize, y: &mut [f32], x: &[f32]| {
        // The mask's index wraps at 2³² (see tensorfit_core::dropout).
        let first = p.offset.wrapping_add(start as u32);
        vectorize(
            token,
            #[inline(always)]
            || {
                let x = &x[..y.len()];
                for j in 0..y.len() {
                    let bits = element_bits(k, first.wrapping_add(j as u32));
                    let factor = if bits >= threshold { scale } else { 0.0 };
                    y[j] = x[j] * factor;
                }
            },
        );
    };
    if x.len() < PARALLEL_MIN_ELEMENTS || crate::threads::inline() {
        apply(0, y, x);
    } else {
        y.par_chunks_mut(PARALLEL_MIN_ELEMENTS)
            .zip(x.par_chunks(PARALLEL_MIN_ELEMENTS))
            .enumerate()
            .for_each(|(c, (y, x))| apply(c * PARALLEL_MIN_ELEMENTS, y, x));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::dropout::key_input;

    #[test]
    fn kept_elements_are_scaled_dropped_ones_are_zero_and_threads_do_not_change_the_mask() {
        let p = DropoutParams {
            p: 0.4,
            site: 5,
            offset: 11,
        };
        let n = 3 * PARALLEL_MIN_ELEMENTS + 17;
        let x: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 * 1e-3).collect();
        let mut y = vec![f32::NAN; n];
        dropout(p, &x, &key_input(0xabcd_1234), &mut y).unwrap();
        let k = site_key(0xabcd_1234, 5);
        for (i, (&y, &x)) in y.iter().zip(&x).enumerate() {
            let kept = element_bits(k, 11 + i as u32) >= p.threshold();
            assert_eq!(y, if kept { x * p.scale() } else { 0.0 }, "element {i}");
        }
        assert!(dropout(p, &x, &[1.0], &mut y).is_err());
        assert!(dropout(p, &x, &key_input(1), &mut y[1..]).is_err());
    }
}
