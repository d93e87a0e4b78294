//! Packed weights kept from one call to the next: [`PackCache`], which the backend owns,
//! and [`Packer`], through which a kernel packs a weight or takes the copy kept.
//!
//! Why: a recurrent layer packs `w_ihᵀ` and `w_hhᵀ` for the micro-kernels of `gemm_fast`
//! on every call. Over a sequence that is nothing, but a stream step (batch 1, one step,
//! `tensorfit::Stream`) reads each weight once, and packing it was half of the step.
//!
//! What is kept: the packed copies of the weights of recurrent forward calls that keep
//! nothing for a backward (inference: evaluation, prediction, streams), each under the
//! view it was packed from (buffer, element range) and the layout it was read in. A
//! training step writes its weights every step, so keeping its packs would only hold
//! memory; it packs afresh as before.
//!
//! Why a kept copy is never stale: the backend's buffers change only through
//! `Backend::write` (a host write: a restore, a loaded checkpoint, a stream's reset),
//! through the outputs of `Backend::execute` (an optimizer step writes the weights as
//! its outputs), and by `Backend::free`; the backend calls [`PackCache::written`] with
//! every view it is about to write, and [`PackCache::freed`] with every buffer it frees,
//! before the write happens, and both drop every kept copy whose source overlaps. Buffer
//! ids are never reused (`Ledger`), so a copy cannot outlive its buffer and be found
//! again under a new one. The kernels get their inputs as shared slices, so nothing else
//! can write a weight while a call reads it.
//!
//! The copies held count in the host plan (`kernel_memory::host_bytes`): every weight an
//! inference forward reads may be held packed at once.

use std::sync::Arc;

use tensorfit_core::{BufferId, TensorView};

use super::gemm_fast::{MatRef, PackedB};

/// Where a weight lies in the backend's buffers: elements `start..end` of `buffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub buffer: BufferId,
    pub start: usize,
    pub end: usize,
}

impl Source {
    /// The elements of `view`.
    pub fn of(view: &TensorView) -> Self {
        Source {
            buffer: view.buffer,
            start: view.offset,
            end: view.offset + view.len(),
        }
    }

    fn overlaps(&self, other: &Source) -> bool {
        self.buffer == other.buffer && self.start < other.end && other.start < self.end
    }
}

/// How a packed weight was read from its source: the shape and strides of the `B` packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Layout {
    fn of(b: &MatRef<'_>) -> Self {
        Layout {
            rows: b.rows,
            cols: b.cols,
            row_stride: b.row_stride,
            col_stride: b.col_stride,
        }
    }
}

/// One kept copy: of the whole `B`, or (`columns`) of those of its columns only.
#[derive(Debug)]
struct Kept {
    source: Source,
    layout: Layout,
    columns: Option<Vec<usize>>,
    packed: Arc<PackedB>,
}

/// The packed weights a backend keeps (see the module's comment).
#[derive(Debug, Default)]
pub struct PackCache {
    kept: Vec<Kept>,
}

impl PackCache {
    /// Forgets every copy packed from elements `view` covers: the backend is about to
    /// write them.
    pub fn written(&mut self, view: &TensorView) {
        if !self.kept.is_empty() {
            let written = Source::of(view);
            self.kept.retain(|k| !k.source.overlaps(&written));
        }
    }

    /// Forgets every copy packed from `buffer`: it is being freed.
    pub fn freed(&mut self, buffer: BufferId) {
        self.kept.retain(|k| k.source.buffer != buffer);
    }

    /// Bytes of the packed copies held.
    pub fn bytes(&self) -> u64 {
        self.kept.iter().map(|k| k.packed.bytes()).sum()
    }

    /// The copy of `b` (read from `source`; with `columns`, of those columns of it) kept,
    /// or packed now and kept.
    fn get_or_pack(
        &mut self,
        source: Source,
        b: MatRef<'_>,
        columns: Option<&[usize]>,
    ) -> Arc<PackedB> {
        let layout = Layout::of(&b);
        if let Some(k) = self
            .kept
            .iter()
            .find(|k| k.source == source && k.layout == layout && k.columns.as_deref() == columns)
        {
            return Arc::clone(&k.packed);
        }
        let packed = Arc::new(match columns {
            Some(cols) => PackedB::from_columns(b, cols),
            None => PackedB::new_exact(b),
        });
        self.kept.push(Kept {
            source,
            layout,
            columns: columns.map(<[usize]>::to_vec),
            packed: Arc::clone(&packed),
        });
        packed
    }
}

/// How one kernel call packs its weights: afresh, or through the backend's cache for the
/// inputs it names (a name, as the op's inputs struct has it, and the input's view).
#[derive(Debug, Default)]
pub struct Packer<'c> {
    cache: Option<(&'c mut PackCache, Vec<(&'static str, Source)>)>,
}

impl<'c> Packer<'c> {
    /// Packs every weight afresh (a call with no backend, a training call).
    pub fn fresh() -> Self {
        Packer { cache: None }
    }

    /// Packs the inputs `sources` names through `cache`, the others afresh.
    pub fn cached(cache: &'c mut PackCache, sources: Vec<(&'static str, Source)>) -> Self {
        Packer {
            cache: Some((cache, sources)),
        }
    }

    /// `b`, read from the input called `name` (all of its elements, `b.data`), packed.
    pub fn pack(&mut self, name: &str, b: MatRef<'_>) -> Arc<PackedB> {
        self.pack_picked(name, b, None)
    }

    /// Columns `columns` of `b` (read as in [`Packer::pack`]) packed, in that order
    /// (`PackedB::from_columns`): one thread's share of a weight, kept as the whole is.
    pub fn pack_columns(&mut self, name: &str, b: MatRef<'_>, columns: &[usize]) -> Arc<PackedB> {
        self.pack_picked(name, b, Some(columns))
    }

    fn pack_picked(&mut self, name: &str, b: MatRef<'_>, cols: Option<&[usize]>) -> Arc<PackedB> {
        if let Some((cache, sources)) = &mut self.cache {
            let source = sources.iter().find(|(n, _)| *n == name).map(|s| s.1);
            // The view must be the slice read: same length (the kernels are handed the
            // view's elements exactly).
            if let Some(s) = source.filter(|s| s.end - s.start == b.data.len()) {
                return cache.get_or_pack(s, b, cols);
            }
        }
        Arc::new(match cols {
            Some(cols) => PackedB::from_columns(b, cols),
            None => PackedB::new(b),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tensorfit_core::Shape;

    fn view(buffer: u64, offset: usize, len: usize) -> TensorView {
        TensorView::at(BufferId(buffer), offset, Shape::from([len]))
    }

    #[test]
    fn a_copy_is_reused_until_its_source_is_written_or_freed() {
        let w: Vec<f32> = (0..64).map(|v| v as f32).collect();
        let b = MatRef::row_major(&w, 8, 8);
        let mut cache = PackCache::default();
        let first = {
            let mut p = Packer::cached(&mut cache, vec![("w", Source::of(&view(1, 16, 64)))]);
            p.pack("w", b)
        };
        let again =
            Packer::cached(&mut cache, vec![("w", Source::of(&view(1, 16, 64)))]).pack("w", b);
        assert!(Arc::ptr_eq(&first, &again), "not reused");
        // Read transposed: another copy.
        let t =
            Packer::cached(&mut cache, vec![("w", Source::of(&view(1, 16, 64)))]).pack("w", b.t());
        assert!(!Arc::ptr_eq(&first, &t));
        assert_eq!(cache.kept.len(), 2);
        // A write beside it leaves it; one that touches a single element drops both.
        cache.written(&view(1, 0, 16));
        cache.written(&view(2, 16, 64));
        assert_eq!(cache.kept.len(), 2);
        cache.written(&view(1, 79, 1));
        assert!(cache.kept.is_empty());
        let _ = Packer::cached(&mut cache, vec![("w", Source::of(&view(1, 16, 64)))]).pack("w", b);
        assert!(cache.bytes() > 0);
        cache.freed(BufferId(1));
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn an_input_not_named_or_of_another_length_is_packed_afresh() {
        let w = vec![1.0; 12];
        let b = MatRef::row_major(&w, 3, 4);
        let mut cache = PackCache::default();
        let mut p = Packer::cached(&mut cache, vec![("w", Source::of(&view(0, 0, 10)))]);
        p.pack("w", b);
        p.pack("other", b);
        assert!(cache.kept.is_empty());
    }
}
