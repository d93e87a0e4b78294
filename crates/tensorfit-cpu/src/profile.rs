//! `TENSORFIT_PROFILE=1`: wall time per kernel, printed to stderr when the backend is
//! dropped. For users who want to know where a step goes on their CPU, and for us when
//! tuning kernels: a sampling profiler sees only the threads that are busy, not the
//! time one thread waits for the other, which this table includes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Calls and total wall time per kernel name.
#[derive(Debug)]
pub struct KernelTimes {
    per_kernel: BTreeMap<&'static str, (u64, Duration)>,
    started: Instant,
}

impl KernelTimes {
    /// Timing, if the environment asks for it (`TENSORFIT_PROFILE` set and not "0").
    pub fn from_env() -> Option<Self> {
        match std::env::var("TENSORFIT_PROFILE") {
            Ok(v) if v != "0" && !v.is_empty() => Some(KernelTimes {
                per_kernel: BTreeMap::new(),
                started: Instant::now(),
            }),
            _ => None,
        }
    }

    /// Adds one call of `kernel` that took `took`.
    pub fn add(&mut self, kernel: &'static str, took: Duration) {
        let entry = self.per_kernel.entry(kernel).or_default();
        entry.0 += 1;
        entry.1 += took;
    }

    /// True when no kernel has run.
    pub fn is_empty(&self) -> bool {
        self.per_kernel.is_empty()
    }

    /// The table, slowest kernel first, with each kernel's share of the kernels' total;
    /// the first line compares that total with the wall time since the backend was made.
    pub fn report(&self) -> String {
        let mut rows: Vec<_> = self.per_kernel.iter().collect();
        rows.sort_by_key(|(_, (_, t))| std::cmp::Reverse(*t));
        let total: Duration = rows.iter().map(|(_, (_, t))| *t).sum();
        let wall = self.started.elapsed();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut out = format!(
            "tensorfit CPU kernel times (TENSORFIT_PROFILE): {:.1} ms in kernels of {:.1} ms \
             since the backend was made\n",
            ms(total),
            ms(wall)
        );
        out += &format!(
            "{:<32} {:>8} {:>12} {:>10} {:>7}\n",
            "kernel", "calls", "total ms", "ms/call", "share"
        );
        for (name, (calls, t)) in rows {
            out += &format!(
                "{name:<32} {calls:>8} {:>12.2} {:>10.3} {:>6.1}%\n",
                ms(*t),
                ms(*t) / *calls as f64,
                100.0 * t.as_secs_f64() / total.as_secs_f64().max(1e-12)
            );
        }
        out
    }
}
