//! `dropout` (kernel in `dropout.cu`), with the mask of `tensorfit_core::dropout`.

use tensorfit_core::{DropoutParams, Result};

use super::{count, Gpu, DROPOUT};
use crate::driver::{Arg, DevPtr};

/// A `u32` as the 32-bit integer argument a `.u32` kernel parameter reads (the same bits).
fn word(v: u32) -> Arg {
    Arg::I32(i32::from_ne_bytes(v.to_ne_bytes()))
}

/// `y = x · m`, `m` = `1 / (1 - p)` where the mask of `key` and `p` keeps an element, else 0, over `n`
/// elements.
pub fn dropout(g: &Gpu<'_>, p: DropoutParams, [x, key, y]: [DevPtr; 3], n: usize) -> Result<()> {
    g.launch_1d(
        DROPOUT,
        count(n),
        &[
            Arg::Ptr(x),
            Arg::Ptr(key),
            Arg::Ptr(y),
            Arg::I64(count(n)),
            word(p.site),
            word(p.offset),
            word(p.threshold()),
            Arg::F32(p.scale()),
        ],
    )
}
