//! The element types a safetensors header names, with their sizes in bits.

use std::fmt;

/// An element type as the safetensors format spells it (`F32`, `BF16`, `F8_E4M3`, ...):
/// every dtype of the format's version 0.8, so that a file holding one tensorfit does not
/// read is still read whole and the tensor refused by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dtype {
    Bool,
    /// 4-bit float (MXF4).
    F4,
    /// 6-bit floats (MXF6).
    F6E2M3,
    F6E3M2,
    U8,
    I8,
    F8E5M2,
    F8E4M3,
    F8E8M0,
    F8E4M3Fnuz,
    F8E5M2Fnuz,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    /// Complex, two f32 parts.
    C64,
    F64,
    I64,
    U64,
}

/// Every dtype with its name in headers and its size in bits: the one table both ways.
const TABLE: [(Dtype, &str, u64); 22] = [
    (Dtype::Bool, "BOOL", 8),
    (Dtype::F4, "F4", 4),
    (Dtype::F6E2M3, "F6_E2M3", 6),
    (Dtype::F6E3M2, "F6_E3M2", 6),
    (Dtype::U8, "U8", 8),
    (Dtype::I8, "I8", 8),
    (Dtype::F8E5M2, "F8_E5M2", 8),
    (Dtype::F8E4M3, "F8_E4M3", 8),
    (Dtype::F8E8M0, "F8_E8M0", 8),
    (Dtype::F8E4M3Fnuz, "F8_E4M3FNUZ", 8),
    (Dtype::F8E5M2Fnuz, "F8_E5M2FNUZ", 8),
    (Dtype::I16, "I16", 16),
    (Dtype::U16, "U16", 16),
    (Dtype::F16, "F16", 16),
    (Dtype::BF16, "BF16", 16),
    (Dtype::I32, "I32", 32),
    (Dtype::U32, "U32", 32),
    (Dtype::F32, "F32", 32),
    (Dtype::C64, "C64", 64),
    (Dtype::F64, "F64", 64),
    (Dtype::I64, "I64", 64),
    (Dtype::U64, "U64", 64),
];

impl Dtype {
    /// Every dtype, in the format's order (increasing alignment).
    pub fn all() -> impl Iterator<Item = Dtype> {
        TABLE.iter().map(|&(dtype, _, _)| dtype)
    }

    /// The dtype a header names `name`, if the format has one.
    pub fn from_name(name: &str) -> Option<Dtype> {
        TABLE.iter().find(|e| e.1 == name).map(|e| e.0)
    }

    /// The name headers give it: `F32`, `F8_E4M3`, `BOOL`.
    pub fn name(self) -> &'static str {
        TABLE[self as usize].1
    }

    /// Bits of one element (4 and 6 for the sub-byte floats).
    pub fn bits(self) -> u64 {
        TABLE[self as usize].2
    }

    /// Bytes of `count` elements, or `None` when that is not a whole number of bytes or
    /// overflows.
    pub fn bytes_of(self, count: u64) -> Option<u64> {
        let bits = count.checked_mul(self.bits())?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_declaration_order_and_names_round_trip() {
        for (i, dtype) in Dtype::all().enumerate() {
            assert_eq!(dtype as usize, i, "{dtype}");
            assert_eq!(Dtype::from_name(dtype.name()), Some(dtype));
        }
        assert_eq!(Dtype::from_name("f32"), None);
        assert_eq!(Dtype::F4.bytes_of(3), None);
        assert_eq!(Dtype::F4.bytes_of(4), Some(2));
        assert_eq!(Dtype::F64.bytes_of(u64::MAX), None);
    }
}
