//! A backend wrapper that fails on purpose, to test that a session recovers.
//!
//! Real devices lose memory at run time: another process takes the GPU's memory, or a
//! driver reserves more than it reported. [`FaultyBackend`] reproduces that on any
//! machine, around any backend: it can fail the N-th allocation or the N-th op with
//! out-of-memory, or report the device lost, and its capacity can be lowered while a run
//! is going on (then every op fails with out-of-memory while more is allocated than the
//! new capacity, as when memory vanishes under a running program). The knobs are shared
//! through an `Arc<Faults>`, so a test can turn them while the session owns the backend.
//!
//! A test that cannot reach into the process (a rank under mpirun) sets
//! [`INJECT_OOM_VAR`] instead: every backend the process's sessions open shares one
//! [`Faults`] whose `fail_execute` is that number ([`from_env`]), so the N-th op execution
//! of the process fails once, whichever session runs it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tensorfit_core::{Backend, BufferId, DeviceInfo, Error, MemoryInfo, Op, Result, TensorView};

/// The environment variable that makes the N-th op execution of this process fail with
/// out-of-memory, once (N from 1).
pub const INJECT_OOM_VAR: &str = "TENSORFIT_INJECT_OOM";

/// `backend`, wrapped to fail as [`INJECT_OOM_VAR`] says when it is set; refused, naming
/// the variable, when it is not a number from 1.
pub fn from_env(backend: Box<dyn Backend>) -> Result<Box<dyn Backend>> {
    static SHARED: OnceLock<Arc<Faults>> = OnceLock::new();
    let Some(value) = std::env::var_os(INJECT_OOM_VAR) else {
        return Ok(backend);
    };
    let n = value
        .to_str()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            Error::input(format!(
                "{INJECT_OOM_VAR}={value:?}: the op execution to fail with out-of-memory, a number from 1"
            ))
        })?;
    let faults = SHARED.get_or_init(|| {
        let f = Faults::default();
        f.fail_execute.store(n, Ordering::SeqCst);
        Arc::new(f)
    });
    Ok(Box::new(FaultyBackend::new(backend, Arc::clone(faults))))
}

/// The failures to inject. Counters are 1-based; 0 means never.
#[derive(Debug)]
pub struct Faults {
    /// Fail this allocation (1 = the first) with out-of-memory.
    pub fail_allocation: AtomicU64,
    /// Fail this op execution with out-of-memory.
    pub fail_execute: AtomicU64,
    /// From this op execution on, report the device lost.
    pub lose_device_at: AtomicU64,
    /// Capacity in bytes (`u64::MAX`: the inner backend's).
    pub capacity: AtomicU64,
    allocations: AtomicU64,
    executes: AtomicU64,
    lost: AtomicBool,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            fail_allocation: AtomicU64::new(0),
            fail_execute: AtomicU64::new(0),
            lose_device_at: AtomicU64::new(0),
            capacity: AtomicU64::new(u64::MAX),
            allocations: AtomicU64::new(0),
            executes: AtomicU64::new(0),
            lost: AtomicBool::new(false),
        }
    }
}

impl Faults {
    /// Op executions so far.
    pub fn executes(&self) -> u64 {
        self.executes.load(Ordering::SeqCst)
    }
}

/// Wraps a backend and injects the [`Faults`] it shares with the caller.
pub struct FaultyBackend {
    inner: Box<dyn Backend>,
    faults: Arc<Faults>,
}

impl std::fmt::Debug for FaultyBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyBackend")
            .field("inner", &self.inner.name())
            .field("faults", &self.faults)
            .finish()
    }
}

impl FaultyBackend {
    /// `inner`, failing as `faults` says.
    pub fn new(inner: Box<dyn Backend>, faults: Arc<Faults>) -> Self {
        FaultyBackend { inner, faults }
    }

    fn oom(&self, requested: u64) -> Error {
        Error::OutOfMemory {
            device: format!("{} (injected fault)", self.inner.name()),
            requested,
            available: self.info().free_bytes.unwrap_or(0),
        }
    }

    fn capacity(&self) -> u64 {
        self.faults.capacity.load(Ordering::SeqCst)
    }

    fn check_lost(&self) -> Result<()> {
        if self.faults.lost.load(Ordering::SeqCst) {
            return Err(Error::DeviceLost {
                device: self.inner.name(),
                message: "injected fault".into(),
            });
        }
        Ok(())
    }
}

impl Backend for FaultyBackend {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn info(&self) -> DeviceInfo {
        let mut info = self.inner.info();
        let cap = self.capacity();
        let used = self.inner.memory().allocated;
        info.total_bytes = info.total_bytes.min(cap);
        info.free_bytes = Some(
            info.free_bytes
                .unwrap_or(u64::MAX)
                .min(cap.saturating_sub(used)),
        );
        info
    }

    fn allocate(&mut self, bytes: u64) -> Result<BufferId> {
        self.check_lost()?;
        let n = self.faults.allocations.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.faults.fail_allocation.load(Ordering::SeqCst)
            || self.inner.memory().allocated.saturating_add(bytes) > self.capacity()
        {
            return Err(self.oom(bytes));
        }
        self.inner.allocate(bytes)
    }

    fn free(&mut self, buffer: BufferId) -> Result<()> {
        // Freeing works even on a lost device: the memory is gone either way.
        self.inner.free(buffer)
    }

    fn write(&mut self, view: &TensorView, data: &[f32]) -> Result<()> {
        self.check_lost()?;
        self.inner.write(view, data)
    }

    fn read(&mut self, view: &TensorView, out: &mut [f32]) -> Result<()> {
        self.check_lost()?;
        self.inner.read(view, out)
    }

    fn execute(&mut self, op: &Op, inputs: &[TensorView], outputs: &[TensorView]) -> Result<()> {
        let n = self.faults.executes.fetch_add(1, Ordering::SeqCst) + 1;
        let lose = self.faults.lose_device_at.load(Ordering::SeqCst);
        if lose != 0 && n >= lose {
            self.faults.lost.store(true, Ordering::SeqCst);
        }
        self.check_lost()?;
        if n == self.faults.fail_execute.load(Ordering::SeqCst)
            || self.inner.memory().allocated > self.capacity()
        {
            return Err(self.oom(0));
        }
        self.inner.execute(op, inputs, outputs)
    }

    fn synchronize(&mut self) -> Result<()> {
        self.check_lost()?;
        self.inner.synchronize()
    }

    fn memory(&self) -> MemoryInfo {
        let mut m = self.inner.memory();
        m.total = m.total.min(self.capacity());
        m
    }

    fn reset_peak(&mut self) {
        self.inner.reset_peak()
    }
}
