//! Half-precision values read as `f32`: the f16 and bf16 tensors of PyTorch state dicts
//! and of users' data files. Both widen exactly (every f16 and bf16 value is an f32
//! value), so the conversion is a bit-level rewrite, not a rounding.

/// The IEEE 754 binary16 value of the little-endian `bytes`, as `f32`: zeros, subnormals,
/// infinities and NaNs (their payload kept) included.
pub fn f16_to_f32(bytes: [u8; 2]) -> f32 {
    let h = u16::from_le_bytes(bytes);
    let sign = u32::from(h >> 15) << 31;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        // A subnormal: mantissa · 2^-24, exact in f32 (its normal range is wider).
        (0, m) => {
            let magnitude = m as f32 * f32::from_bits(0x3380_0000);
            return if sign == 0 { magnitude } else { -magnitude };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        // Rebias the exponent from 15 to 127.
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// The bfloat16 value of the little-endian `bytes`, as `f32`: bf16 is an f32's upper half.
pub fn bf16_to_f32(bytes: [u8; 2]) -> f32 {
    f32::from_bits(u32::from(u16::from_le_bytes(bytes)) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16(bits: u16) -> f32 {
        f16_to_f32(bits.to_le_bytes())
    }

    #[test]
    fn f16_widens_exactly_at_every_kind_of_value() {
        assert_eq!(f16(0x3c00), 1.0);
        assert_eq!(f16(0xc000), -2.0);
        assert_eq!(f16(0x7bff), 65504.0);
        assert_eq!(f16(0x0400), 2f32.powi(-14));
        // The smallest and largest subnormals.
        assert_eq!(f16(0x0001), 2f32.powi(-24));
        assert_eq!(f16(0x03ff), 1023.0 * 2f32.powi(-24));
        assert_eq!(f16(0x8001), -(2f32.powi(-24)));
        assert_eq!(f16(0x0000).to_bits(), 0);
        assert_eq!(f16(0x8000).to_bits(), 0x8000_0000);
        assert_eq!(f16(0x7c00), f32::INFINITY);
        assert_eq!(f16(0xfc00), f32::NEG_INFINITY);
        assert!(f16(0x7e00).is_nan());
        assert_eq!(f16(0x3555), 0.333_251_95);
    }

    #[test]
    fn bf16_is_the_upper_half_of_an_f32() {
        for v in [1.0f32, -3.5, 0.0, f32::INFINITY, 1.0e-39] {
            let upper = (v.to_bits() >> 16) as u16;
            assert_eq!(
                bf16_to_f32(upper.to_le_bytes()).to_bits(),
                v.to_bits() & 0xffff_0000
            );
        }
    }

    #[test]
    fn every_f16_and_bf16_bit_pattern_widens_as_the_half_crate_does() {
        for bits in 0..=u16::MAX {
            let bytes = bits.to_le_bytes();
            let (ours, theirs) = (f16_to_f32(bytes), half::f16::from_bits(bits).to_f32());
            assert!(
                ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
                "f16 {bits:#06x}: {ours:e} against {theirs:e}"
            );
            let (ours, theirs) = (bf16_to_f32(bytes), half::bf16::from_bits(bits).to_f32());
            assert!(
                ours.to_bits() == theirs.to_bits() || (ours.is_nan() && theirs.is_nan()),
                "bf16 {bits:#06x}: {ours:e} against {theirs:e}"
            );
        }
    }
}
