//! The largest job that fits (`tensorfit plan --max-batch`, `--max-seq-len`), found by
//! planning alone: no trial allocation, no out-of-memory error to crash into.
//!
//! For each device and each strategy, the search plans the job at growing sizes (1, 2,
//! 4, ...) until a plan does not fit, then bisects between the last size that fitted and
//! the first that did not. That is right because a strategy's peak grows with the batch
//! and with the length (every tensor that depends on either grows with it; the test
//! `peaks_grow_with_the_batch_and_the_length` pins it for the seed network). A size is
//! refused, rather than planned, beyond what the planner accepts (`check_job`'s bound on
//! elements per batch) or beyond [`SEARCH_LIMIT`], so a strategy whose peak stops growing
//! (streamed chunks keep the device's share of a longer sequence constant) ends at that
//! bound and says so. A fit
//! is the session's: the plan within the device's usable memory, with the job's host
//! bytes (which grow with either size) taken off a device whose memory is host memory,
//! and, for a device that is here, within this host's memory.
//!
//! Micro-batches are not searched: the device then holds one micro-batch, so the batch
//! is bounded by host memory alone.

use serde_json::{json, Value};
use tensorfit_core::{DeviceInfo, Error, Result};
use tensorfit_nn::Job;
use tensorfit_plan::{usable_bytes, Limits};

use crate::decision::host_need;
use crate::devices::DeviceStatus;
use crate::host_budget::seen_by_job;
use crate::session::{plan_job, Request};
use crate::strategy::{check_job, inference_dims, strategies, Strategy};

/// Which size to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// The batch size.
    Batch,
    /// The sequence length.
    SeqLen,
}

impl Dim {
    /// The flag's word for it (`batch`, `seq-len`).
    pub fn name(self) -> &'static str {
        match self {
            Dim::Batch => "batch",
            Dim::SeqLen => "length",
        }
    }

    /// The smallest size a job can have: a training batch needs two sequences
    /// (BatchNorm's batch statistics in training mode), anything else one.
    fn smallest(self, job: Job) -> usize {
        match (self, job) {
            (Dim::Batch, Job::Train { .. }) => 2,
            _ => 1,
        }
    }

    /// `job` with this size set to `n`: a training job's own batch or length, and its
    /// evaluation's length (`train` evaluates sequences of its training length, in
    /// batches of `--eval-batch`, which does not follow `--batch`).
    fn set(self, job: Job, n: usize) -> Job {
        let pick = |b: usize, t: usize| match self {
            Dim::Batch => (n, t),
            Dim::SeqLen => (b, n),
        };
        let pick_eval = |b: usize, t: usize| match self {
            Dim::Batch => (b, t),
            Dim::SeqLen => (b, n),
        };
        match job {
            Job::Eval { batch, seq_len } => {
                let (batch, seq_len) = pick(batch, seq_len);
                Job::Eval { batch, seq_len }
            }
            Job::Train {
                batch,
                seq_len,
                eval,
            } => {
                let (batch, seq_len) = pick(batch, seq_len);
                Job::Train {
                    batch,
                    seq_len,
                    eval: eval.map(|(b, t)| pick_eval(b, t)),
                }
            }
        }
    }
}

/// The largest size of one device under one strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Largest {
    /// The device (`cpu`, `wgpu:0`).
    pub device: String,
    /// The strategy in words, at the size found.
    pub strategy: String,
    /// `None`: not even the smallest size (1, or a training batch of 2) fits.
    pub largest: Option<usize>,
    /// The plan's peak at that size, and the usable memory it fits in.
    pub peak_bytes: u64,
    /// The usable memory of the device, in bytes.
    pub capacity_bytes: u64,
    /// The search stopped at the largest size the planner accepts (or at
    /// [`SEARCH_LIMIT`]), not at memory.
    pub at_limit: bool,
    /// Larger than every row above it of the same device (the rows a person needs).
    pub frontier: bool,
}

impl Largest {
    /// The result as JSON (`tensorfit plan --max-batch --json`).
    pub fn to_json(&self) -> Value {
        json!({
            "device": self.device, "strategy": self.strategy, "largest": self.largest,
            "peak_bytes": self.peak_bytes, "capacity_bytes": self.capacity_bytes,
            "at_limit": self.at_limit, "frontier": self.frontier,
        })
    }
}

/// The strategies searched: those of `req`'s job without micro-batches, the plainest
/// first; "whole sequence" stays whole at every length.
fn searched(req: &Request) -> Vec<Strategy> {
    let whole = inference_dims(req.job).1;
    strategies(&req.cfg, req.job, req.tbptt)
        .into_iter()
        .filter(|s| s.micro_batch.is_none())
        .map(|s| Strategy {
            chunk: if s.chunk >= whole {
                usize::MAX
            } else {
                s.chunk
            },
            ..s
        })
        .collect()
}

/// What a size gives: beyond the planner's bound, or a peak that fits or not.
enum Probe {
    Refused,
    Planned {
        peak: u64,
        capacity: u64,
        fits: bool,
    },
}

/// The largest size searched (2^20 sequences, or steps): beyond any run tensorfit plans
/// for, and a bound on the search's time (a plan's list of chunk runs grows with the
/// length).
pub const SEARCH_LIMIT: usize = 1 << 20;

fn probe(
    req: &Request,
    info: &DeviceInfo,
    assumed: bool,
    s: &Strategy,
    job: Job,
    n: usize,
) -> Result<Probe> {
    if n > SEARCH_LIMIT || check_job(&req.cfg, job, req.tbptt).is_err() {
        return Ok(Probe::Refused);
    }
    let packs = crate::registry::hardware(info.kind).packed_operands;
    let host = host_need(req, job, packs.then_some(assumed))?;
    let seen = seen_by_job(info, &host, assumed);
    let capacity = usable_bytes(&seen, req.margin);
    let plan = match plan_job(&req.cfg, &s.options(req), job, Limits::from(info)) {
        Ok(p) => p,
        // A tensor larger than the device's largest buffer: this size does not fit.
        Err(Error::Input(_)) => {
            return Ok(Probe::Planned {
                peak: u64::MAX,
                capacity,
                fits: false,
            })
        }
        Err(e) => return Err(e),
    };
    let peak = plan.peak_bytes();
    let host_ok = assumed || host.check(req.margin).is_ok();
    Ok(Probe::Planned {
        peak,
        capacity,
        fits: peak <= capacity && host_ok,
    })
}

/// The largest size of `dim` under `s` on one device (see the module documentation).
fn search(
    req: &Request,
    dev: &DeviceStatus,
    info: &DeviceInfo,
    s: &Strategy,
    dim: Dim,
) -> Result<Largest> {
    let assumed = dev.assumed.is_some();
    let at = |n: usize| probe(req, info, assumed, s, dim.set(req.job, n), n);
    let first = dim.smallest(req.job);
    let row = |n: Option<usize>, peak: u64, capacity: u64, at_limit: bool| Largest {
        device: dev.id.clone(),
        strategy: s.describe(dim.set(req.job, n.unwrap_or(first))),
        largest: n,
        peak_bytes: peak,
        capacity_bytes: capacity,
        at_limit,
        frontier: false,
    };
    // (size, peak, capacity) of the largest size known to fit.
    let mut good = match at(first)? {
        Probe::Planned {
            peak,
            capacity,
            fits: true,
        } => (first, peak, capacity),
        Probe::Planned { peak, capacity, .. } => return Ok(row(None, peak, capacity, false)),
        Probe::Refused => return Ok(row(None, 0, 0, true)),
    };
    // The first size known not to fit (or to be refused), by doubling; the planner's
    // bound ends this long before the size could overflow.
    let (mut hi, mut refused) = loop {
        let n = good.0.saturating_mul(2);
        match at(n)? {
            Probe::Planned {
                peak,
                capacity,
                fits: true,
            } => good = (n, peak, capacity),
            Probe::Planned { .. } => break (n, false),
            Probe::Refused => break (n, true),
        }
    };
    while hi - good.0 > 1 {
        let mid = good.0 + (hi - good.0) / 2;
        match at(mid)? {
            Probe::Planned {
                peak,
                capacity,
                fits: true,
            } => good = (mid, peak, capacity),
            Probe::Planned { .. } => (hi, refused) = (mid, false),
            Probe::Refused => (hi, refused) = (mid, true),
        }
    }
    Ok(row(Some(good.0), good.1, good.2, refused))
}

/// Devices that could not be searched, with why.
pub type Unavailable = Vec<(String, String)>;

/// The largest size of `dim` on every usable device of `found` (honouring `req.device`),
/// under every searched strategy, and the devices that could not be searched with why.
pub fn largest_jobs(
    req: &Request,
    found: &[DeviceStatus],
    dim: Dim,
) -> Result<(Vec<Largest>, Unavailable)> {
    req.cfg.validate()?;
    check_job(&req.cfg, req.job, req.tbptt)?;
    let mut rows = Vec::new();
    let mut unavailable = Vec::new();
    for dev in found {
        if req.device.is_some_and(|k| k != dev.kind) {
            continue;
        }
        let info = match &dev.info {
            Ok(info) => info,
            Err(why) => {
                unavailable.push((dev.id.clone(), why.clone()));
                continue;
            }
        };
        // `None` (nothing fits) is below every size.
        let mut best: Option<Option<usize>> = None;
        for s in searched(req) {
            let mut r = search(req, dev, info, &s, dim)?;
            r.frontier = best.is_none_or(|b| r.largest > b);
            best = best.max(Some(r.largest));
            rows.push(r);
        }
    }
    Ok((rows, unavailable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assume;
    use tensorfit_nn::{ModelDescription, OptimConfig};

    fn request(job: Job) -> Request {
        let optim = (50, OptimConfig::default());
        Request::new(ModelDescription::seed(), job, optim)
    }

    fn peak(req: &Request, s: &Strategy, job: Job) -> u64 {
        plan_job(&req.cfg, &s.options(req), job, Limits::from(&assumed_cpu()))
            .unwrap()
            .peak_bytes()
    }

    fn assumed_cpu() -> DeviceInfo {
        assume::parse(&["cpu=64GiB".into()]).unwrap()[0]
            .info
            .clone()
            .unwrap()
    }

    #[test]
    fn peaks_grow_with_the_batch_and_the_length() {
        for job in [
            Job::Train {
                batch: 8,
                seq_len: 120,
                eval: None,
            },
            Job::Eval {
                batch: 8,
                seq_len: 120,
            },
        ] {
            let req = request(job);
            for s in searched(&req) {
                for dim in [Dim::Batch, Dim::SeqLen] {
                    let mut last = 0;
                    for n in [1, 2, 3, 5, 8, 13, 21, 34, 55, 89] {
                        if n < dim.smallest(job) {
                            continue;
                        }
                        let p = peak(&req, &s, dim.set(job, n));
                        assert!(p >= last, "{s:?} {dim:?} {n}: {p} < {last}");
                        last = p;
                    }
                }
            }
        }
    }

    // On an assumed CUDA device (its backend's figures).
    #[cfg(feature = "cuda")]
    #[test]
    fn the_largest_batch_fits_and_one_more_does_not() {
        let job = Job::Train {
            batch: 100,
            seq_len: 200,
            eval: None,
        };
        let req = request(job);
        let found = assume::parse(&["cuda=1GiB".into()]).unwrap();
        let (rows, _) = largest_jobs(&req, &found, Dim::Batch).unwrap();
        assert_eq!(rows.len(), searched(&req).len());
        assert!(rows[0].frontier);
        let info = found[0].info.as_ref().unwrap();
        for r in rows.iter().filter(|r| r.frontier) {
            let n = r.largest.expect("1 GiB holds a batch of one");
            let s = searched(&req)
                .into_iter()
                .find(|s| s.describe(Dim::Batch.set(job, n)) == r.strategy)
                .unwrap();
            let fits = |n| match probe(&req, info, true, &s, Dim::Batch.set(job, n), n).unwrap() {
                Probe::Planned { fits, .. } => fits,
                Probe::Refused => false,
            };
            assert!(fits(n) && !fits(n + 1), "{r:?}");
            assert!(r.peak_bytes <= r.capacity_bytes);
        }
        assert!(
            rows.iter().filter(|r| r.frontier).count() > 1,
            "recomputation fits a larger batch than the whole sequence: {rows:?}"
        );
    }

    #[test]
    fn a_device_too_small_for_one_sequence_has_no_largest_size() {
        let req = request(Job::Eval {
            batch: 1,
            seq_len: 100,
        });
        let found = assume::parse(&["cpu=1MiB".into()]).unwrap();
        let (rows, _) = largest_jobs(&req, &found, Dim::SeqLen).unwrap();
        assert!(rows.iter().all(|r| r.largest.is_none()), "{rows:?}");
    }
}
