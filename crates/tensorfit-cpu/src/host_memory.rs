//! How much memory the host has for this process: `/proc/meminfo` bounded by the cgroup
//! limit, so a container with a 4 GiB limit on a 256 GiB machine plans for 4 GiB.
//!
//! Both cgroup v2 (`memory.max`, `memory.current`) and v1 (`memory.limit_in_bytes`,
//! `memory.usage_in_bytes`) are read; a missing file or the value `max` means no limit.

use std::fs;

/// Physical memory usable by this process: MemTotal, or the cgroup limit if lower.
pub fn total() -> Option<u64> {
    let mem = meminfo_bytes("MemTotal");
    match (mem, cgroup_limit()) {
        (Some(m), Some((limit, _))) => Some(m.min(limit)),
        (m, l) => m.or(l.map(|(limit, _)| limit)),
    }
}

/// Memory available now: MemAvailable, or what is left under the cgroup limit if lower.
pub fn available() -> Option<u64> {
    let avail = meminfo_bytes("MemAvailable");
    let cg = cgroup_limit().map(|(limit, used)| limit.saturating_sub(used));
    match (avail, cg) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// Where [`total`] comes from, for device tables.
pub fn source() -> &'static str {
    if cgroup_limit().is_some() {
        "MemAvailable and cgroup limit"
    } else {
        "MemAvailable"
    }
}

fn meminfo_bytes(key: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// (limit, usage) of this process's memory cgroup, if it has a limit.
fn cgroup_limit() -> Option<(u64, u64)> {
    let read = |p: &str| -> Option<u64> { fs::read_to_string(p).ok()?.trim().parse().ok() };
    let v2 = read("/sys/fs/cgroup/memory.max").map(|l| (l, read("/sys/fs/cgroup/memory.current")));
    let v1 = || {
        read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
            .map(|l| (l, read("/sys/fs/cgroup/memory/memory.usage_in_bytes")))
    };
    let (limit, used) = v2.or_else(v1)?;
    // cgroup v1 reports "no limit" as a huge page-aligned number.
    if limit >= 1 << 60 {
        return None;
    }
    Some((limit, used.unwrap_or(0)))
}
