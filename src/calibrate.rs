//! Throughput calibration: a short GEMM measured on each device, cached on disk, and
//! the cache the program-cost measurements (`estimate.rs`) share.
//!
//! The planner estimates a run's time as its FLOPs over the device's throughput. The
//! figure comes from timing one GEMM of LSTM-like shape through the backend (so it
//! includes the backend's real kernel, not a datasheet peak); it is cached per device
//! name and executable build in `$XDG_CACHE_HOME/tensorfit/throughput.json` (or
//! `~/.cache/...`; an empty or relative `XDG_CACHE_HOME` is ignored, as the XDG spec
//! says) because a plan should take milliseconds, not a benchmark. A cached figure
//! outside [`SANE_GFLOPS`] is not believed, and measured again. Delete the file to
//! re-measure.

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

/// The GEMM throughput in GFLOP/s of the device `info` describes, from the cache, or
/// measured now on a backend from `open` (called only when the cache has no figure).
pub fn throughput_gflops(
    info: &DeviceInfo,
    open: impl FnOnce() -> Result<Box<dyn Backend>>,
) -> Result<f64> {
    let key = format!("{}:{}", info.kind.name(), info.name);
    let figures = cached_figures(&key, 1, &SANE_GFLOPS, || {
        Ok(vec![measure(open()?.as_mut())?])
    })?;
    Ok(figures[0])
}

/// `n` figures cached under `key` for this build, or measured now by `measure` and
/// cached. A cached figure outside `sane` is not believed (all are measured again); a
/// measured one is clamped into it. The cache holds `key#0` .. `key#{n-1}` (one
/// figure: `key`).
pub fn cached_figures(
    key: &str,
    n: usize,
    sane: &RangeInclusive<f64>,
    measure: impl FnOnce() -> Result<Vec<f64>>,
) -> Result<Vec<f64>> {
    let path = cache_path();
    let (executable, build) = build_prefixes();
    let keys: Vec<String> = match n {
        1 => vec![format!("{build}{key}")],
        _ => (0..n).map(|i| format!("{build}{key}#{i}")).collect(),
    };
    let mut cache = read_cache(path.as_ref());
    let cached: Option<Vec<f64>> = keys
        .iter()
        .map(|k| cache.get(k).copied().filter(|g| sane.contains(g)))
        .collect();
    if let Some(figures) = cached {
        return Ok(figures);
    }
    // A timer too coarse for the measurement must not give an impossible figure.
    let figures: Vec<f64> = measure()?
        .into_iter()
        .map(|g| g.clamp(*sane.start(), *sane.end()))
        .collect();
    if let Some(path) = path {
        // This executable's figures from earlier builds are dropped as this one's are
        // written.
        cache.retain(|k, _| k.starts_with(&build) || !k.starts_with(&executable));
        cache.extend(keys.into_iter().zip(figures.iter().copied()));
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
