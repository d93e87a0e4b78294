//! Safe split-borrowing: the slices one op reads and writes, taken out of the backend's
//! buffers without `unsafe`.
//!
//! The planner puts many tensors in one arena buffer at different offsets, so the input
//! and output views of an op often point into the *same* `Vec<f32>`. Rust will not hand
//! out a `&mut` to part of a vector while another part is borrowed, unless the vector is
//! cut into disjoint pieces first. That is what [`split`] does:
//! 1. it borrows every buffer the op touches at once (`Ledger::get_many_mut`);
//! 2. in each buffer it sorts the views' element ranges, merges ranges that overlap into
//!    groups, and cuts the buffer at the group boundaries with `split_at_mut`;
//! 3. a group made only of inputs becomes one shared slice that each input sub-slices
//!    (so the same tensor passed twice, `x·xᵀ` for example, just works); a group that
//!    holds an output must hold nothing else, or the op would read what it is writing,
//!    and that is reported as an error rather than computed wrongly.
//!
//! For update ops (Adam, BatchNormStatsUpdate, Copy) the outputs are the targets; the
//! kernels read their old values through the same `&mut` slices they write.

use tensorfit_core::{Ledger, Result, TensorView};

use crate::backend_error;

/// The slices of one op call, in the order of the op's input and output views.
#[derive(Debug)]
pub(crate) struct Regions<'a> {
    pub inputs: Vec<&'a [f32]>,
    pub outputs: Vec<&'a mut [f32]>,
}

/// Who claims a range of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claimant {
    Input(usize),
    Output(usize),
}

impl std::fmt::Display for Claimant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Claimant::Input(i) => write!(f, "input #{i}"),
            Claimant::Output(o) => write!(f, "output #{o}"),
        }
    }
}

/// A non-empty element range `start..end` of one buffer.
#[derive(Debug, Clone, Copy)]
struct Claim {
    start: usize,
    end: usize,
    who: Claimant,
}

/// Borrows the slices named by `inputs` and `outputs` from the backend's buffers. Fails
/// if a view names a missing buffer, reaches past its end, or if an output overlaps any
/// other view.
pub(crate) fn split<'a>(
    buffers: &'a mut Ledger<Vec<f32>>,
    inputs: &[TensorView],
    outputs: &[TensorView],
) -> Result<Regions<'a>> {
    let mut ids: Vec<_> = inputs.iter().chain(outputs).map(|v| v.buffer).collect();
    ids.sort_unstable();
    ids.dedup();

    let mut ins: Vec<Option<&'a [f32]>> = vec![None; inputs.len()];
    let mut outs: Vec<Option<&'a mut [f32]>> = (0..outputs.len()).map(|_| None).collect();

    let borrowed = buffers.get_many_mut(&ids)?;
    for (&id, data) in ids.iter().zip(borrowed) {
        let mut claims = Vec::new();
        let views = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| (Claimant::Input(i), v))
            .chain(
                outputs
                    .iter()
                    .enumerate()
                    .map(|(o, v)| (Claimant::Output(o), v)),
            );
        for (who, view) in views {
            if view.buffer != id {
                continue;
            }
            let end = view
                .offset
                .checked_add(view.len())
                .filter(|&e| e <= data.len());
            let Some(end) = end else {
                return Err(backend_error(format!(
                    "{who} (offset {}, {} elements) reaches past the end of buffer {} ({} elements)",
                    view.offset,
                    view.len(),
                    id.0,
                    data.len()
                )));
            };
            if view.offset == end {
                // An empty view overlaps nothing; it gets an empty slice.
                match who {
                    Claimant::Input(i) => ins[i] = Some(&[]),
                    Claimant::Output(o) => outs[o] = Some(&mut []),
                }
            } else {
                claims.push(Claim {
                    start: view.offset,
                    end,
                    who,
                });
            }
        }
        split_buffer(data, claims, &mut ins, &mut outs)?;
    }

    let missing = || backend_error("a view was not assigned a region");
    Ok(Regions {
        inputs: ins
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?,
        outputs: outs
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(missing)?,
    })
}

/// Cuts one buffer into the claimed pieces. `claims` lie inside `data`.
fn split_buffer<'a>(
    mut data: &'a mut [f32],
    mut claims: Vec<Claim>,
    ins: &mut [Option<&'a [f32]>],
    outs: &mut [Option<&'a mut [f32]>],
) -> Result<()> {
    claims.sort_by_key(|c| (c.start, c.end));
    // `data` always starts at element `cursor` of the buffer.
    let mut cursor = 0;
    let mut k = 0;
    while k < claims.len() {
        // The group: claims[k..j], every range overlapping the union of those before it.
        let (start, mut end) = (claims[k].start, claims[k].end);
        let mut j = k + 1;
        while j < claims.len() && claims[j].start < end {
            end = end.max(claims[j].end);
            j += 1;
        }
        let group = &claims[k..j];
        if group.len() > 1 {
            if let Some(out) = group.iter().find(|c| matches!(c.who, Claimant::Output(_))) {
                let other = group.iter().find(|c| c.who != out.who).unwrap_or(out);
                return Err(backend_error(format!(
                    "{} (elements {}..{}) overlaps {} (elements {}..{}) in the same buffer",
                    out.who, out.start, out.end, other.who, other.start, other.end
                )));
            }
        }

        let rest = std::mem::take(&mut data);
        let (_gap, rest) = rest.split_at_mut(start - cursor);
        let (piece, rest) = rest.split_at_mut(end - start);
        data = rest;
        cursor = end;

        match group {
            [Claim {
                who: Claimant::Output(o),
                ..
            }] => outs[*o] = Some(piece),
            _ => {
                // Only inputs: share the piece among them.
                let shared: &'a [f32] = piece;
                for c in group {
                    if let Claimant::Input(i) = c.who {
                        ins[i] = Some(&shared[c.start - start..c.end - start]);
                    }
                }
            }
        }
        k = j;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::{BufferId, Shape};

    fn view(buffer: u64, offset: usize, len: usize) -> TensorView {
        TensorView::at(BufferId(buffer), offset, Shape::from([len]))
    }

    /// Buffers 0 (0..10) and 2 (100..106); buffer 1 was freed.
    fn slots() -> Ledger<Vec<f32>> {
        let mut l = Ledger::new("cpu", None);
        l.insert((0..10).map(|v| v as f32).collect(), 40);
        let freed = l.insert(vec![0.0], 4);
        l.insert((100..106).map(|v| v as f32).collect(), 24);
        l.remove(freed).unwrap();
        l
    }

    #[test]
    fn disjoint_views_in_one_buffer_and_across_buffers() {
        let mut s = slots();
        let ins = [view(2, 1, 2), view(0, 0, 3), view(0, 8, 2)];
        let outs = [view(0, 4, 3), view(2, 4, 2)];
        let r = split(&mut s, &ins, &outs).unwrap();
        assert_eq!(r.inputs[0], &[101.0, 102.0]);
        assert_eq!(r.inputs[1], &[0.0, 1.0, 2.0]);
        assert_eq!(r.inputs[2], &[8.0, 9.0]);
        assert_eq!(r.outputs[0], &[4.0, 5.0, 6.0]);
        assert_eq!(r.outputs[1], &[104.0, 105.0]);
        for o in r.outputs {
            o.fill(-1.0);
        }
        let data = s.get(BufferId(0)).unwrap();
        assert_eq!(&data[3..8], &[3.0, -1.0, -1.0, -1.0, 7.0]);
    }

    #[test]
    fn identical_and_overlapping_inputs_share() {
        let mut s = slots();
        let ins = [view(0, 2, 4), view(0, 2, 4), view(0, 4, 4)];
        let outs = [view(0, 0, 2)];
        let r = split(&mut s, &ins, &outs).unwrap();
        assert_eq!(r.inputs[0], r.inputs[1]);
        assert_eq!(r.inputs[2], &[4.0, 5.0, 6.0, 7.0]);
    }

    #[test]
    fn overlapping_output_is_an_error() {
        let mut s = slots();
        let err = split(&mut s, &[view(0, 0, 4)], &[view(0, 3, 2)]).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
        let err = split(&mut s, &[], &[view(0, 0, 4), view(0, 3, 2)]).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
        // The same output twice overlaps itself.
        let err = split(&mut s, &[], &[view(2, 0, 1), view(2, 0, 1)]).unwrap_err();
        assert!(err.to_string().contains("overlaps"), "{err}");
    }

    #[test]
    fn bad_views_are_errors() {
        let mut s = slots();
        assert!(split(&mut s, &[view(0, 8, 3)], &[]).is_err());
        assert!(split(&mut s, &[view(1, 0, 1)], &[]).is_err());
        assert!(split(&mut s, &[], &[view(7, 0, 1)]).is_err());
        assert!(split(&mut s, &[view(0, usize::MAX, 2)], &[]).is_err());
    }

    #[test]
    fn empty_views_get_empty_slices() {
        let mut s = slots();
        let r = split(&mut s, &[view(0, 3, 0)], &[view(0, 3, 0), view(0, 0, 10)]).unwrap();
        assert!(r.inputs[0].is_empty() && r.outputs[0].is_empty());
        assert_eq!(r.outputs[1].len(), 10);
    }
}
