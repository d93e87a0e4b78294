//! The optimizer step: `adam_update`, one Adam step with PyTorch's formula
//! (shaders/adam.wgsl).
//!
//! As on the CPU, the bias corrections (and AdamW's decay factor) arrive as scalars the host writes to the
//! device each step, so the kernel needs no step counter and the graph is the same every
//! step. Elementwise, in chunks of at most one binding.

use tensorfit_core::{AdamParams, Result};

use super::elementwise::check_len;
use super::{bits, word, Launches};
use crate::shaders::ADAM_UPDATE;
use crate::window::{chunks, Operand, Region};

/// Update op: with `(s0, s1, s2) = scalars`,
/// `g = grad + weight_decay·param`, `param *= s2`, `m = β1·m + (1-β1)·g`, `v = β2·v + (1-β2)·g²`,
/// `param -= s0 · m / (sqrt(v)/s1 + eps)`.
pub(crate) fn adam_update(
    l: &mut Launches,
    p: AdamParams,
    grad: Region,
    scalars: Region,
    [param, m, v]: [Region; 3],
) -> Result<()> {
    const K: &str = "adam_update";
    check_len(K, "scalars", scalars, 3)?;
    check_len(K, "param", param, grad.len)?;
    check_len(K, "m", m, grad.len)?;
    check_len(K, "v", v, grad.len)?;
    for c in chunks(grad.len, l.span()) {
        let part = |r: Region| Operand::part(r, c.clone());
        let ops = vec![
            part(grad),
            Operand::whole(scalars),
            part(param),
            part(m),
            part(v),
        ];
        let values = vec![
            word(c.start),
            word(c.len()),
            bits(p.beta1),
            bits(p.beta2),
            bits(p.eps),
            bits(p.weight_decay),
        ];
        l.push(&ADAM_UPDATE, ops, values, c.len());
    }
    Ok(())
}
