//! Dropout's mask generator, the reference every backend's kernel follows, and the
//! attributes and shape rule of [`Op::Dropout`](crate::Op::Dropout).
//!
//! The mask is not drawn from a stream (as [`crate::Rng`] draws) but computed from a
//! counter: element `i` of dropout site `site` in the step whose key is `key` is kept when
//! [`element_bits`]`(`[`site_key`]`(key, site), offset + i) >= `[`DropoutParams::threshold`].
//! Nothing depends on what ran before, so out-of-memory fallback, resume from a checkpoint
//! and recomputation draw the very same mask, and the backward pass draws it again instead
//! of storing it. Only 32-bit unsigned multiplies, xors and shifts are used (WGSL has no
//! 64-bit integers), so the CPU, WGSL and CUDA kernels agree bit for bit:
//! `crates/tensorfit-wgpu/src/shaders/dropout.wgsl` and
//! `crates/tensorfit-cuda/src/kernels/dropout.cu` repeat [`mix32`], [`site_key`] and
//! [`element_bits`] line for line.
//!
//! The step's key comes from the run's seed and the optimizer step ([`step_key`]); the
//! host writes it into the graph's `dropout.key` input as two 16-bit halves ([`key_input`]),
//! which f32 holds exactly.

use crate::args::{Args, DropoutInputs, DropoutOutputs};
use crate::op::same;
use crate::op_shapes::named;
use crate::shape::Shape;

/// The attributes of [`Op::Dropout`](crate::Op::Dropout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropoutParams {
    /// The probability of zeroing an element, in `[0, 1)`.
    pub p: f32,
    /// Which dropout of the model this is (its own mask): each site of a graph differs.
    pub site: u32,
    /// The index of this tensor's first element in the mask: a tensor that is part of a
    /// longer one (a recomputed sub-segment) draws that part of the longer one's mask.
    pub offset: u32,
}

impl DropoutParams {
    /// Elements whose bits are below this are zeroed: `round(p · 2³²)`.
    pub fn threshold(&self) -> u32 {
        let t = (f64::from(self.p) * 4_294_967_296.0).round();
        if t >= f64::from(u32::MAX) {
            u32::MAX
        } else if t > 0.0 {
            t as u32
        } else {
            0
        }
    }

    /// What a kept element is multiplied by: `1 / (1 - p)` (inverted dropout, so that
    /// evaluation, which drops nothing, needs no scaling).
    pub fn scale(&self) -> f32 {
        1.0 / (1.0 - self.p)
    }
}

/// A 32-bit integer hash (Wellons' `lowbias32`): every output bit depends on every input
/// bit, and it is a bijection.
#[inline]
pub fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The key of one dropout site in one step.
#[inline]
pub fn site_key(key: u32, site: u32) -> u32 {
    mix32(key ^ mix32(site.wrapping_add(0x9e37_79b9)))
}

/// The random bits of element `index` (wrapping at 2³²) under `site_key`.
#[inline]
pub fn element_bits(site_key: u32, index: u32) -> u32 {
    mix32(mix32(index ^ site_key).wrapping_add(site_key))
}

/// The key of optimizer step `step` of a run seeded `seed`.
pub fn step_key(seed: u64, step: u64) -> u32 {
    let mut rng = crate::Rng::new(seed ^ step.wrapping_mul(0xd1b5_4a32_d192_ed03));
    (rng.next_u64() >> 32) as u32
}

/// `key` as the `dropout.key` input holds it: its high and low 16 bits, each exact in f32.
pub fn key_input(key: u32) -> [f32; 2] {
    [(key >> 16) as f32, (key & 0xffff) as f32]
}

/// The key back from a `dropout.key` input (as every kernel reads it).
pub fn key_from_input(halves: &[f32]) -> Result<u32, String> {
    match halves {
        &[hi, lo] => Ok(((hi as u32) << 16) | (lo as u32 & 0xffff)),
        other => Err(format!(
            "the dropout key has {} values, expected 2",
            other.len()
        )),
    }
}

/// [`Op::infer_shapes`](crate::Op::infer_shapes) for [`Op::Dropout`](crate::Op::Dropout).
pub(crate) fn dropout_shapes(p: &DropoutParams, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    let DropoutInputs { x, key } = named(list)?;
    same(key, &Shape::from([2]), "key")?;
    if !(0.0..1.0).contains(&p.p) {
        return Err(format!("the dropout probability {} is not in [0, 1)", p.p));
    }
    Ok(DropoutOutputs { y: x.clone() }.into_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(key: u32, site: u32, p: f32, n: u32) -> Vec<bool> {
        let t = DropoutParams { p, site, offset: 0 }.threshold();
        let k = site_key(key, site);
        (0..n).map(|i| element_bits(k, i) >= t).collect()
    }

    #[test]
    fn the_fraction_dropped_is_near_p_over_many_elements() {
        for p in [0.1f32, 0.2, 0.5, 0.9] {
            let n = 200_000;
            let dropped = kept(step_key(3, 1), 0, p, n)
                .iter()
                .filter(|k| !**k)
                .count();
            let fraction = dropped as f64 / f64::from(n);
            // Binomial standard deviation at n = 2e5 is at most 0.0012.
            assert!((fraction - f64::from(p)).abs() < 0.006, "p {p}: {fraction}");
        }
        assert!(
            kept(9, 0, 0.0, 10_000).iter().all(|k| *k),
            "p = 0 keeps all"
        );
    }

    #[test]
    fn masks_differ_between_steps_and_between_sites_and_repeat_for_the_same_key() {
        let a = kept(step_key(1, 1), 0, 0.5, 4096);
        assert_eq!(a, kept(step_key(1, 1), 0, 0.5, 4096));
        for other in [
            kept(step_key(1, 2), 0, 0.5, 4096),
            kept(step_key(2, 1), 0, 0.5, 4096),
            kept(step_key(1, 1), 1, 0.5, 4096),
        ] {
            let same = a.iter().zip(&other).filter(|(x, y)| x == y).count();
            // Independent masks agree on about half the elements.
            assert!((1700..2400).contains(&same), "{same} of 4096 agree");
        }
    }

    #[test]
    fn an_offset_draws_that_part_of_the_longer_mask() {
        let k = site_key(77, 2);
        let whole: Vec<u32> = (0..100).map(|i| element_bits(k, i)).collect();
        let part: Vec<u32> = (0..40).map(|i| element_bits(k, 60 + i)).collect();
        assert_eq!(&whole[60..], &part[..]);
    }

    #[test]
    fn the_key_survives_its_trip_through_f32() {
        for key in [0, 1, 0xffff, 0x1_0000, 0xdead_beef, u32::MAX] {
            assert_eq!(key_from_input(&key_input(key)), Ok(key));
        }
        assert!(key_from_input(&[1.0]).is_err());
    }

    #[test]
    fn the_hash_gives_the_values_every_backend_is_checked_against() {
        // Fixed values: a change here changes every mask, which the WGSL and CUDA copies
        // must follow (the conformance suite compares them with the CPU's), and so does
        // tools/dropout_reference.py's.
        assert_eq!(mix32(0), 0);
        assert_eq!(mix32(1), 0x6889_90c0);
        let k = site_key(0x1234_5678, 3);
        // As a Python transcription of the three functions computes them.
        assert_eq!(element_bits(k, 0), 0x1d1f_485c);
        assert_eq!(element_bits(k, 1), 0xdbb9_9145);
        let t = DropoutParams {
            p: 0.25,
            site: 0,
            offset: 0,
        };
        assert_eq!(t.threshold(), 1 << 30);
        assert_eq!(t.scale(), 1.0 / 0.75);
    }
}
