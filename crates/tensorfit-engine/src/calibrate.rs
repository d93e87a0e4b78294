//! Throughput calibration: a short GEMM measured on each device, cached on disk, and
//! the cache the program-cost measurements (`estimate.rs`) share.
//!
//! The planner estimates a run's time as its FLOPs over the device's throughput. The
//! figure comes from timing one GEMM of LSTM-like shape through the backend (so it
//! includes the backend's real kernel, not a datasheet peak); it is cached per device
//! name and executable build in `$XDG_CACHE_HOME/tensorfit/throughput.json` (or
//! `~/.cache/...`; an empty or relative `XDG_CACHE_HOME` is ignored, as the XDG spec
//! says) because a plan should take milliseconds, not a benchmark. A cached figure
//! outside [`SANE_GFLOPS`] is not believed, and measured again. A figure measured while
//! the machine was busy (other processes keeping the cores loaded, [`busy_load`]) is
//! provisional: the next time it is needed on a quieter machine it is measured again and
//! the faster of the two kept, so one measurement taken during a build does not make
//! every later estimate several times too slow. Delete the file to re-measure.

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Instant;

use tensorfit_core::{Backend, DType, DeviceInfo, Op, Result, Shape, TensorView};
use tensorfit_nn::atomic_file::write_atomic;

/// GEMM shape: `[M, K] · [N, K]ᵀ`, like a batch of LSTM steps times `W_hhᵀ`.
const M: usize = 512;
const K: usize = 512;
const N: usize = 1024;

/// Throughputs a device can have, in GFLOP/s: from a slow software device to well
/// beyond today's largest GPU.
pub const SANE_GFLOPS: RangeInclusive<f64> = 1e-3..=1e7;

/// The cache file; `None` without an absolute base directory (a relative one would put
/// the cache wherever the command happens to run).
fn cache_path() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("tensorfit").join("throughput.json"))
}

/// The build the figures belong to, as two key prefixes: the running executable (by
/// path), and that executable as built now (its modification time), so a rebuild with
/// faster kernels measures again even within one version (keying by version alone kept
/// a figure from before the CPU fast path) while other executables — the CLI, each test
/// binary — keep their own figures instead of evicting each other's.
fn build_prefixes() -> (String, String) {
    let exe = std::env::current_exe().ok();
    let stamp = exe
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let path = exe.map_or_else(String::new, |p| p.display().to_string());
    let executable = format!("tensorfit {} {path} build ", env!("CARGO_PKG_VERSION"));
    let build = format!("{executable}{stamp}:");
    (executable, build)
}

/// Largest cache file read (a few hundred bytes per device and build).
const MAX_CACHE_BYTES: u64 = 1 << 20;

fn read_cache(path: Option<&PathBuf>) -> BTreeMap<String, f64> {
    let mut text = String::new();
    path.and_then(|p| std::fs::File::open(p).ok())
        .and_then(|f| f.take(MAX_CACHE_BYTES).read_to_string(&mut text).ok())
        .and_then(|_| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// When a decision measures a device's speed for its time estimates: its GEMM throughput
/// ([`throughput_gflops`]) and, where its programs are measured (the CPU), the model's own
/// programs (`estimate.rs`). The first measurement on a machine takes about a second and
/// writes the cache; later ones read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Calibration {
    /// Where the job has more than one device to choose between (the default): a choice
    /// between devices needs their times. On one device the strategies are ordered by
    /// the FLOP model at a nominal speed, and no time is shown; a software GPU is measured
    /// all the same (its host plan counts on the measurement's compile being in the
    /// process's peak: see `decide_on`).
    #[default]
    WhenChoosing,
    /// Every device, for a table of time estimates (`tensorfit plan`).
    Always,
    /// No device: the FLOP model at a nominal speed orders every device's strategies and
    /// no time is shown. Nothing is run before the job and no cache is written (a
    /// software GPU's host plan is then short by its first compile: docs/planning.md).
    Never,
}

/// The GEMM throughput, in GFLOP/s, assumed for a device that was not measured
/// ([`Calibration`]): it orders strategies (arithmetic against fixed costs per run) and is
/// never shown as a time.
pub const NOMINAL_GFLOPS: f64 = 50.0;

/// The GEMM throughput in GFLOP/s of the device `info` describes, from the cache, or
/// measured now on a backend from `open` (called only when the cache has no figure, or
/// one measured on a busy machine); the higher figure is kept.
pub fn throughput_gflops(
    info: &DeviceInfo,
    open: impl FnOnce() -> Result<Box<dyn Backend>>,
) -> Result<f64> {
    let key = format!("{}:{}", info.kind.name(), info.name);
    let more_gflops = |new: &[f64], old: &[f64]| new[0] > old[0];
    let figures = cached_figures(&key, 1, &SANE_GFLOPS, more_gflops, || {
        Ok(vec![measure(open()?.as_mut())?])
    })?;
    Ok(figures[0])
}

/// `n` figures cached under `key` for this build, or measured now by `measure` and
/// cached. A cached figure outside `sane` is not believed (all are measured again); a
/// measured one is clamped into it. The cache holds `key#0` .. `key#{n-1}` (one
/// figure: `key`), and `key@busy`, the load per core while they were measured, when the
/// machine was busy then: such figures are measured again once the load has halved, and
/// `faster(new, old)` decides which set is kept.
pub fn cached_figures(
    key: &str,
    n: usize,
    sane: &RangeInclusive<f64>,
    faster: impl Fn(&[f64], &[f64]) -> bool,
    measure: impl FnOnce() -> Result<Vec<f64>>,
) -> Result<Vec<f64>> {
    let path = cache_path();
    let (executable, build) = build_prefixes();
    let mut cache = read_cache(path.as_ref());
    let keys = CacheKeys::new(&build, key, n);
    let (figures, measured) = figures_in(&mut cache, &keys, sane, faster, busy_load, measure)?;
    if let (Some(path), true) = (path, measured) {
        // This executable's figures from earlier builds are dropped as this one's are
        // written.
        cache.retain(|k, _| k.starts_with(&build) || !k.starts_with(&executable));
        // A cache that cannot be written only costs a re-measurement next time; written
        // whole, so processes measuring at once never leave a torn file.
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(text) = serde_json::to_string_pretty(&cache) {
            let _ = write_atomic(&path, text.as_bytes());
        }
    }
    Ok(figures)
}

/// The cache keys of one set of figures.
struct CacheKeys {
    figures: Vec<String>,
    busy: String,
}

impl CacheKeys {
    fn new(build: &str, key: &str, n: usize) -> CacheKeys {
        CacheKeys {
            figures: match n {
                1 => vec![format!("{build}{key}")],
                _ => (0..n).map(|i| format!("{build}{key}#{i}")).collect(),
            },
            busy: format!("{build}{key}@busy"),
        }
    }
}

/// [`cached_figures`] on a cache in memory, with the machine's load from `load`: the
/// figures, and whether they were measured now (so the cache changed).
fn figures_in(
    cache: &mut BTreeMap<String, f64>,
    keys: &CacheKeys,
    sane: &RangeInclusive<f64>,
    faster: impl Fn(&[f64], &[f64]) -> bool,
    load: impl Fn() -> Option<f64>,
    measure: impl FnOnce() -> Result<Vec<f64>>,
) -> Result<(Vec<f64>, bool)> {
    let cached: Option<Vec<f64>> = keys
        .figures
        .iter()
        .map(|k| cache.get(k).copied().filter(|g| sane.contains(g)))
        .collect();
    let load_before = load();
    let quieter = match (cache.get(&keys.busy), load_before) {
        (Some(&then), Some(now)) => now <= then / 2.0,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if let (Some(figures), false) = (&cached, quieter) {
        return Ok((figures.clone(), false));
    }
    // A timer too coarse for the measurement must not give an impossible figure.
    let measured: Vec<f64> = measure()?
        .into_iter()
        .map(|g| g.clamp(*sane.start(), *sane.end()))
        .collect();
    // Busy before or after the measurement: either way it shared the cores.
    let busy = match (load(), load_before) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let figures = match cached {
        Some(old) if !faster(&measured, &old) => old,
        _ => measured,
    };
    cache.extend(keys.figures.iter().cloned().zip(figures.iter().copied()));
    match busy {
        Some(busy) => cache.insert(keys.busy.clone(), busy),
        None => cache.remove(&keys.busy),
    };
    Ok((figures, true))
}

/// Load per core at or above which a measurement counts as taken on a busy machine:
/// other runnable processes then take a share of the cores the measurement times.
pub const BUSY_LOAD_PER_CORE: f64 = 0.75;

/// The one-minute load average per core (Linux's `/proc/loadavg`) when it is at least
/// [`BUSY_LOAD_PER_CORE`]; `None` on a quiet machine or where the load is unknown.
pub fn busy_load() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    Some(load / cores).filter(|&l| l >= BUSY_LOAD_PER_CORE)
}

fn measure(backend: &mut dyn Backend) -> Result<f64> {
    let shapes = [
        Shape::from([M, K]),
        Shape::from([N, K]),
        Shape::from([M, N]),
    ];
    let mut views = Vec::new();
    for s in &shapes {
        let buf = backend.allocate(s.numel() as u64 * DType::F32.size_bytes() as u64)?;
        views.push(TensorView::whole(buf, s.clone()));
    }
    let fill: Vec<f32> = (0..M.max(N) * K)
        .map(|i| ((i % 13) as f32 - 6.0) * 0.01)
        .collect();
    backend.write(&views[0], &fill[..M * K])?;
    backend.write(&views[1], &fill[..N * K])?;
    let op = Op::MatMul {
        trans_a: false,
        trans_b: true,
    };
    let mut best = f64::INFINITY;
    let result: Result<()> = (|| {
        for i in 0..4 {
            let t = Instant::now();
            backend.execute(&op, &views[..2], &views[2..])?;
            backend.synchronize()?;
            if i > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        Ok(())
    })();
    for v in views {
        backend.free(v.buffer)?;
    }
    result?;
    Ok(2.0 * (M * N * K) as f64 / best.max(1e-9) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SANE: RangeInclusive<f64> = 0.0..=1e9;

    fn more(new: &[f64], old: &[f64]) -> bool {
        new[0] > old[0]
    }

    /// Runs `figures_in` for one figure with the given load, measuring `value`.
    fn look_up(
        cache: &mut BTreeMap<String, f64>,
        load: Option<f64>,
        value: f64,
    ) -> (Vec<f64>, bool) {
        let keys = CacheKeys::new("b:", "cpu", 1);
        figures_in(cache, &keys, &SANE, more, || load, || Ok(vec![value])).unwrap()
    }

    #[test]
    fn a_figure_measured_on_a_quiet_machine_is_kept() {
        let mut cache = BTreeMap::new();
        assert_eq!(look_up(&mut cache, None, 10.0), (vec![10.0], true));
        assert_eq!(look_up(&mut cache, None, 40.0), (vec![10.0], false));
        assert!(!cache.contains_key("b:cpu@busy"));
    }

    #[test]
    fn a_figure_measured_on_a_busy_machine_is_measured_again_when_quieter_and_the_faster_kept() {
        let mut cache = BTreeMap::new();
        assert_eq!(look_up(&mut cache, Some(4.0), 10.0), (vec![10.0], true));
        assert_eq!(cache["b:cpu@busy"], 4.0);
        // Still as busy: the cached figure stands.
        assert_eq!(look_up(&mut cache, Some(3.0), 40.0), (vec![10.0], false));
        // Quiet: measured again, the faster kept, no longer provisional.
        assert_eq!(look_up(&mut cache, None, 40.0), (vec![40.0], true));
        assert!(!cache.contains_key("b:cpu@busy"));
        assert_eq!(look_up(&mut cache, None, 5.0), (vec![40.0], false));
    }

    #[test]
    fn a_slower_measurement_on_a_quieter_machine_keeps_the_cached_figure() {
        let mut cache = BTreeMap::new();
        look_up(&mut cache, Some(4.0), 30.0);
        assert_eq!(look_up(&mut cache, Some(1.0), 20.0), (vec![30.0], true));
        assert_eq!(cache["b:cpu@busy"], 1.0);
    }
}
