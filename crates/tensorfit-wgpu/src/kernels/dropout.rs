//! `dropout` (shaders/dropout.wgsl), as on the CPU: elementwise, in chunks of at most one
//! binding; each launch passes its chunk's start, so the mask index is the element's own.

use tensorfit_core::{DropoutParams, Result};

use super::elementwise::check_len;
use super::{bits, word, Launches};
use crate::shaders::DROPOUT;
use crate::window::{chunks, Operand, Region};

/// `y = x · m`, `m` = `1 / (1 - p)` where the mask of `key` and `p` keeps an element, else 0.
pub(crate) fn dropout(
    l: &mut Launches,
    p: DropoutParams,
    x: Region,
    key: Region,
    y: Region,
) -> Result<()> {
    const K: &str = "dropout";
    check_len(K, "key", key, 2)?;
    check_len(K, "y", y, x.len)?;
    for c in chunks(x.len, l.span()) {
        let part = |r: Region| Operand::part(r, c.clone());
        let ops = vec![part(x), Operand::whole(key), part(y)];
        let values = vec![
            word(c.start),
            word(c.len()),
            p.site,
            p.offset,
            p.threshold(),
            bits(p.scale()),
        ];
        l.push(&DROPOUT, ops, values, c.len());
    }
    Ok(())
}
