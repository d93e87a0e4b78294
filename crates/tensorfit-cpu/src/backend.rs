//! [`CpuBackend`]: buffers in host memory, with exact byte accounting, and one
//! exhaustive dispatch from [`Op`] to the kernels.
//!
//! The accounting is what makes the planner checkable: `allocated` is the sum of the byte
//! sizes asked for in [`Backend::allocate`] and not yet freed, `peak` its maximum, so a
//! plan's estimate can be compared with a measured peak to the byte. The CPU has no
//! context or library workspace, so the two agree exactly.
//!
//! Memory exhaustion is an error, not an abort: a request beyond the user's cap, beyond
//! the machine's memory, or that the allocator refuses (`Vec::try_reserve_exact`)
//! returns [`Error::OutOfMemory`], so a session can report it or fall back.
//!
//! `execute` validates the views against [`Op::infer_shapes`] before any kernel runs, so
//! a view of the wrong shape is an error rather than a wrong answer, then borrows the
//! views' slices (see the `regions` module) and calls the kernel named `Op::name` on the
//! kernel pool's threads (`threads`: they flush subnormal floats to zero).

use std::fmt;
use std::time::Instant;

use tensorfit_core::{
    args, Backend, BufferId, DeviceInfo, DeviceKind, Error, MemoryInfo, Op, Result, TensorView,
};

use crate::backend_error;
use crate::host_memory;
use crate::kernels::adam::adam_update;
use crate::kernels::batchnorm::{
    batchnorm_backward, batchnorm_forward, batchnorm_stats_update, BatchNormBackwardInputs,
    BatchNormStats,
};
use crate::kernels::elementwise::{
    activation_backward, activation_forward, binary, copy, fill, scatter_time, slice_time,
    sum_to_shape,
};
use crate::kernels::gemm::matmul;
use crate::kernels::lstm::{
    lstm_backward, lstm_forward, LstmBackwardInputs, LstmBackwardOutputs, LstmForwardInputs,
    LstmForwardOutputs,
};
use crate::kernels::softmax::{softmax_cross_entropy_backward, softmax_cross_entropy_forward};
use crate::profile::KernelTimes;
use crate::regions::{self, slot_index, Regions};
use crate::threads;

/// The reference backend: `Vec<f32>` buffers, ndarray/matrixmultiply GEMMs, rayon.
pub struct CpuBackend {
    /// Buffers indexed by [`BufferId`]; `None` once freed. Ids are never reused, so a
    /// stale id is an error instead of an alias of a newer buffer.
    slots: Vec<Option<Vec<f32>>>,
    /// The bytes asked for, per slot (a buffer holds that many bytes rounded up to whole
    /// `f32`s; the accounting uses the bytes asked for).
    sizes: Vec<u64>,
    allocated: u64,
    peak: u64,
    /// The user's cap on this backend's memory, if any.
    cap: Option<u64>,
    /// The machine's memory (MemTotal), read once at creation.
    mem_total: Option<u64>,
    /// Wall time per kernel when `TENSORFIT_PROFILE` asks for it (see `profile.rs`).
    times: Option<KernelTimes>,
}

impl fmt::Debug for CpuBackend {
    // why: a derived Debug would print every element of every buffer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuBackend")
            .field("buffers", &self.slots.iter().flatten().count())
            .field("allocated", &self.allocated)
            .field("peak", &self.peak)
            .field("cap", &self.cap)
            .field("mem_total", &self.mem_total)
            .finish()
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        if let Some(times) = self.times.as_ref().filter(|t| !t.is_empty()) {
            eprint!("{}", times.report());
        }
    }
}

impl Default for CpuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuBackend {
    /// A backend limited only by the machine's memory.
    pub fn new() -> Self {
        CpuBackend {
            slots: Vec::new(),
            sizes: Vec::new(),
            allocated: 0,
            peak: 0,
            cap: None,
            mem_total: host_memory::total(),
            times: KernelTimes::from_env(),
        }
    }

    /// A backend that refuses to hold more than `bytes` at once (to rehearse a smaller
    /// device, or to leave memory to the rest of the machine).
    pub fn with_capacity_cap(bytes: u64) -> Self {
        let mut backend = Self::new();
        backend.cap = Some(bytes);
        backend
    }

    /// The capacity: the cap if set, else the machine's memory (unbounded if unknown).
    fn capacity(&self) -> u64 {
        self.cap.or(self.mem_total).unwrap_or(u64::MAX)
    }

    /// Bytes an allocation may take now: what is left of the capacity, and no more than
    /// the machine reports available (memory that exists but is in use elsewhere would
    /// be taken by swapping or the OOM killer, not by an error).
    fn available(&self) -> u64 {
        let left = self.capacity().saturating_sub(self.allocated);
        match host_memory::available() {
            Some(avail) => left.min(avail),
            None => left,
        }
    }

    /// The buffer behind a view, with the view's range checked.
    fn view_slot(&mut self, view: &TensorView, len: usize) -> Result<&mut [f32]> {
        if view.len() != len {
            return Err(backend_error(format!(
                "host data has {len} elements, the view {}",
                view.len()
            )));
        }
        let id = slot_index(view.buffer)?;
        let data = self
            .slots
            .get_mut(id)
            .and_then(Option::as_mut)
            .ok_or_else(|| backend_error(format!("unknown or freed buffer {id}")))?;
        let buffer_len = data.len();
        view.offset
            .checked_add(len)
            .and_then(|end| data.get_mut(view.offset..end))
            .ok_or_else(|| {
                backend_error(format!(
                    "view at offset {} of {len} elements reaches past buffer {id} ({buffer_len} elements)",
                    view.offset
                ))
            })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        let available = self.available();
        let oom = || Error::OutOfMemory {
            device: "cpu".into(),
            requested: bytes,
            available,
        };
        if bytes > available {
            return Err(oom());
        }
        let elements = usize::try_from(bytes.div_ceil(4)).map_err(|_| oom())?;
        let mut data = Vec::new();
        data.try_reserve_exact(elements).map_err(|_| oom())?;
        data.resize(elements, 0.0);

        let id = self.slots.len();
        self.slots.push(Some(data));
        self.sizes.push(bytes);
        self.allocated += bytes;
        self.peak = self.peak.max(self.allocated);
        Ok(BufferId(id as u64))
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        let id = slot_index(buffer)?;
        match self.slots.get_mut(id).and_then(Option::take) {
            Some(_) => {
                self.allocated -= self.sizes[id];
                Ok(())
            }
            None => Err(backend_error(format!(
                "free of unknown or freed buffer {id}"
            ))),
        }
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        self.view_slot(view, data.len())?.copy_from_slice(data);
        Ok(())
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        out.copy_from_slice(self.view_slot(view, out.len())?);
        Ok(())
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        check_shapes(op, inputs, outputs)?;
        let pool = threads::kernel_pool()?;
        let regions = regions::split(&mut self.slots, inputs, outputs)?;
        // The kernel runs on the kernel pool's threads, which flush subnormals to zero.
        let run = || pool.install(|| run_kernel(op, inputs, regions));
        let Some(times) = &mut self.times else {
            return run();
        };
        let start = Instant::now();
        let result = run();
        times.add(op.name(), start.elapsed());
        result
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            kind: DeviceKind::Cpu,
            name: cpu_model_name(),
            total_bytes: self.capacity(),
            free_bytes: self.memory().free,
            capacity_source: match self.cap {
                Some(_) => "user cap".to_string(),
                None => host_memory::source().to_string(),
            },
            software: false,
            // A Vec<f32> holds at most isize::MAX bytes.
            max_buffer_bytes: isize::MAX as u64,
            alignment_bytes: 4,
            overhead_bytes: 0,
        }
    }

    fn synchronize(&mut self) -> Result<()> {
        // Every kernel has finished when `execute` returns.
        Ok(())
    }

    fn memory(&self) -> MemoryInfo {
        let free = match (self.cap, host_memory::available()) {
            (Some(cap), avail) => Some(
                cap.saturating_sub(self.allocated)
                    .min(avail.unwrap_or(u64::MAX)),
            ),
            (None, avail) => avail,
        };
        MemoryInfo {
            total: self.capacity(),
            free,
            allocated: self.allocated,
            peak: self.peak,
        }
    }

    fn reset_peak(&mut self) {
        self.peak = self.allocated;
    }
}

/// Checks the views against the op's own shape rules: the outputs must have exactly the
/// shapes the op produces from these inputs (which also fixes the number of views).
fn check_shapes(op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
    tensorfit_core::backend::check_views(op, inputs, outputs).map_err(backend_error)
}

/// [`args::arity`] with this backend's error.
fn arity<T, const N: usize>(op: &Op, what: &str, items: Vec<T>) -> Result<[T; N]> {
    args::arity(op, what, items).map_err(backend_error)
}

/// Calls the kernel of `op` on the borrowed slices. `views` are the input views (for
/// the dimensions); the match is exhaustive, so a new op does not compile until it has a
/// kernel here.
fn run_kernel(op: &Op, views: &[TensorView], regions: Regions<'_>) -> Result<()> {
    let Regions { inputs, outputs } = regions;
    match op {
        Op::MatMul { trans_a, trans_b } => {
            let [a, b] = arity(op, "inputs", inputs)?;
            let [c] = arity(op, "outputs", outputs)?;
            matmul(
                a,
                args::dims2(&views[0]),
                b,
                args::dims2(&views[1]),
                *trans_a,
                *trans_b,
                c,
            )
        }
        Op::Binary(bop) => {
            let [a, b] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            binary(*bop, a, b, out)
        }
        Op::Activation(f) => {
            let [x] = arity(op, "inputs", inputs)?;
            let [y] = arity(op, "outputs", outputs)?;
            activation_forward(*f, x, y)
        }
        Op::ActivationBackward(f) => {
            let [y, dy] = arity(op, "inputs", inputs)?;
            let [dx] = arity(op, "outputs", outputs)?;
            activation_backward(*f, y, dy, dx)
        }
        Op::SumToShape { .. } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            sum_to_shape(x, out)
        }
        Op::Fill { value, .. } => {
            let [out] = arity(op, "outputs", outputs)?;
            fill(*value, out)
        }
        Op::SliceTime { t } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            slice_time(*t, x, out)
        }
        Op::ScatterTime { t, .. } => {
            let [x] = arity(op, "inputs", inputs)?;
            let [out] = arity(op, "outputs", outputs)?;
            scatter_time(*t, x, out)
        }
        Op::LstmForward { .. } => {
            let dims = args::lstm_dims(op, views).map_err(backend_error)?;
            let inp = LstmForwardInputs::from_vec(op, inputs).map_err(backend_error)?;
            let out = LstmForwardOutputs::from_vec(op, outputs).map_err(backend_error)?;
            lstm_forward(dims, &inp, out)
        }
        Op::LstmBackward { .. } => {
            let dims = args::lstm_dims(op, views).map_err(backend_error)?;
            let inp = LstmBackwardInputs::from_vec(op, inputs).map_err(backend_error)?;
            let out = LstmBackwardOutputs::from_vec(op, outputs).map_err(backend_error)?;
            lstm_backward(dims, &inp, out)
        }
        Op::BatchNorm { eps, training } => {
            if *training {
                let [x, gamma, beta] = arity(op, "inputs", inputs)?;
                let [y, mean, var] = arity(op, "outputs", outputs)?;
                let stats = BatchNormStats::Batch { mean, var };
                batchnorm_forward(*eps, x, gamma, beta, stats, y)
            } else {
                let [x, gamma, beta, mean, var] = arity(op, "inputs", inputs)?;
                let [y] = arity(op, "outputs", outputs)?;
                let stats = BatchNormStats::Running { mean, var };
                batchnorm_forward(*eps, x, gamma, beta, stats, y)
            }
        }
        Op::BatchNormBackward { eps, training } => {
            let inp = BatchNormBackwardInputs::from_vec(op, inputs).map_err(backend_error)?;
            let [dx, dgamma, dbeta] = arity(op, "outputs", outputs)?;
            batchnorm_backward(*eps, *training, &inp, dx, dgamma, dbeta)
        }
        Op::BatchNormStatsUpdate { momentum, unbias } => {
            let [mean, var] = arity(op, "inputs", inputs)?;
            let [running_mean, running_var] = arity(op, "targets", outputs)?;
            batchnorm_stats_update(*momentum, *unbias, mean, var, running_mean, running_var)
        }
        Op::SoftmaxCrossEntropy => {
            let [logits, labels] = arity(op, "inputs", inputs)?;
            let [loss, probs] = arity(op, "outputs", outputs)?;
            softmax_cross_entropy_forward(logits, labels, loss, probs)
        }
        Op::SoftmaxCrossEntropyBackward => {
            let [probs, labels, dloss] = arity(op, "inputs", inputs)?;
            let [dlogits] = arity(op, "outputs", outputs)?;
            softmax_cross_entropy_backward(probs, labels, dloss, dlogits)
        }
        Op::Adam(p) => {
            let [grad, scalars] = arity(op, "inputs", inputs)?;
            let [param, m, v] = arity(op, "targets", outputs)?;
            adam_update(*p, grad, scalars, param, m, v)
        }
        Op::Copy => {
            let [src] = arity(op, "inputs", inputs)?;
            let [dst] = arity(op, "targets", outputs)?;
            copy(src, dst)
        }
    }
}

/// The processor's model name from /proc/cpuinfo, or `cpu`.
fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, v)| v.trim().to_string())
            })
        })
        .map(|m| format!("{m} ({} threads)", threads::kernel_threads()))
        .unwrap_or_else(|| "cpu".to_string())
}
