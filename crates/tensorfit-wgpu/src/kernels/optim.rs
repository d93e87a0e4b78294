//! SGD and gradient clipping: `sgd_update`, `sum_squares`, `clip_grad`
//! (shaders/optim.wgsl), as on the CPU.
//!
//! `sgd_update` and `clip_grad` are elementwise, in chunks of at most one binding;
//! `sum_squares` is one workgroup per chunk of at most one binding and
//! [`LOOP_BUDGET`] elements per invocation, the chunks accumulating in order.

use tensorfit_core::{Result, SgdParams};

use super::elementwise::{check_len, fill};
use super::{bits, word, Launches};
use crate::shaders::{CLIP_GRAD, SGD_UPDATE, SUM_SQUARES, WG};
use crate::window::{chunks, Operand, Region, LOOP_BUDGET};

/// Update op: with `(lr, s) = scalars`, `g = grad + weight_decay·param`,
/// `buf = momentum·buf + s·g`, `d = g + momentum·buf` (Nesterov) or `buf`,
/// `param -= lr·d`.
pub(crate) fn sgd_update(
    l: &mut Launches,
    p: SgdParams,
    grad: Region,
    scalars: Region,
    [param, buf]: [Region; 2],
) -> Result<()> {
    const K: &str = "sgd_update";
    check_len(K, "scalars", scalars, 2)?;
    check_len(K, "param", param, grad.len)?;
    check_len(K, "buf", buf, grad.len)?;
    for c in chunks(grad.len, l.span()) {
        let part = |r: Region| Operand::part(r, c.clone());
        let ops = vec![part(grad), Operand::whole(scalars), part(param), part(buf)];
        let values = vec![
            word(c.start),
            word(c.len()),
            bits(p.momentum),
            u32::from(p.nesterov),
            bits(p.weight_decay),
        ];
        l.push(&SGD_UPDATE, ops, values, c.len());
    }
    Ok(())
}

/// `total = Σ x²`.
pub(crate) fn sum_squares(l: &mut Launches, x: Region, total: Region) -> Result<()> {
    check_len("sum_squares", "total", total, 1)?;
    if x.len == 0 {
        fill(l, 0.0, total);
        return Ok(());
    }
    let most = l.span().min(WG as usize * LOOP_BUDGET);
    for (k, c) in chunks(x.len, most).enumerate() {
        let ops = vec![Operand::part(x, c.clone()), Operand::whole(total)];
        let values = vec![word(c.start), word(c.len()), u32::from(k > 0)];
        l.push(&SUM_SQUARES, ops, values, WG as usize);
    }
    Ok(())
}

/// `y = clamp(x · min(1, max_norm / (sqrt(total_sq) + 1e-6)), -value, value)`, a limit
/// of `+inf` being no limit.
pub(crate) fn clip_grad(
    l: &mut Launches,
    max_norm: f32,
    value: f32,
    x: Region,
    total_sq: Region,
    y: Region,
) -> Result<()> {
    const K: &str = "clip_grad";
    check_len(K, "total_sq", total_sq, 1)?;
    check_len(K, "y", y, x.len)?;
    let limit = |v: f32| {
        [
            u32::from(v.is_finite()),
            bits(if v.is_finite() { v } else { 0.0 }),
        ]
    };
    for c in chunks(x.len, l.span()) {
        let part = |r: Region| Operand::part(r, c.clone());
        let ops = vec![part(x), Operand::whole(total_sq), part(y)];
        let mut values = vec![word(c.start), word(c.len())];
        values.extend(limit(max_norm));
        values.extend(limit(value));
        l.push(&CLIP_GRAD, ops, values, c.len());
    }
    Ok(())
}
