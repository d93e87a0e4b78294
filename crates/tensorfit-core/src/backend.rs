//! The Backend trait: the whole surface a device must offer.
//!
//! A backend is an allocator plus an executor of single ops. It knows nothing of graphs,
//! autodiff or plans: the layers above decide *what* lives *where* (a [`TensorView`] is a
//! buffer plus an offset, so many tensors can share one arena buffer) and in which order
//! ops run; the backend only allocates the buffers it is told to and runs one op at a
//! time on views into them.
//!
//! The trait is object-safe (`Box<dyn Backend>`): the device is chosen at run time, and
//! dynamic dispatch costs nothing at one call per coarse op. Keeping the surface this
//! small is what lets a new backend be written, and tested against the CPU reference,
//! without touching the rest of the engine. A backend is three parts:
//! - a [`crate::Ledger`] of its buffers, which does the accounting (so the planner's
//!   estimate can be checked against [`MemoryInfo::peak`]), the cap, and every check of
//!   views and op calls; the backend writes only how to allocate, free and copy;
//! - its kernels, one typed method per op ([`crate::kernels::OpKernels`]), reached through
//!   the one [`crate::dispatch()`] (a new op is a compile error until it has one);
//! - [`crate::Error::OutOfMemory`] (never a panic) when memory runs out, so the session
//!   can fall back to another device.

use crate::error::Result;
use crate::op::Op;
use crate::shape::{DType, Shape};

/// A buffer allocated by a backend. Only meaningful to the backend that issued it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u64);

/// Where a tensor lives: a contiguous range of a buffer, `offset` counted in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorView {
    pub buffer: BufferId,
    pub offset: usize,
    pub shape: Shape,
    pub dtype: DType,
}

impl TensorView {
    /// A view of `shape` at the start of `buffer`.
    pub fn whole(buffer: BufferId, shape: Shape) -> Self {
        Self::at(buffer, 0, shape)
    }

    /// A view of `shape` starting `offset` elements into `buffer`.
    pub fn at(buffer: BufferId, offset: usize, shape: Shape) -> Self {
        TensorView {
            buffer,
            offset,
            shape,
            dtype: DType::F32,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.numel()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element range inside the buffer.
    pub fn range(&self) -> std::ops::Range<usize> {
        self.offset..self.offset + self.len()
    }
}

/// Memory as a backend sees it, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Capacity of the device (after any user cap).
    pub total: u64,
    /// Free memory reported by the device, where it can tell.
    pub free: Option<u64>,
    /// Bytes this backend has allocated and not freed.
    pub allocated: u64,
    /// Highest `allocated` since creation or the last [`Backend::reset_peak`].
    pub peak: u64,
}

/// The family of a backend, by the name users type (`--device cuda`).
///
/// Open: a backend crate names its own kind (`DeviceKind::new("cuda")`) and registers
/// one [`crate::Provider`] for it; nothing here lists the kinds. The built-in ones are
/// constants, under the names the enum they replace had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceKind(&'static str);

// why: the names of the enum's variants, which apps and messages already use
// (`DevicePolicy::only(DeviceKind::Wgpu)`).
#[allow(non_upper_case_globals)]
impl DeviceKind {
    /// The CPU (`tensorfit-cpu`), in every build.
    pub const Cpu: DeviceKind = DeviceKind("cpu");
    /// Any GPU through wgpu (`tensorfit-wgpu`).
    pub const Wgpu: DeviceKind = DeviceKind("wgpu");
    /// NVIDIA GPUs through CUDA (`tensorfit-cuda`).
    pub const Cuda: DeviceKind = DeviceKind("cuda");

    /// The kind named `name`: lower case, no `:` (device ids are `name:index`).
    pub const fn new(name: &'static str) -> DeviceKind {
        DeviceKind(name)
    }

    /// The name users type (`--device cuda`).
    pub fn name(self) -> &'static str {
        self.0
    }

    /// How a program names the kind, for messages: `DeviceKind::Wgpu` for the constants
    /// above, `DeviceKind::new("name")` for another.
    pub fn in_code(self) -> String {
        match [Self::Cpu, Self::Wgpu, Self::Cuda].contains(&self) {
            true => {
                let (first, rest) = self.0.split_at(1);
                format!("DeviceKind::{}{rest}", first.to_ascii_uppercase())
            }
            false => format!("DeviceKind::new({:?})", self.0),
        }
    }
}

/// What a backend tells the planner about its device. Everything the planner needs to
/// place tensors and to decide whether a run fits, nothing it needs to run them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub kind: DeviceKind,
    /// Human-readable device name (`NVIDIA H200`, `llvmpipe (LLVM 15.0.7, 256 bits)`).
    pub name: String,
    /// Capacity in bytes, after any user cap.
    pub total_bytes: u64,
    /// Free bytes as the device reports them now, where it can tell.
    pub free_bytes: Option<u64>,
    /// Where `total_bytes` and `free_bytes` come from, for tables
    /// (`driver`, `VK_EXT_memory_budget`, `MemAvailable`, `user cap`, ...).
    pub capacity_source: String,
    /// A software device (such as lavapipe) rather than hardware.
    pub software: bool,
    /// Largest single buffer the backend can allocate; the planner splits arenas to fit.
    pub max_buffer_bytes: u64,
    /// Alignment in bytes of every view's offset inside a buffer.
    pub alignment_bytes: u64,
    /// Memory the backend itself holds and does not allocate through
    /// [`Backend::allocate`] (context, library workspaces, compiled kernels).
    pub overhead_bytes: u64,
}

/// What the planner needs to know about a GPU model to estimate its driver's share of
/// its memory (a CUDA context grows with the streaming multiprocessors; cuBLAS's
/// workspace with the compute capability): the figures `--assume` presets carry for a
/// GPU that is not here, whichever backends the build has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuModel {
    /// Streaming multiprocessors.
    pub sms: u32,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
}

/// A device that can hold buffers and run ops. See the module documentation.
///
/// `Send`: a run open on a device moves between threads with it (the front door's
/// `Runner` and `Stream` are `Send`, so an app can train on a worker thread). Not `Sync`:
/// a backend's calls change the device's state one at a time.
pub trait Backend: Send {
    /// Short device name for messages and tables, such as `cpu`.
    fn name(&self) -> String;

    /// What the planner needs to know about this device.
    fn info(&self) -> DeviceInfo;

    /// Allocates a buffer of `bytes`, zero-filled. Fails with `OutOfMemory` when the
    /// device (or the user's cap on it) cannot hold it.
    fn allocate(&mut self, bytes: u64) -> Result<BufferId>;

    /// Releases a buffer.
    fn free(&mut self, buffer: BufferId) -> Result<()>;

    /// Copies host values into a view (`data.len()` must equal the view's length).
    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()>;

    /// Copies a view's values to the host (`out.len()` must equal the view's length).
    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()>;

    /// Runs one op. `inputs` and `outputs` are in the order of the op's structs in
    /// [`crate::args`]; for update ops the outputs are the targets, read and overwritten.
    /// The call is checked first ([`crate::Ledger::check_call`]): a malformed call is an
    /// error, never a wrong answer.
    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()>;

    /// Waits until all submitted work is finished.
    fn synchronize(&mut self) -> Result<()>;

    /// Current memory figures.
    fn memory(&self) -> MemoryInfo;

    /// Starts a new peak measurement from the currently allocated bytes.
    fn reset_peak(&mut self);
}

/// Checks views against the op's own shape rules before a kernel runs: the outputs must
/// have exactly the shapes the op produces from these inputs (which also fixes the number
/// of views). Part of [`crate::Ledger::check_call`]; the message names the op.
pub fn check_views(op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<(), String> {
    let shapes: Vec<_> = inputs.iter().map(|v| &v.shape).collect();
    let want = op
        .infer_shapes(&shapes)
        .map_err(|m| format!("{}: {m}", op.name()))?;
    let got: Vec<_> = outputs.iter().map(|v| &v.shape).collect();
    if got.len() != want.len() || got.iter().zip(&want).any(|(g, w)| *g != w) {
        return Err(format!(
            "{}: outputs have shapes {got:?}, the op produces {want:?}",
            op.name()
        ));
    }
    Ok(())
}

/// Checks that no output of an op overlaps another of its views (the kernel would read
/// what it is writing); inputs may overlap each other. Part of
/// [`crate::Ledger::check_call`].
pub fn check_no_overlap(inputs: &[TensorView], outputs: &[TensorView]) -> Result<(), String> {
    let who = |k: usize| match k.checked_sub(inputs.len()) {
        Some(o) => format!("output #{o}"),
        None => format!("input #{k}"),
    };
    let views: Vec<_> = inputs.iter().chain(outputs).collect();
    for (i, a) in views.iter().enumerate().skip(inputs.len()) {
        for (j, b) in views.iter().enumerate() {
            let (ra, rb) = (a.range(), b.range());
            let overlap = ra.start < rb.end && rb.start < ra.end;
            if i != j && a.buffer == b.buffer && !ra.is_empty() && !rb.is_empty() && overlap {
                return Err(format!(
                    "{} (elements {ra:?}) overlaps {} (elements {rb:?}) in the same buffer",
                    who(i),
                    who(j)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(buffer: u64, offset: usize, len: usize) -> TensorView {
        TensorView::at(BufferId(buffer), offset, Shape::from([len]))
    }

    #[test]
    fn outputs_may_not_overlap_other_views_inputs_may() {
        let ins = [view(0, 0, 8), view(0, 4, 8)];
        assert!(check_no_overlap(&ins, &[view(0, 12, 4)]).is_ok());
        assert!(check_no_overlap(&ins, &[view(1, 0, 8)]).is_ok());
        let e = check_no_overlap(&ins, &[view(0, 10, 4)]).unwrap_err();
        assert_eq!(
            e,
            "output #0 (elements 10..14) overlaps input #1 (elements 4..12) in the same buffer"
        );
        let outs = [view(2, 0, 4), view(2, 3, 4)];
        assert!(check_no_overlap(&[], &outs).is_err());
        assert!(check_no_overlap(&[], &[view(2, 0, 4), view(2, 4, 0)]).is_ok());
    }
}
