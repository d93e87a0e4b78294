//! Host memory a job holds outside its device plan, budgeted against what the host has.
//!
//! A device plan counts device memory. On the host the process also holds its inputs
//! (training: one minibatch at a time and the held-out set; evaluation and prediction:
//! the whole input, which micro-batches read in place; reading files, the batches the
//! background reader holds ahead: `Request::read_ahead_bytes`), copies of the training
//! state (the snapshot taken before every step so that a failed device can be left
//! without losing it; while a checkpoint is written, the checkpoint, streamed to its
//! file), the gradients of a data-parallel step on their way between ranks
//! (`crate::distributed::DataParallel::host_bytes`), and its own baseline (code, libraries, a GPU driver), which the host already
//! reports as in use. What the process may use is [`tensorfit_cpu::host_memory::available`]: MemAvailable, or
//! what the tightest cgroup above the process or its own limit (`ulimit -v`, `ulimit
//! -d`) has left.
//!
//! A job whose host bytes do not fit there is refused before anything is allocated. On
//! the CPU, and on a software GPU (whose memory is host memory), the host bytes are taken
//! off the device's free memory before planning, so that in a 400 MB container the plan
//! is made for what is really left, and streams or refuses instead of being killed.

use tensorfit_core::{DType, DeviceInfo, Error, Result};
use tensorfit_cpu::host_memory;
use tensorfit_nn::{Job, ModelDescription, ParamKind, ParamStore, Program};
use tensorfit_plan::format_bytes;

use crate::distributed::DataParallel;
use crate::registry;

/// The host bytes of a job outside its device plan, before any strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostNeed {
    /// Input sequences and labels.
    pub inputs: u64,
    /// The host copy of the training state (parameters, Adam's moments, running
    /// statistics), for training and evaluation alike (`Session::state`).
    pub state: u64,
    /// Batches read from files besides the one in use (which `inputs` counts): up to
    /// `(read_ahead + 1) × max_batch_bytes` (docs/data.md); 0 for inputs made in memory.
    pub read_ahead: u64,
    /// Data-parallel training: the gradients' host copies while they are averaged over
    /// ranks, and the gathered head inputs of synchronised BatchNorm
    /// (`DataParallel::host_bytes`); 0 for one process.
    pub communication: u64,
    /// What the allocator keeps of the blocks a run frees and allocates again at every
    /// step (training on batches made in memory: the batch's inputs, up to
    /// [`ALLOCATOR_KEPT_MAX`]): glibc serves a block from its heap once one of that size
    /// was freed, and keeps the heap. A file's reader fills the same buffers again.
    pub allocator: u64,
    /// The CPU kernels' packed copies of product operands, outside the device plan
    /// ([`tensorfit_cpu::kernel_memory`]; [`HostNeed::with_cpu_kernels`]): counted only
    /// where the job runs on the CPU ([`HostNeed::driver_bytes`]).
    pub cpu_kernels: u64,
}

/// Bytes of `batch` sequences of `steps` inputs with their labels.
fn sequence_bytes(cfg: &ModelDescription, batch: usize, steps: usize) -> u64 {
    let targets = batch as u128 * cfg.loss.targets_per_row() as u128;
    let values = batch as u128 * steps as u128 * cfg.input_features() as u128 + targets;
    u64::try_from(values * 4).unwrap_or(u64::MAX)
}

impl HostNeed {
    /// The host bytes of `job`, with `read_ahead` bytes of batches read from files.
    /// Whether the run writes checkpoints does not change them (see `state`), so `plan`
    /// and `train` count the same job alike.
    pub fn of(cfg: &ModelDescription, job: Job, read_ahead: u64) -> Result<HostNeed> {
        let (mut values, mut trainable) = (0u64, 0u64);
        for spec in cfg.param_specs()? {
            let n = spec.shape.numel() as u64;
            values += n;
            if spec.kind == ParamKind::Trainable {
                trainable += n;
            }
        }
        // A checkpoint: the model and Adam's two moments.
        let checkpoint = (values + 2 * trainable) * 4;
        Ok(match job {
            Job::Train {
                batch,
                seq_len,
                eval,
            } => HostNeed {
                inputs: sequence_bytes(cfg, batch, seq_len)
                    .saturating_add(eval.map_or(0, |(b, t)| sequence_bytes(cfg, b, t))),
                // One host copy (`Session::state`): the snapshot taken before every
                // step, from which a checkpoint is also written (streamed to the file a
                // tensor at a time: `Checkpoint::save`) and which is carried to a new
                // plan when the batch changes shape (`Session::switch_job`).
                state: checkpoint,
                read_ahead,
                communication: 0,
                // Batches made in memory at every step (the built-in task, an app's
                // own); a file's reader fills the same buffers again (`read_ahead`).
                allocator: match read_ahead {
                    0 => sequence_bytes(cfg, batch, seq_len).min(ALLOCATOR_KEPT_MAX),
                    _ => 0,
                },
                cpu_kernels: 0,
            },
            Job::Eval { batch, seq_len } => HostNeed {
                inputs: sequence_bytes(cfg, batch, seq_len),
                state: checkpoint,
                read_ahead,
                communication: 0,
                allocator: 0,
                cpu_kernels: 0,
            },
        })
    }

    /// With the host bytes of data-parallel training (`DataParallel::host_bytes`;
    /// nothing for one process, or for a job that does not train).
    pub fn with_ranks(
        self,
        cfg: &ModelDescription,
        job: Job,
        data_parallel: Option<DataParallel>,
    ) -> Result<HostNeed> {
        let (Some(d), Job::Train { .. }) = (data_parallel, job) else {
            return Ok(self);
        };
        Ok(HostNeed {
            communication: d.host_bytes(cfg)?,
            ..self
        })
    }

    /// With the host bytes the CPU kernels hold besides the device plan while running
    /// `programs` (the job's, with the most rows: its plainest strategy's) on `threads`.
    pub fn with_cpu_kernels(self, programs: &[Program], threads: usize) -> HostNeed {
        let graphs = programs.iter().map(|p| &p.graph);
        HostNeed {
            cpu_kernels: tensorfit_cpu::kernel_memory::host_bytes(graphs, threads),
            ..self
        }
    }

    /// Threads the run starts after it has planned: the background readers of training
    /// and validation files, where it reads files (the CPU's kernel threads exist
    /// before: `tensorfit_cpu::threads`).
    pub fn threads_started(&self) -> u64 {
        if self.read_ahead > 0 {
            2
        } else {
            0
        }
    }

    /// The driver memory the host holds for `info` besides the device's buffers, by its
    /// kind's `Hardware`: for a software GPU, its driver's bytes and the staging copy of
    /// the largest transfer (the input batch, up to the staging piece); for the CPU, its
    /// kernels' packed operands (`cpu_kernels`; its threads were started before
    /// planning); nothing for a GPU with memory of its own.
    pub fn driver_bytes(&self, info: &DeviceInfo) -> u64 {
        let hw = registry::hardware(info.kind);
        let kernels = if hw.packed_operands {
            self.cpu_kernels
        } else {
            0
        };
        let driver = match info.software {
            true => hw.software_driver_bytes + self.inputs.min(hw.staging_bytes),
            false => 0,
        };
        kernels + driver
    }

    /// The host bytes of the job: its inputs, read-ahead, state copy, the gradients'
    /// host copies and what the allocator keeps.
    pub fn bytes(&self) -> u64 {
        self.inputs
            .saturating_add(self.state)
            .saturating_add(self.read_ahead)
            .saturating_add(self.communication)
            .saturating_add(self.allocator)
    }

    /// The process's resident memory the plan predicts: what it holds now (`process`:
    /// code, libraries, drivers, read before anything of the job is allocated), the code
    /// the run first executes after planning ([`RUN_CODE_BYTES`]), these bytes, and, where the device's memory is host memory (the CPU, a software GPU),
    /// the device plan's `device_peak` and the driver's own memory
    /// ([`HostNeed::driver_bytes`]).
    pub fn resident(&self, process: u64, device_peak: u64, device: &DeviceInfo) -> u64 {
        let device = match memory_is_host(device) {
            true => device_peak.saturating_add(self.driver_bytes(device)),
            false => 0,
        };
        process
            .saturating_add(RUN_CODE_BYTES)
            .saturating_add(self.bytes())
            .saturating_add(device)
    }

    /// Refuses a job whose host bytes exceed what the host has for this process, less
    /// `margin` of it.
    pub fn check(&self, margin: f64) -> Result<()> {
        let Some((available, source)) = host_room(self.threads_started()) else {
            return Ok(());
        };
        let usable = (available as f64 * (1.0 - margin.clamp(0.0, 1.0))) as u64;
        if self.bytes() <= usable {
            return Ok(());
        }
        // The copies of the model alone do not fit: no batch or length makes the job fit.
        let advice = if source.starts_with("ulimit") {
            "raise the limit, or lower --batch, --seq-len or --read-ahead"
        } else if self.state > usable {
            "the model is too large for this host: describe a smaller one"
        } else {
            "lower --batch, --seq-len or --read-ahead"
        };
        Err(Error::input(format!(
            "the job needs {} of host memory outside the device (input data {}, the training state's host copy {}, batches read ahead {}, gradients averaged over ranks {}, a batch freed and kept by the allocator {}), and {} is usable ({} available from {}, {:.0}% margin kept): {advice}",
            format_bytes(self.bytes()),
            format_bytes(self.inputs),
            format_bytes(self.state),
            format_bytes(self.read_ahead),
            format_bytes(self.communication),
            format_bytes(self.allocator),
            format_bytes(usable),
            format_bytes(available),
            source,
            margin * 100.0
        )))
    }
}

/// `cfg`'s weights drawn from `seed` ([`ParamStore::init`]), refused first with
/// [`Error::OutOfMemory`] on the host when they do not fit in what the host has left:
/// the weights are drawn before any plan is made, and a vector that cannot be allocated
/// aborts the process instead of returning an error. A valid description may still
/// describe up to `MAX_PARAMETERS` (256 GiB) of weights.
pub fn init_params(cfg: &ModelDescription, seed: u64) -> Result<ParamStore> {
    let values: u64 = cfg
        .param_specs()?
        .iter()
        .map(|s| s.shape.numel() as u64)
        .sum();
    let bytes = values.saturating_mul(DType::F32.size_bytes() as u64);
    if let Some((available, source)) = host_room(0).filter(|&(a, _)| bytes > a) {
        return Err(Error::OutOfMemory {
            device: format!("the host, drawing the model's {values} weights ({source})"),
            requested: bytes,
            available,
        });
    }
    ParamStore::init(cfg, seed)
}

/// The largest block glibc's allocator keeps in its heap once freed: blocks above its
/// threshold for `mmap` go back to the system when freed, and the threshold rises to
/// each such block freed, up to 32 MiB on 64-bit systems (`DEFAULT_MMAP_THRESHOLD_MAX`).
/// A training run frees its batch after each step and allocates the next: from the
/// second step on, from the heap, where glibc may keep it besides the next one (seen as
/// a peak one batch higher in about half of the runs of docs/host-memory.md).
pub const ALLOCATOR_KEPT_MAX: u64 = 32 << 20;

/// Resident memory a run takes after planning whatever its job: the code it first
/// executes then (kernels, the training loop, writers), paged in from the binary, and
/// the stacks of the threads it starts. Measured at 165–453 KiB beyond the plan's other
/// parts for the release binary on x86-64, from a 2-step evaluation to training and
/// predicting from a file (docs/host-memory.md).
pub const RUN_CODE_BYTES: u64 = 512 << 10;

/// Whether `info`'s memory is the host's (the CPU, by its kind's `Hardware`; a software
/// GPU).
pub fn memory_is_host(info: &DeviceInfo) -> bool {
    registry::hardware(info.kind).host_memory || info.software
}

/// `info` as seen by a job that holds `host` on the host: a device whose memory is host
/// memory (the CPU, a software GPU) has that much less free, and a software GPU also
/// its driver's memory ([`HostNeed::driver_bytes`]) less.
pub fn device_info(info: &DeviceInfo, host: &HostNeed) -> DeviceInfo {
    if !memory_is_host(info) {
        return info.clone();
    }
    let Some((available, source)) = host_room(host.threads_started()) else {
        return info.clone();
    };
    let left = available.saturating_sub(host.bytes().saturating_add(host.driver_bytes(info)));
    let (free, capacity_source) = match info.free_bytes {
        Some(f) if f <= left => (f, info.capacity_source.clone()),
        // The host's bound is the tighter: name it (a cgroup, `ulimit -v`).
        _ => (left, format!("{source}, less the job's host memory")),
    };
    DeviceInfo {
        free_bytes: Some(free),
        capacity_source,
        ..info.clone()
    }
}

/// Address space a thread takes when it starts: the malloc arena glibc reserves for it
/// on its first allocation (64 MiB, `HEAP_MAX_SIZE` on 64-bit) and Rust's default
/// stack (2 MiB). Resident memory sees only the pages touched; `ulimit -v` counts all.
const THREAD_ADDRESS_SPACE: u64 = 66 << 20;

/// What the host has for a job now, and where the figure comes from:
/// [`host_memory::available`], less, under a limit on the process's address space
/// (`ulimit -v`), the address space of the `threads` the run starts after planning.
fn host_room(threads: u64) -> Option<(u64, String)> {
    let available = host_memory::available()?;
    let reserve = THREAD_ADDRESS_SPACE * threads;
    let address_space = host_memory::process_limits()
        .into_iter()
        .filter(|p| p.counts_address_space())
        .map(|p| (p.left().saturating_sub(reserve), p))
        .min_by_key(|(left, _)| *left);
    Some(match address_space {
        Some((left, p)) if left < available && reserve > 0 => (
            left,
            format!(
                "{p}, {} kept for the {threads} threads the run starts",
                format_bytes(reserve)
            ),
        ),
        _ => (available, host_memory::source()),
    })
}

/// As [`device_info`] for a device that is not here: its own memory, not this host's,
/// holds the job's host bytes where its memory is host memory.
pub fn assumed_device_info(info: &DeviceInfo, host_bytes: u64) -> DeviceInfo {
    if !memory_is_host(info) {
        return info.clone();
    }
    DeviceInfo {
        free_bytes: Some(
            info.free_bytes
                .unwrap_or(info.total_bytes)
                .saturating_sub(host_bytes),
        ),
        ..info.clone()
    }
}

/// `info` as seen by a job holding `host` on the host: [`device_info`] for a device that
/// is here, [`assumed_device_info`] for one that is `assumed`.
pub fn seen_by_job(info: &DeviceInfo, host: &HostNeed, assumed: bool) -> DeviceInfo {
    match assumed {
        true => assumed_device_info(info, host.bytes()),
        false => device_info(info, host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_and_evaluation_count_one_copy_of_the_state() {
        let cfg = ModelDescription::seed();
        let job = Job::Train {
            batch: 8,
            seq_len: 10,
            eval: None,
        };
        let training = HostNeed::of(&cfg, job, 0).unwrap().state;
        let eval = Job::Eval {
            batch: 8,
            seq_len: 10,
        };
        let one = HostNeed::of(&cfg, eval, 0).unwrap().state;
        assert!(one > 0);
        assert_eq!(training, one);
    }
}
