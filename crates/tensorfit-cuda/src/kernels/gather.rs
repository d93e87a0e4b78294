//! Gathers and scatter-adds of a table's token vectors (kernels in `gather.cu`): the ops
//! `embedding` and `embedding_backward`, and the input projection of a recurrent layer on
//! token input (`lstm.rs`), as in tensorfit-cpu's kernels/gather.rs. Where a token's
//! vector lies is a [`Table`], shared with every backend.
//!
//! A bad id (not a whole number in `[0, vocab)`) reads nothing and is left in the status
//! word; the backend reports it as an error naming its position at the next
//! `synchronize` or `read`.

use tensorfit_core::tokens::Table;
use tensorfit_core::Result;

use super::{count, int, Gpu, GATHER, SCATTER_ADD};
use crate::driver::{Arg, DevPtr};

/// The arguments both kernels take after their three tensors.
fn shape_args(g: &Gpu<'_>, t: Table, n: usize) -> Result<Vec<Arg>> {
    let (v_stride, e_stride) = t.strides();
    Ok(vec![
        Arg::Ptr(g.status),
        Arg::I64(count(n)),
        Arg::I32(int("width", t.width)?),
        Arg::I32(int("vocab", t.vocab)?),
        Arg::I64(count(v_stride)),
        Arg::I64(count(e_stride)),
    ])
}

/// `out[r, :] = the vector of token ids[r]` for `n` ids.
pub fn gather(
    g: &Gpu<'_>,
    table: DevPtr,
    t: Table,
    ids: DevPtr,
    out: DevPtr,
    n: usize,
) -> Result<()> {
    let mut args = vec![Arg::Ptr(table), Arg::Ptr(ids), Arg::Ptr(out)];
    args.extend(shape_args(g, t, n)?);
    g.launch_1d(GATHER, count(n) * count(t.width), &args)
}

/// `dtable = Σ_r (the vector of ids[r]) += dout[r, :]` from zero, in the order of `r`.
pub fn scatter_add(
    g: &Gpu<'_>,
    t: Table,
    ids: DevPtr,
    dout: DevPtr,
    dtable: DevPtr,
    n: usize,
) -> Result<()> {
    g.fill(dtable, 0.0, t.len())?;
    let mut args = vec![Arg::Ptr(dtable), Arg::Ptr(ids), Arg::Ptr(dout)];
    args.extend(shape_args(g, t, n)?);
    g.launch_1d(SCATTER_ADD, count(t.width), &args)
}

/// Each row of a padded batch at its own step (see `tensorfit_core::seq_lengths`), one
/// launch of `kernel` over `batch · width` elements: `GATHER_STEPS`, `out[b] = x[s, b]`
/// with `s = step_at(t, lengths[b])` (rows of empty sequences keep what `out` held), or
/// `SCATTER_STEPS`, its gradient into a zeroed `out`: `out[s, b] = x[b]`. The `[steps,
/// batch, width]` side is `x` for the gather and `out` for the scatter; `dims` is (t,
/// steps, batch, width).
pub fn steps_at_lengths(
    g: &Gpu<'_>,
    kernel: &str,
    [lengths, x, out]: [DevPtr; 3],
    (t, steps, batch, width): (usize, usize, usize, usize),
) -> Result<()> {
    let args = [
        Arg::Ptr(lengths),
        Arg::Ptr(x),
        Arg::Ptr(out),
        Arg::I32(int("step", t)?),
        Arg::I32(int("steps", steps)?),
        Arg::I32(int("batch", batch)?),
        Arg::I32(int("width", width)?),
    ];
    g.launch_1d(kernel, count(batch) * count(width), &args)
}
