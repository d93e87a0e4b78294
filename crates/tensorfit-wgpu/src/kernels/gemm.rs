//! Matrix products: the `matmul` kernel, and the GEMM the LSTM kernels use
//! (shaders/gemm.wgsl).
//!
//! A product is one launch when its operands fit in a binding each. When one does not
//! (a weight gradient over all `T·B` rows of a long sequence, the input projection of a
//! 200 MB sequence), the product is cut into blocks: rows of the output, columns of the
//! output, and ranges of the inner dimension `k`, the block sizes chosen so that every
//! operand's block touches at most one binding's span; blocks over `k` accumulate into
//! the output in order, so the sum over `k` is the same chain as in one launch.

use tensorfit_core::Result;

use super::{word, Launches};
use crate::backend_error;
use crate::shaders::MATMUL;
use crate::window::{Operand, Region};

/// Output tile of one workgroup (rows and columns).
const TILE: usize = 64;
/// Longest inner dimension of one launch: 1024 slices of 16, within the loop budget.
const MAX_K: usize = 16 * 1024;

/// A matrix operand: `rows × cols`, row-major with leading dimension `ld`, starting at
/// element `at` of `region`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mat {
    pub region: Region,
    pub at: usize,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

impl Mat {
    /// The whole region as a `[rows, cols]` matrix.
    pub fn new(region: Region, rows: usize, cols: usize) -> Self {
        Mat {
            region,
            at: 0,
            rows,
            cols,
            ld: cols,
        }
    }

    /// Rows `first..first + rows` of this matrix.
    pub fn rows(self, first: usize, rows: usize) -> Self {
        Mat {
            at: self.at + first * self.ld,
            rows,
            ..self
        }
    }

    /// Element offset and touched range of the block at (`r0`, `c0`) of `r × c`.
    fn block(&self, r0: usize, c0: usize, r: usize, c: usize) -> (usize, std::ops::Range<usize>) {
        let at = self.at + r0 * self.ld + c0;
        (at, at..at + span_of(r, c, self.ld))
    }
}

/// Elements between the first and last (inclusive) of an `r × c` block with stride `ld`.
fn span_of(r: usize, c: usize, ld: usize) -> usize {
    if r == 0 || c == 0 {
        0
    } else {
        (r - 1) * ld + c
    }
}

/// `c = op(a) · op(b)` for the `MatMul` op: `a` `[M, K]` (`[K, M]` if `trans_a`), `b`
/// `[K, N]` (`[N, K]` if `trans_b`), `c` `[M, N]`.
pub(crate) fn matmul(
    l: &mut Launches,
    (a, a_dims, trans_a): (Region, [usize; 2], bool),
    (b, b_dims, trans_b): (Region, [usize; 2], bool),
    c: Region,
) -> Result<()> {
    let a = Mat::new(a, a_dims[0], a_dims[1]);
    let b = Mat::new(b, b_dims[0], b_dims[1]);
    let m = if trans_a { a.cols } else { a.rows };
    let n = if trans_b { b.rows } else { b.cols };
    gemm(l, (a, trans_a), (b, trans_b), Mat::new(c, m, n), false)
}

/// `c (+)= op(a) · op(b)`: accumulates into `c`'s values when `accumulate`, else
/// overwrites them (as BLAS with beta 1 or 0).
pub(crate) fn gemm(
    l: &mut Launches,
    (a, trans_a): (Mat, bool),
    (b, trans_b): (Mat, bool),
    c: Mat,
    accumulate: bool,
) -> Result<()> {
    let (m, k) = if trans_a {
        (a.cols, a.rows)
    } else {
        (a.rows, a.cols)
    };
    let (kb, n) = if trans_b {
        (b.cols, b.rows)
    } else {
        (b.rows, b.cols)
    };
    if k != kb || c.rows != m || c.cols != n {
        return Err(backend_error(format!(
            "gemm: [{m}, {k}] · [{kb}, {n}] into [{}, {}]",
            c.rows, c.cols
        )));
    }
    for (what, x) in [("a", &a), ("b", &b), ("c", &c)] {
        if x.at + span_of(x.rows, x.cols, x.ld) > x.region.len || x.cols > x.ld {
            return Err(backend_error(format!(
                "gemm: `{what}` [{}, {}] (ld {}) from element {} lies outside its {} elements",
                x.rows, x.cols, x.ld, x.at, x.region.len
            )));
        }
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let [mc, nc, kc] = block_sizes(l, [m, n, k], [(&a, trans_a), (&b, !trans_b)], &c);
    for m0 in (0..m).step_by(mc) {
        let mr = mc.min(m - m0);
        for n0 in (0..n).step_by(nc) {
            let nr = nc.min(n - n0);
            let mut k0 = 0;
            loop {
                let kr = kc.min(k - k0);
                let (a_off, a_touch) = if trans_a {
                    a.block(k0, m0, kr, mr)
                } else {
                    a.block(m0, k0, mr, kr)
                };
                let (b_off, b_touch) = if trans_b {
                    b.block(n0, k0, nr, kr)
                } else {
                    b.block(k0, n0, kr, nr)
                };
                let (c_off, c_touch) = c.block(m0, n0, mr, nr);
                let ops = vec![
                    Operand::part(a.region, a_touch),
                    Operand::part(b.region, b_touch),
                    Operand::part(c.region, c_touch),
                ];
                let values = vec![
                    word(a_off),
                    word(b_off),
                    word(c_off),
                    word(mr),
                    word(nr),
                    word(kr),
                    word(a.ld),
                    word(b.ld),
                    word(c.ld),
                    u32::from(trans_a),
                    u32::from(trans_b),
                    u32::from(accumulate || k0 > 0),
                ];
                let groups = [nr.div_ceil(TILE) as u32, mr.div_ceil(TILE) as u32, 1];
                l.push_groups(&MATMUL, ops, values, groups);
                k0 += kr;
                if k0 >= k {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// The largest `x ≤ limit` such that an operand block with `x` along one dimension and
/// `other` along the other touches at most `span` elements; `x_is_row` says whether `x`
/// counts stored rows (each `ld` apart) or columns. 0 when none fits.
fn largest(limit: usize, other: usize, x_is_row: bool, ld: usize, span: usize) -> usize {
    if x_is_row {
        if other > span {
            0
        } else {
            limit.min((span - other) / ld.max(1) + 1)
        }
    } else {
        // Columns: `other` rows of which the last adds `x`.
        let before = other.saturating_sub(1) * ld;
        limit.min(span.saturating_sub(before))
    }
}

/// Block sizes `[mc, nc, kc]` such that every operand's block touches at most one
/// binding's span and the workgroup grid stays within the device's limit, with as few
/// blocks as possible. `ab` are the two inputs with a flag saying whether their stored
/// rows run along `k` (op(a) with `trans_a`, op(b) without `trans_b`).
///
/// For each candidate `kc` (the whole of `k` up to [`MAX_K`], or a power of two below
/// it), the largest
/// `mc` that op(a)'s block allows is tried along with smaller powers of two, and for each
/// the largest `nc` that op(b) and c allow; the fewest launches win (ties: larger `kc`,
/// fewer accumulation passes).
fn block_sizes(l: &Launches, [m, n, k]: [usize; 3], ab: [(&Mat, bool); 2], c: &Mat) -> [usize; 3] {
    let span = l.span();
    let most = TILE * l.limits.max_groups as usize;
    let [(a, a_rows_k), (b, b_rows_k)] = ab;
    let whole = [(a, a_rows_k, m), (b, b_rows_k, n)]
        .iter()
        .all(|&(x, rows_k, other)| {
            let (r, c) = if rows_k { (k, other) } else { (other, k) };
            span_of(r, c, x.ld) <= span
        });
    if whole && span_of(m, n, c.ld) <= span && m <= most && n <= most && k <= MAX_K {
        // The usual case: one launch.
        return [m, n, k.max(1)];
    }
    let powers = |top: usize| {
        std::iter::successors(Some(1usize), |p| p.checked_mul(2))
            .take_while(move |&p| p < top)
            .chain(std::iter::once(top))
    };
    let mut best: Option<(usize, [usize; 3])> = None;
    for kc in powers(k.clamp(1, MAX_K))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        // op(a) is m × k: rows along k when a_rows_k, so then m counts its columns.
        let mc_max = largest(m.min(most), kc, !a_rows_k, a.ld, span);
        for mc in powers(mc_max).filter(|&x| x > 0 && mc_max > 0) {
            let nc_b = largest(n.min(most), kc, !b_rows_k, b.ld, span);
            let nc = largest(nc_b, mc, false, c.ld, span);
            if nc == 0 {
                continue;
            }
            let count = m.div_ceil(mc) * n.div_ceil(nc) * k.max(1).div_ceil(kc);
            if best.is_none_or(|(c0, _)| count < c0) {
                best = Some((count, [mc, nc, kc]));
            }
        }
    }
    // A block of one element of each operand always fits (the span is at least 1).
    best.map_or([1, 1, 1], |(_, size)| size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Limits;
    use tensorfit_core::BufferId;

    fn region(id: u64, len: usize) -> Region {
        Region {
            buffer: BufferId(id),
            offset: 0,
            len,
        }
    }

    fn launches(span_elems: u64) -> Launches {
        Launches::new(Limits {
            binding_bytes: span_elems * 4 + 16,
            align: 16,
            max_groups: 65535,
        })
    }

    #[test]
    fn a_product_that_fits_is_one_launch() {
        let mut l = launches(1 << 20);
        let (m, k, n) = (100, 30, 40);
        matmul(
            &mut l,
            (region(0, m * k), [m, k], false),
            (region(1, n * k), [n, k], true),
            region(2, m * n),
        )
        .unwrap();
        assert_eq!(l.list.len(), 1);
        assert_eq!(l.list[0].groups, [1, 2, 1]);
    }

    #[test]
    fn large_operands_are_cut_into_blocks_that_fit() {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut l = launches(500);
            let (m, k, n) = (70, 90, 30);
            let a_dims = if trans_a { [k, m] } else { [m, k] };
            let b_dims = if trans_b { [n, k] } else { [k, n] };
            matmul(
                &mut l,
                (region(0, m * k), a_dims, trans_a),
                (region(1, k * n), b_dims, trans_b),
                region(2, m * n),
            )
            .unwrap();
            assert!(l.list.len() > 1);
            let mut covered = vec![0usize; m * n];
            for launch in &l.list {
                for op in &launch.operands {
                    assert!(op.touched.len() <= 500, "{:?}", op.touched);
                }
                let v = &launch.values;
                let (c_off, mr, nr, kr) = (v[2] as usize, v[3] as usize, v[4] as usize, v[5]);
                for i in 0..mr {
                    for j in 0..nr {
                        covered[c_off + i * n + j] += kr as usize;
                    }
                }
            }
            // Every output receives every k exactly once.
            assert!(covered.iter().all(|&c| c == k), "{trans_a} {trans_b}");
        }
    }

    #[test]
    fn a_long_inner_dimension_is_cut_into_launches_that_accumulate() {
        let mut l = launches(1 << 24);
        let (m, k, n) = (3, 40_000, 2);
        matmul(
            &mut l,
            (region(0, m * k), [k, m], true),
            (region(1, k * n), [k, n], false),
            region(2, m * n),
        )
        .unwrap();
        let ks: Vec<u32> = l.list.iter().map(|x| x.values[5]).collect();
        assert_eq!(ks.iter().sum::<u32>() as usize, k);
        assert!(ks.iter().all(|&kr| kr as usize <= MAX_K), "{ks:?}");
        let accumulate: Vec<u32> = l.list.iter().map(|x| x.values[11]).collect();
        assert_eq!(accumulate[0], 0);
        assert!(accumulate[1..].iter().all(|&a| a == 1));
    }

    #[test]
    fn mismatched_dimensions_are_errors() {
        let mut l = launches(1 << 20);
        let r = matmul(
            &mut l,
            (region(0, 6), [2, 3], false),
            (region(1, 6), [2, 3], false),
            region(2, 4),
        );
        assert!(r.is_err());
    }
}
