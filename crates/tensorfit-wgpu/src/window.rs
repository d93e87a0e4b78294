//! Windows: binding parts of large buffers within the storage-binding limit.
//!
//! A device binds at most `max_storage_buffer_binding_size` bytes of a buffer to one
//! shader binding (128 MiB on lavapipe and many GPUs), while a buffer may be larger
//! (`max_buffer_size`) and the planner puts many tensors in one arena buffer, so a single
//! tensor can exceed what one binding reaches (a 200 MB LSTM output at batch 100, length
//! 2000, hidden 250). So nothing is ever bound whole by default. Each kernel launch says,
//! for each of its buffers, which [`Region`] (a tensor's place in a buffer) it uses and
//! which elements of it it touches (an [`Operand`]); [`window`] binds the whole region when
//! it fits (the usual case, and the same binding for every launch, so bind groups are
//! reused) and otherwise just the touched range. The host code of each op splits its
//! work (rows of a GEMM, chunks of elementwise work, row blocks of a reduction, summed
//! over the blocks) so that no launch touches more than [`Limits::span`] elements of any
//! operand; [`chunks`] and [`rects`] are the splitters most ops use.
//!
//! Shaders index every binding as `buf[base + i]` where `i` is an element index of the
//! *region* and `base` (passed in the launch's parameters) is where the region's first
//! element lies in the window. When the window starts inside the region, `base` is
//! "negative": it is computed modulo 2³², and WGSL's `u32` arithmetic wraps, so
//! `base + i` still lands on the right element for every `i` the launch touches.

use std::ops::Range;

use tensorfit_core::{BufferId, DType, Result, TensorView};

use crate::backend_error;

/// Bytes per element (f32).
pub(crate) const ELEM: u64 = DType::F32.size_bytes() as u64;

/// The most loop iterations one invocation may run in one launch. Mesa's llvmpipe (the
/// engine under lavapipe) silently stops every loop of a shader invocation after 65535
/// iterations in all, and a long launch risks a GPU watchdog elsewhere, so reductions
/// (sums over rows, the k loop of a GEMM) longer than this are split into successive
/// launches that accumulate.
pub(crate) const LOOP_BUDGET: usize = 16 * 1024;

/// A tensor's place: `len` elements of `buffer` from element `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    pub buffer: BufferId,
    pub offset: usize,
    pub len: usize,
}

impl Region {
    /// Elements `range` of this region, as a region of its own.
    pub fn slice(self, range: Range<usize>) -> Self {
        Region {
            offset: self.offset + range.start,
            len: range.len(),
            ..self
        }
    }

    pub fn of(view: &TensorView) -> Self {
        Region {
            buffer: view.buffer,
            offset: view.offset,
            len: view.len(),
        }
    }
}

/// What one launch uses of one region: the elements `touched` (region-relative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Operand {
    pub region: Region,
    pub touched: Range<usize>,
}

impl Operand {
    /// The launch may touch every element of `region`.
    pub fn whole(region: Region) -> Self {
        Operand {
            region,
            touched: 0..region.len,
        }
    }

    /// The launch touches only `touched` (region-relative).
    pub fn part(region: Region, touched: Range<usize>) -> Self {
        Operand { region, touched }
    }
}

/// The binding rules the host code must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Largest binding, in bytes (the device's, or lower for tests).
    pub binding_bytes: u64,
    /// Alignment of a binding's offset (`min_storage_buffer_offset_alignment`).
    pub align: u64,
    /// Largest workgroup count in one dimension of a dispatch.
    pub max_groups: u32,
}

impl Limits {
    /// The most elements a launch may touch in one operand: any such range fits in one
    /// window, whatever its alignment.
    pub fn span(&self) -> usize {
        let usable = self.binding_bytes.saturating_sub(self.align) / ELEM;
        usize::try_from(usable).unwrap_or(usize::MAX).max(1)
    }
}

/// One binding: `size` bytes of a buffer from byte `offset`, in which the region's first
/// element has index `base` (modulo 2³²).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub offset: u64,
    pub size: u64,
    pub base: u32,
}

fn align_down(x: u64, a: u64) -> u64 {
    x - x % a.max(1)
}

/// The binding for `op` in a buffer of `buffer_bytes` bytes (the region lies inside it;
/// the caller has checked). See the module documentation.
pub(crate) fn window(limits: &Limits, op: &Operand, buffer_bytes: u64) -> Result<Window> {
    let r = op.region;
    let byte = |element: usize| element as u64 * ELEM;
    let make = |start: u64, end: u64| -> Window {
        let offset = align_down(start, limits.align);
        // Bindings are never empty: an empty range binds its first element's word (the
        // launch reads nothing there).
        let end = end.max(offset + ELEM).min(buffer_bytes.max(ELEM));
        let offset = align_down(offset.min(end - ELEM), limits.align);
        let base = (r.offset as u64).wrapping_sub(offset / ELEM) as u32;
        Window {
            offset,
            size: end - offset,
            base,
        }
    };
    let whole = make(byte(r.offset), byte(r.offset + r.len));
    if whole.size <= limits.binding_bytes {
        return Ok(whole);
    }
    if op.touched.start > op.touched.end || op.touched.end > r.len {
        return Err(backend_error(format!(
            "launch touches elements {:?} of a region of {}",
            op.touched, r.len
        )));
    }
    let part = make(
        byte(r.offset + op.touched.start),
        byte(r.offset + op.touched.end),
    );
    if part.size > limits.binding_bytes {
        return Err(backend_error(format!(
            "internal: a launch touches {} elements of one tensor, more than one binding holds ({} bytes)",
            op.touched.len(),
            limits.binding_bytes
        )));
    }
    Ok(part)
}

/// Consecutive ranges of at most `span` elements covering `0..n`.
pub(crate) fn chunks(n: usize, span: usize) -> impl Iterator<Item = Range<usize>> {
    let span = span.max(1);
    (0..n.div_ceil(span)).map(move |k| k * span..((k + 1) * span).min(n))
}

/// A block of a row-major `[rows, cols]` matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rect {
    pub rows: Range<usize>,
    pub cols: Range<usize>,
}

impl Rect {
    /// The element range of the matrix the block touches.
    pub fn touched(&self, cols: usize) -> Range<usize> {
        if self.rows.is_empty() || self.cols.is_empty() {
            return 0..0;
        }
        self.rows.start * cols + self.cols.start..(self.rows.end - 1) * cols + self.cols.end
    }

    pub fn len(&self) -> usize {
        self.rows.len() * self.cols.len()
    }
}

/// Blocks covering a `[rows, cols]` matrix, each touching at most `span` elements and
/// at most `max_rows` rows, in row order: whole rows when a row fits (as many as fit),
/// else single rows cut in column ranges. Reductions over rows visit every column's
/// blocks in row order (and pass [`LOOP_BUDGET`] as `max_rows`).
pub(crate) fn rects(rows: usize, cols: usize, span: usize, max_rows: usize) -> Vec<Rect> {
    let span = span.max(1);
    if rows == 0 || cols == 0 {
        return Vec::new();
    }
    if cols <= span {
        chunks(rows, (span / cols).min(max_rows.max(1)))
            .map(|r| Rect {
                rows: r,
                cols: 0..cols,
            })
            .collect()
    } else {
        (0..rows)
            .flat_map(|r| {
                chunks(cols, span).map(move |c| Rect {
                    rows: r..r + 1,
                    cols: c,
                })
            })
            .collect()
    }
}

/// Row ranges of a `[rows, width]` matrix, each touching at most `span` elements; rows
/// are never cut, so a row wider than `span` is an error naming `what`.
pub(crate) fn row_chunks(
    rows: usize,
    width: usize,
    span: usize,
    what: &str,
) -> Result<Vec<Range<usize>>> {
    if width > span {
        return Err(backend_error(format!(
            "{what}: a row of {width} elements is more than one storage binding holds ({span} elements)"
        )));
    }
    Ok(chunks(rows, span / width.max(1)).collect())
}

/// Workgroup counts for `threads` invocations at `per_group` each, spread over x and y
/// so that neither exceeds `max` (shaders compute the index from both).
pub(crate) fn grid(threads: usize, per_group: u32, max: u32) -> [u32; 3] {
    let groups = threads.div_ceil(per_group.max(1) as usize).max(1);
    let x = groups.min(max.max(1) as usize);
    let y = groups.div_ceil(x);
    [x as u32, y.min(u32::MAX as usize) as u32, 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(binding_bytes: u64) -> Limits {
        Limits {
            binding_bytes,
            align: 16,
            max_groups: 65535,
        }
    }

    fn region(offset: usize, len: usize) -> Region {
        Region {
            buffer: BufferId(0),
            offset,
            len,
        }
    }

    #[test]
    fn a_region_that_fits_is_bound_whole() {
        let l = limits(1024);
        let op = Operand::part(region(5, 100), 10..20);
        let w = window(&l, &op, 4096).unwrap();
        // Element 5 is byte 20, aligned down to 16: the window starts at element 4.
        assert_eq!((w.offset, w.size, w.base), (16, 105 * 4 - 16, 1));
    }

    #[test]
    fn a_large_region_binds_the_touched_range_with_a_wrapping_base() {
        let l = limits(256);
        let op = Operand::part(region(10, 1000), 100..150);
        let w = window(&l, &op, 8192).unwrap();
        // Touched elements 110..160 of the buffer: bytes 440..640, offset 432 (element 108).
        assert_eq!((w.offset, w.size), (432, 640 - 432));
        // base + 100 must be 110 - 108 = 2, so base = 2 - 100 (mod 2^32).
        assert_eq!(w.base.wrapping_add(100), 2);
        let too_much = Operand::part(region(10, 1000), 0..70);
        assert!(window(&l, &too_much, 8192).is_err());
        let most = Operand::part(region(11, 1000), 3..3 + l.span());
        assert!(window(&l, &most, 8192).unwrap().size <= 256);
    }

    #[test]
    fn empty_ranges_bind_one_word_inside_the_buffer() {
        let l = limits(64);
        let w = window(&l, &Operand::whole(region(16, 0)), 64).unwrap();
        assert!(
            w.size >= 4 && w.offset.is_multiple_of(16) && w.offset + w.size <= 64,
            "{w:?}"
        );
    }

    #[test]
    fn splitters_cover_everything_within_the_span() {
        assert_eq!(chunks(10, 4).collect::<Vec<_>>(), vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(0, 4).count(), 0);
        let r = rects(5, 3, 7, usize::MAX); // two rows per block
        assert_eq!(r.len(), 3);
        assert_eq!(r[2].touched(3), 12..15);
        let r = rects(2, 10, 4, usize::MAX); // rows cut in columns
        assert_eq!(r.len(), 6);
        assert_eq!(r[4].touched(10), 14..18);
        assert!(r.iter().all(|b| b.touched(10).len() <= 4));
        assert_eq!(rects(5, 3, 100, 2).len(), 3);
        assert!(row_chunks(3, 9, 8, "x").is_err());
        assert_eq!(row_chunks(5, 2, 4, "x").unwrap(), vec![0..2, 2..4, 4..5]);
        assert_eq!(grid(1000, 256, 2), [2, 2, 1]);
        assert_eq!(grid(0, 256, 65535), [1, 1, 1]);
    }
}
