//! Offsets in arenas: greedy by size, best fit.
//!
//! Tensors are placed largest first; each goes into the smallest gap, among the tensors
//! already placed whose lifetimes overlap its own, that can hold it (after Pisarchyk and
//! Lee 2020, the "greedy by size" strategy of TensorFlow Lite). A tensor that does not fit
//! below an arena's size cap goes to the next arena, so no buffer exceeds what the device
//! can allocate. Every offset and size is rounded up to the device's alignment.

use tensorfit_core::{Error, Result};

/// One item to place: a size in bytes and a lifetime `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    pub bytes: u64,
    pub start: usize,
    pub end: usize,
}

/// Where an item went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spot {
    pub arena: usize,
    pub offset: u64,
}

/// Rounds `bytes` up to a multiple of `align` (≥ 1).
pub fn align_up(bytes: u64, align: u64) -> u64 {
    bytes.div_ceil(align.max(1)).saturating_mul(align.max(1))
}

/// Places `items` in arenas of at most `cap` bytes; returns each item's spot (in input
/// order) and the size of each arena. `name(i)` names item `i` in errors.
pub fn place(
    items: &[Item],
    align: u64,
    cap: u64,
    name: impl Fn(usize) -> String,
) -> Result<(Vec<Spot>, Vec<u64>)> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(items[i].bytes), items[i].start, i));
    let mut spots = vec![
        Spot {
            arena: 0,
            offset: 0
        };
        items.len()
    ];
    // Per arena: (offset, size, start, end) of what is already placed.
    let mut arenas: Vec<Vec<(u64, u64, usize, usize)>> = Vec::new();
    for i in order {
        let it = items[i];
        let size = align_up(it.bytes.max(1), align);
        if size > cap {
            return Err(Error::input(format!(
                "`{}` needs {size} bytes in one buffer, more than the device's largest buffer ({cap} bytes)",
                name(i)
            )));
        }
        let mut chosen = None;
        for (a, placed) in arenas.iter().enumerate() {
            if let Some(offset) = best_gap(placed, it, size, align, cap) {
                chosen = Some((a, offset));
                break;
            }
        }
        let (a, offset) = chosen.unwrap_or_else(|| {
            arenas.push(Vec::new());
            (arenas.len() - 1, 0)
        });
        arenas[a].push((offset, size, it.start, it.end));
        spots[i] = Spot { arena: a, offset };
    }
    let sizes = arenas
        .iter()
        .map(|p| p.iter().map(|&(o, s, _, _)| o + s).max().unwrap_or(0))
        .collect();
    Ok((spots, sizes))
}

/// The offset of the smallest gap that holds `size` among placed items overlapping `it`
/// in time, if it stays below `cap`.
fn best_gap(
    placed: &[(u64, u64, usize, usize)],
    it: Item,
    size: u64,
    align: u64,
    cap: u64,
) -> Option<u64> {
    let mut live: Vec<(u64, u64)> = placed
        .iter()
        .filter(|&&(_, _, s, e)| s <= it.end && it.start <= e)
        .map(|&(o, sz, _, _)| (o, o + sz))
        .collect();
    live.sort_unstable();
    let mut best: Option<(u64, u64)> = None; // (gap size, offset)
    let mut cursor = 0u64;
    for (lo, hi) in live {
        if lo >= cursor + size {
            let gap = lo - cursor;
            if best.is_none_or(|(g, _)| gap < g) {
                best = Some((gap, cursor));
            }
        }
        cursor = cursor.max(align_up(hi, align));
    }
    match best {
        Some((_, offset)) => Some(offset),
        None if cursor + size <= cap => Some(cursor),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlaps(a: (Item, Spot), b: (Item, Spot)) -> bool {
        let time = a.0.start <= b.0.end && b.0.start <= a.0.end;
        let mem = a.1.arena == b.1.arena
            && a.1.offset < b.1.offset + b.0.bytes
            && b.1.offset < a.1.offset + a.0.bytes;
        time && mem
    }

    #[test]
    fn disjoint_lifetimes_share_memory_and_live_ones_never_overlap() {
        let items = [
            Item {
                bytes: 100,
                start: 0,
                end: 1,
            },
            Item {
                bytes: 100,
                start: 2,
                end: 3,
            },
            Item {
                bytes: 40,
                start: 1,
                end: 2,
            },
            Item {
                bytes: 60,
                start: 0,
                end: 3,
            },
        ];
        let (spots, sizes) = place(&items, 4, u64::MAX, |i| format!("t{i}")).unwrap();
        assert_eq!(sizes.len(), 1);
        assert!(sizes[0] <= 200, "{sizes:?}");
        for i in 0..items.len() {
            for j in 0..i {
                assert!(
                    !overlaps((items[i], spots[i]), (items[j], spots[j])),
                    "{i} {j}"
                );
            }
        }
        assert_eq!(
            spots[0].offset, spots[1].offset,
            "the two 100-byte tensors share bytes"
        );
    }

    #[test]
    fn arenas_respect_the_cap_and_alignment() {
        let items: Vec<Item> = (0..6)
            .map(|_| Item {
                bytes: 300,
                start: 0,
                end: 5,
            })
            .collect();
        let (spots, sizes) = place(&items, 256, 1024, |i| format!("t{i}")).unwrap();
        assert!(sizes.iter().all(|&s| s <= 1024), "{sizes:?}");
        assert!(spots.iter().all(|s| s.offset % 256 == 0));
        assert_eq!(sizes.len(), 3);
        let e = place(
            &[Item {
                bytes: 2000,
                start: 0,
                end: 0,
            }],
            4,
            1024,
            |_| "big".into(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("big"), "{e}");
    }

    #[test]
    fn random_instances_never_overlap() {
        let mut state = 12345u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for _ in 0..50 {
            let items: Vec<Item> = (0..40)
                .map(|_| {
                    let s = next() % 30;
                    Item {
                        bytes: 1 + (next() % 5000) as u64,
                        start: s,
                        end: s + next() % 10,
                    }
                })
                .collect();
            let (spots, sizes) = place(&items, 64, 20_000, |i| format!("t{i}")).unwrap();
            for i in 0..items.len() {
                assert!(spots[i].offset + items[i].bytes <= sizes[spots[i].arena]);
                for j in 0..i {
                    assert!(!overlaps((items[i], spots[i]), (items[j], spots[j])));
                }
            }
        }
    }
}
