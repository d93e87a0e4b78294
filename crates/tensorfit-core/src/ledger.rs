//! [`Ledger`]: the buffer bookkeeping every backend embeds, written once.
//!
//! A backend owns memory of its own kind (`Vec<f32>`, a `wgpu::Buffer`, CUDA device
//! memory) and writes only how to allocate, free and copy it. Everything else about
//! buffers is here, as tinygrad's `Allocator` base does it for every runtime:
//! - the table of live buffers by [`BufferId`] (ids are never reused, so a stale id is an
//!   error instead of an alias of a newer buffer), and the "unknown or freed buffer"
//!   errors;
//! - the accounting that makes a plan checkable: `allocated` is the sum of the byte sizes
//!   asked for and not yet freed, `peak` its maximum, so a plan's estimate can be compared
//!   with a measured peak to the byte;
//! - the user's cap, applied to what the device reports ([`Ledger::capacity`]), and the
//!   out-of-memory error with the bytes that were available;
//! - the checks of views: against host data ([`Ledger::check_transfer`]) and of a whole
//!   op call ([`Ledger::check_call`]: shapes against [`Op::infer_shapes`], every view
//!   inside a live buffer, no output overlapping another view), which is the only way to
//!   make the [`OpCall`] that [`crate::dispatch()`] takes.

use crate::backend::{check_no_overlap, check_views, BufferId, MemoryInfo, TensorView};
use crate::error::{Error, Result};
use crate::kernels::OpCall;
use crate::op::Op;

/// One live buffer: the backend's memory and the bytes asked for.
#[derive(Debug)]
struct Entry<B> {
    buffer: B,
    bytes: u64,
}

/// A device's capacity as a backend reports it, before the user's cap: total bytes
/// (`None`: unknown) and free bytes now (`None`: the device cannot tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capacity {
    pub total: Option<u64>,
    pub free: Option<u64>,
}

/// See the module documentation. `B` is the backend's buffer.
#[derive(Debug)]
pub struct Ledger<B> {
    backend: &'static str,
    slots: Vec<Option<Entry<B>>>,
    allocated: u64,
    peak: u64,
    cap: Option<u64>,
}

impl<B> Ledger<B> {
    /// An empty ledger for backend `backend` (its name in errors), with the user's cap on
    /// the bytes it may hold at once, if any.
    pub fn new(backend: &'static str, cap: Option<u64>) -> Self {
        Ledger {
            backend,
            slots: Vec::new(),
            allocated: 0,
            peak: 0,
            cap,
        }
    }

    /// An [`Error::Backend`] of this backend.
    pub fn error(&self, message: impl Into<String>) -> Error {
        Error::Backend {
            backend: self.backend,
            message: message.into(),
        }
    }

    pub fn cap(&self) -> Option<u64> {
        self.cap
    }

    /// Sets the user's cap.
    pub fn set_cap(&mut self, cap: Option<u64>) {
        self.cap = cap;
    }

    /// True when the cap is below the device's total, so that the cap is the capacity (and
    /// the source of the figure, in device tables).
    pub fn cap_binds(&self, device_total: Option<u64>) -> bool {
        match (self.cap, device_total) {
            (Some(cap), Some(total)) => cap < total,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// `(total, free)` after the cap: the total is the smaller of the cap and the device's
    /// total (unbounded when neither is known); free memory is no more than the device
    /// reports nor than what is left under the cap.
    pub fn capacity(&self, device: Capacity) -> (u64, Option<u64>) {
        let total = match (self.cap, device.total) {
            (Some(cap), Some(total)) => cap.min(total),
            (cap, total) => cap.or(total).unwrap_or(u64::MAX),
        };
        let free = match self.cap {
            Some(cap) => {
                let left = cap.saturating_sub(self.allocated);
                Some(device.free.map_or(left, |f| f.min(left)))
            }
            None => device.free,
        };
        (total, free)
    }

    /// Bytes one more allocation may take now: what is left of the capacity, and no more
    /// than is free.
    pub fn available(&self, device: Capacity) -> u64 {
        let (total, free) = self.capacity(device);
        let left = total.saturating_sub(self.allocated);
        free.map_or(left, |f| f.min(left))
    }

    /// The out-of-memory error for a request of `requested` bytes.
    pub fn out_of_memory(&self, requested: u64, available: u64) -> Error {
        Error::OutOfMemory {
            device: self.backend.into(),
            requested,
            available,
        }
    }

    /// Fails with [`Error::OutOfMemory`] unless `bytes` fit in `available`.
    pub fn check_fits(&self, bytes: u64, available: u64) -> Result<()> {
        if bytes > available {
            return Err(self.out_of_memory(bytes, available));
        }
        Ok(())
    }

    /// Records a new buffer of `bytes` (the bytes asked for; the buffer may hold more).
    pub fn insert(&mut self, buffer: B, bytes: u64) -> BufferId {
        let id = BufferId(self.slots.len() as u64);
        self.slots.push(Some(Entry { buffer, bytes }));
        self.allocated += bytes;
        self.peak = self.peak.max(self.allocated);
        id
    }

    /// Takes a buffer out of the ledger (the backend releases it).
    pub fn remove(&mut self, id: BufferId) -> Result<B> {
        let entry = self.index(id).and_then(|i| self.slots[i].take());
        let Some(entry) = entry else {
            return Err(self.error(format!("free of unknown or freed buffer {}", id.0)));
        };
        self.allocated -= entry.bytes;
        Ok(entry.buffer)
    }

    /// The slot of a live buffer.
    fn index(&self, id: BufferId) -> Option<usize> {
        usize::try_from(id.0)
            .ok()
            .filter(|&i| self.slots.get(i).is_some_and(Option::is_some))
    }

    fn entry(&self, id: BufferId) -> Result<&Entry<B>> {
        self.index(id)
            .and_then(|i| self.slots[i].as_ref())
            .ok_or_else(|| self.error(format!("unknown or freed buffer {}", id.0)))
    }

    /// A live buffer.
    pub fn get(&self, id: BufferId) -> Result<&B> {
        self.entry(id).map(|e| &e.buffer)
    }

    /// A live buffer, mutably.
    pub fn get_mut(&mut self, id: BufferId) -> Result<&mut B> {
        let backend = self.backend;
        let slot = usize::try_from(id.0)
            .ok()
            .and_then(|i| self.slots.get_mut(i));
        match slot.and_then(Option::as_mut) {
            Some(e) => Ok(&mut e.buffer),
            None => Err(Error::Backend {
                backend,
                message: format!("unknown or freed buffer {}", id.0),
            }),
        }
    }

    /// The live buffers `ids` (sorted, distinct), mutably and all at once: the table is
    /// walked in id order with `split_first_mut`, so the borrows are disjoint.
    pub fn get_many_mut(&mut self, ids: &[BufferId]) -> Result<Vec<&mut B>> {
        let backend = self.backend;
        let mut slots = self.slots.as_mut_slice();
        let mut out = Vec::with_capacity(ids.len());
        // `slots` always starts at buffer `base`.
        let mut base = 0;
        for &id in ids {
            let unknown = || Error::Backend {
                backend,
                message: format!("unknown or freed buffer {}", id.0),
            };
            let at = usize::try_from(id.0).ok().and_then(|i| i.checked_sub(base));
            let rest = std::mem::take(&mut slots);
            let (slot, after) = at
                .and_then(|at| rest.get_mut(at..))
                .and_then(<[_]>::split_first_mut)
                .ok_or_else(unknown)?;
            out.push(&mut slot.as_mut().ok_or_else(unknown)?.buffer);
            slots = after;
            base = id.0 as usize + 1;
        }
        Ok(out)
    }

    /// Live buffers.
    pub fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fails unless `view` lies inside a live buffer (the buffer holds the bytes asked for,
    /// rounded up to whole elements).
    pub fn check_view(&self, view: &TensorView) -> Result<()> {
        let entry = self.entry(view.buffer)?;
        let size = view.dtype.size_bytes() as u64;
        let elements = entry.bytes.div_ceil(size);
        let end = (view.offset as u64).checked_add(view.len() as u64);
        if end.is_none_or(|end| end > elements) {
            return Err(self.error(format!(
                "view at offset {} of {} elements reaches past buffer {} ({elements} elements)",
                view.offset,
                view.len(),
                view.buffer.0
            )));
        }
        Ok(())
    }

    /// Checks a host transfer: `len` host elements to or from `view`.
    pub fn check_transfer(&self, view: &TensorView, len: usize) -> Result<()> {
        if view.len() != len {
            return Err(self.error(format!(
                "host data has {len} elements, the view {}",
                view.len()
            )));
        }
        self.check_view(view)
    }

    /// Checks one op call before any kernel runs: the outputs have exactly the shapes the
    /// op produces from these inputs, every view lies inside a live buffer, and no output
    /// overlaps another view (the kernel would read what it is writing; inputs may
    /// overlap each other). Every message names the op.
    pub fn check_call<'a>(
        &self,
        op: &'a Op,
        inputs: &'a [TensorView],
        outputs: &'a [TensorView],
    ) -> Result<OpCall<'a>> {
        check_views(op, inputs, outputs).map_err(|m| self.error(m))?;
        for view in inputs.iter().chain(outputs) {
            self.check_view(view)?;
        }
        check_no_overlap(inputs, outputs).map_err(|m| self.error(format!("{}: {m}", op.name())))?;
        Ok(OpCall::checked(op, inputs, outputs))
    }

    /// The memory figures, with the device's capacity after the cap.
    pub fn memory(&self, device: Capacity) -> MemoryInfo {
        let (total, free) = self.capacity(device);
        MemoryInfo {
            total,
            free,
            allocated: self.allocated,
            peak: self.peak,
        }
    }

    /// Bytes allocated and not freed.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Highest `allocated` since creation or the last [`Ledger::reset_peak`].
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Starts a new peak measurement from the currently allocated bytes.
    pub fn reset_peak(&mut self) {
        self.peak = self.allocated;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Shape;

    fn view(buffer: BufferId, offset: usize, len: usize) -> TensorView {
        TensorView::at(buffer, offset, Shape::from([len]))
    }

    #[test]
    fn accounting_counts_the_bytes_asked_for_and_the_peak() {
        let mut l = Ledger::new("test", None);
        let a = l.insert("a", 10);
        let b = l.insert("b", 6);
        assert_eq!((l.allocated(), l.peak(), l.len()), (16, 16, 2));
        assert_eq!(l.remove(a).unwrap(), "a");
        assert_eq!((l.allocated(), l.peak()), (6, 16));
        l.reset_peak();
        assert_eq!(l.peak(), 6);
        let e = l.remove(a).unwrap_err().to_string();
        assert_eq!(e, "backend test: free of unknown or freed buffer 0");
        assert!(l.get(a).is_err() && l.get(BufferId(9)).is_err());
        assert_eq!(*l.get(b).unwrap(), "b");
        // Ids are never reused.
        let c = l.insert("c", 1);
        assert_eq!(c, BufferId(2));
        let both = l.get_many_mut(&[b, c]).unwrap();
        assert_eq!((*both[0], *both[1]), ("b", "c"));
        assert!(l.get_many_mut(&[a, b]).is_err());
        assert!(l.get_many_mut(&[c, b]).is_err(), "ids must be sorted");
    }

    #[test]
    fn a_cap_binds_only_when_lower() {
        let device = Capacity {
            total: Some(1000),
            free: Some(800),
        };
        let mut l = Ledger::new("test", None);
        l.insert((), 100);
        assert_eq!(l.capacity(device), (1000, Some(800)));
        assert!(!l.cap_binds(device.total));
        l.set_cap(Some(5000));
        assert_eq!(l.capacity(device).0, 1000);
        assert!(!l.cap_binds(device.total));
        l.set_cap(Some(500));
        assert_eq!(l.capacity(device), (500, Some(400)));
        assert!(l.cap_binds(device.total));
        assert_eq!(l.available(device), 400);
        l.insert((), 500);
        let none = Capacity {
            free: None,
            ..device
        };
        assert_eq!(l.capacity(none).1, Some(0));
        assert_eq!(
            Ledger::<()>::new("t", None).capacity(Capacity::default()).0,
            u64::MAX
        );
    }

    #[test]
    fn views_must_lie_inside_live_buffers() {
        let mut l = Ledger::new("test", None);
        let a = l.insert((), 10); // 3 elements
        assert!(l.check_view(&view(a, 1, 2)).is_ok());
        let e = l.check_view(&view(a, 2, 2)).unwrap_err().to_string();
        assert!(e.contains("reaches past buffer 0 (3 elements)"), "{e}");
        assert!(l.check_view(&view(a, usize::MAX, 2)).is_err());
        assert!(l.check_view(&view(BufferId(5), 0, 1)).is_err());
        assert!(l.check_transfer(&view(a, 0, 2), 3).is_err());
    }

    #[test]
    fn a_call_is_checked_for_shapes_ranges_and_overlaps() {
        let mut l = Ledger::new("test", None);
        let a = l.insert((), 64);
        let copy = Op::Copy;
        let error = |input: TensorView, output: TensorView| {
            let (inputs, outputs) = ([input], [output]);
            let call = l.check_call(&copy, &inputs, &outputs);
            call.map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(error(view(a, 0, 4), view(a, 4, 4)).is_ok());
        let e = error(view(a, 0, 4), view(a, 2, 4)).unwrap_err();
        assert!(e.contains("overlaps"), "{e}");
        let e = error(view(a, 0, 4), view(a, 4, 3)).unwrap_err();
        assert!(e.contains("copy: outputs have shapes"), "{e}");
        let e = error(view(a, 0, 4), view(a, 14, 4)).unwrap_err();
        assert!(e.contains("reaches past"), "{e}");
    }
}
