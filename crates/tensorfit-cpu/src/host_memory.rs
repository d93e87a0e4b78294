//! How much memory the host has for this process: `/proc/meminfo` bounded by the memory
//! limits of the cgroup the process is in *and of every cgroup above it*, so a process in
//! a container, a Slurm job or a Kubernetes pod with a 4 GiB limit on a 256 GiB machine
//! plans for 4 GiB (and a job step inside a job, for the smaller of the two), and by the
//! limits set on the process itself (`ulimit -v`, `ulimit -d`).
//!
//! The cgroup comes from `/proc/self/cgroup`, the hierarchy's mount from
//! `/proc/self/mountinfo`. cgroup v2 (`memory.max`, and `memory.high`, above which the
//! kernel throttles the process hard) and v1 (`memory.limit_in_bytes`) are both read,
//! from the process's cgroup up to the hierarchy's root; a missing file or `max` means no
//! limit there. What a cgroup has left is its limit less its working set: usage less the
//! inactive file cache, which the kernel reclaims before it kills anything (the figure
//! `docker stats` and the kubelet use).
//!
//! The process's own limits come from `/proc/self/limits` (the soft limits, which the
//! kernel enforces): RLIMIT_AS bounds its address space, everything it has mapped
//! (`VmSize`: code, libraries, thread stacks, the allocator's reserved arenas, a Vulkan
//! driver's mappings, resident or not), RLIMIT_DATA its data (`VmData`: the heap and
//! private writable mappings). What is left under one is the limit less that use now.

use std::fs;
use std::path::{Path, PathBuf};

/// Physical memory usable by this process: MemTotal, or the tightest cgroup limit or
/// process limit if lower.
pub fn total() -> Option<u64> {
    bounds(Path::new("/")).iter().map(|b| b.limit).min()
}

/// Memory available now: MemAvailable, or what is left under the tightest cgroup or
/// process limit if lower.
pub fn available() -> Option<u64> {
    bounds(Path::new("/")).iter().map(|b| b.left).min()
}

/// Where [`total`] and [`available`] come from, for device tables and messages: the
/// process limit that leaves the least when it binds (`ulimit -v (RLIMIT_AS) of 1.00 GiB,
/// 240.0 MiB of it in use`), else MemAvailable and the tightest cgroup limit.
pub fn source() -> String {
    source_of(&bounds(Path::new("/")))
}

/// The process's own limits (`ulimit -v`, `ulimit -d`) that are set, with its use of
/// each now.
pub fn process_limits() -> Vec<ProcessLimit> {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    process_limits_in(&read("/proc/self/limits"), &read("/proc/self/status"))
}

/// What this process holds resident now (`VmRSS`): its code, libraries, drivers and
/// every allocation it has touched.
pub fn resident() -> Option<u64> {
    status_bytes("VmRSS")
}

/// The most this process has held resident so far (`VmHWM`).
pub fn peak_resident() -> Option<u64> {
    status_bytes("VmHWM")
}

/// A limit set on this process with `setrlimit` (`ulimit`), and its use of it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLimit {
    /// How it is set and named: `ulimit -v (RLIMIT_AS)`, `ulimit -d (RLIMIT_DATA)`.
    pub name: &'static str,
    /// The soft limit, in bytes.
    pub limit: u64,
    /// What the process uses of it now: its address space (`VmSize`) or its data
    /// (`VmData`), in bytes.
    pub used: u64,
}

impl ProcessLimit {
    /// Whether the limit counts address space (RLIMIT_AS), mapped or touched or not.
    pub fn counts_address_space(&self) -> bool {
        self.name == PROCESS_LIMITS[0].1
    }

    /// What is left under the limit.
    pub fn left(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

impl std::fmt::Display for ProcessLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {}, {} of it in use",
            self.name,
            mib(self.limit),
            mib(self.used)
        )
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Each process limit read: its line in `/proc/self/limits`, its name, and the field of
/// `/proc/self/status` that counts against it.
const PROCESS_LIMITS: [(&str, &str, &str); 2] = [
    ("Max address space", "ulimit -v (RLIMIT_AS)", "VmSize"),
    ("Max data size", "ulimit -d (RLIMIT_DATA)", "VmData"),
];

/// The process limits set in `limits` (`/proc/self/limits` text: a name, the soft limit
/// and the hard one; `unlimited` is none), with the use `status` (`/proc/self/status`)
/// gives.
fn process_limits_in(limits: &str, status: &str) -> Vec<ProcessLimit> {
    PROCESS_LIMITS
        .iter()
        .filter_map(|&(line, name, field)| {
            let soft = limits
                .lines()
                .find_map(|l| l.strip_prefix(line))?
                .split_whitespace()
                .next()?;
            Some(ProcessLimit {
                name,
                limit: soft.parse().ok()?,
                used: kib_field(status, field).unwrap_or(0),
            })
        })
        .collect()
}

/// One bound on the memory this process may use.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bound {
    what: BoundKind,
    limit: u64,
    /// What is left under it now.
    left: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BoundKind {
    /// The machine's memory (MemTotal, MemAvailable).
    Host,
    /// A cgroup's memory limit, by its directory.
    Cgroup(PathBuf),
    /// A limit on the process itself.
    Process(ProcessLimit),
}

/// Every bound on this process's memory, read below `root` (`/` on a live system; a
/// directory tree in tests).
fn bounds(root: &Path) -> Vec<Bound> {
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap_or_default();
    let meminfo = read("proc/meminfo");
    let mut out: Vec<Bound> = match (
        kib_field(&meminfo, "MemTotal"),
        kib_field(&meminfo, "MemAvailable"),
    ) {
        (Some(limit), Some(left)) => vec![Bound {
            what: BoundKind::Host,
            limit,
            left,
        }],
        _ => Vec::new(),
    };
    out.extend(cgroup_levels(root).into_iter().map(|l| Bound {
        limit: l.limit,
        left: l.left(),
        what: BoundKind::Cgroup(l.dir),
    }));
    let limits = process_limits_in(&read("proc/self/limits"), &read("proc/self/status"));
    out.extend(limits.into_iter().map(|p| Bound {
        limit: p.limit,
        left: p.left(),
        what: BoundKind::Process(p),
    }));
    out
}

/// [`source`] of `bounds`.
fn source_of(bounds: &[Bound]) -> String {
    let tightest = bounds.iter().min_by_key(|b| b.left);
    if let Some(Bound {
        what: BoundKind::Process(p),
        ..
    }) = tightest
    {
        return p.to_string();
    }
    let cgroup = bounds
        .iter()
        .filter_map(|b| match &b.what {
            BoundKind::Cgroup(dir) => Some((b.limit, dir)),
            _ => None,
        })
        .min_by_key(|(limit, _)| *limit);
    match cgroup {
        Some((_, dir)) => format!("MemAvailable and the cgroup limit of {}", dir.display()),
        None => "MemAvailable".into(),
    }
}

fn status_bytes(key: &str) -> Option<u64> {
    kib_field(&fs::read_to_string("/proc/self/status").ok()?, key)
}

fn min_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The `key:  N kB` line of a /proc file, in bytes.
fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// One cgroup with a memory limit, on the path from the process's cgroup to the root.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupLevel {
    dir: PathBuf,
    limit: u64,
    /// Usage less reclaimable (inactive) file cache.
    working_set: u64,
}

impl CgroupLevel {
    fn left(&self) -> u64 {
        self.limit.saturating_sub(self.working_set)
    }
}

/// cgroup v1 reports "no limit" as a huge page-aligned number.
const NO_LIMIT: u64 = 1 << 60;

/// Every cgroup with a memory limit above this process, read below `root` (`/` on a
/// live system; a directory tree in tests).
fn cgroup_levels(root: &Path) -> Vec<CgroupLevel> {
    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap_or_default();
    let membership = read("proc/self/cgroup");
    let mut levels = Vec::new();
    for mount in mounts(&read("proc/self/mountinfo")) {
        let path = membership.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let ours = if mount.v2 {
                controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "memory")
            };
            ours.then(|| path.to_string())
        });
        let Some(path) = path else { continue };
        let top = root.join(mount.point.strip_prefix("/").unwrap_or(&mount.point));
        // The cgroup's path below the mount's own root (a container sees only its part).
        let below = path
            .strip_prefix(mount.root.trim_end_matches('/'))
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .unwrap_or("")
            .trim_start_matches('/');
        let mut dir = top.join(below);
        loop {
            if let Some(level) = read_level(&dir, mount.v2) {
                levels.push(level);
            }
            if dir == top || !dir.pop() || !dir.starts_with(&top) {
                break;
            }
        }
    }
    levels
}

/// The limit and working set of the cgroup in `dir`, if it has a limit.
fn read_level(dir: &Path, v2: bool) -> Option<CgroupLevel> {
    let value = |name: &str| -> Option<u64> {
        fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok()
    };
    let stat = |key: &str| -> u64 {
        fs::read_to_string(dir.join("memory.stat"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    };
    let (limit, usage, inactive) = if v2 {
        // `max` does not parse: no limit at that level.
        let limit = min_known(value("memory.max"), value("memory.high"))?;
        (limit, value("memory.current"), stat("inactive_file"))
    } else {
        let limit = value("memory.limit_in_bytes")?;
        (
            limit,
            value("memory.usage_in_bytes"),
            stat("total_inactive_file"),
        )
    };
    (limit < NO_LIMIT).then(|| CgroupLevel {
        dir: dir.to_path_buf(),
        limit,
        working_set: usage.unwrap_or(0).saturating_sub(inactive),
    })
}

/// A mounted cgroup hierarchy: v2, or v1 with the memory controller.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The cgroup path the mount shows at its top (`/` unless in a namespace).
    root: String,
    point: PathBuf,
    v2: bool,
}

/// The cgroup mounts in `/proc/self/mountinfo` text: fields 4 and 5 are the mount's root
/// and mount point; after ` - ` come the file system type, the source and the options.
fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let fs: Vec<&str> = right.split(' ').collect();
            let v2 = match *fs.first()? {
                "cgroup2" => true,
                "cgroup" if fs.get(2)?.split(',').any(|o| o == "memory") => false,
                _ => return None,
            };
            Some(Mount {
                root: unescape(fields.get(3)?),
                point: PathBuf::from(unescape(fields.get(4)?)),
                v2,
            })
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(c) => {
                out.push(c as char);
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A fake `/` with `files` (path, contents).
    fn fake_root(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let root = tensorfit_testing::scratch_dir("cgroup").join(name);
        let _ = fs::remove_dir_all(&root);
        for (path, text) in files {
            let p = root.join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        root
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn nested_v2_limits_take_the_tightest_level_and_memory_high() {
        let root = fake_root(
            "v2",
            &[
                ("proc/self/cgroup", "0::/job/step\n"),
                (
                    "proc/self/mountinfo",
                    "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
                ),
                ("sys/fs/cgroup/job/memory.max", "419430400\n"),
                ("sys/fs/cgroup/job/memory.high", "max\n"),
                ("sys/fs/cgroup/job/memory.current", "104857600\n"),
                (
                    "sys/fs/cgroup/job/memory.stat",
                    "anon 1\ninactive_file 52428800\n",
                ),
                ("sys/fs/cgroup/job/step/memory.max", "max\n"),
                ("sys/fs/cgroup/job/step/memory.high", "629145600\n"),
                ("sys/fs/cgroup/job/step/memory.current", "10485760\n"),
                ("sys/fs/cgroup/memory.max", "max\n"),
            ],
        );
        let levels = cgroup_levels(&root);
        let by_limit: Vec<(u64, u64)> = levels.iter().map(|l| (l.limit, l.left())).collect();
        assert_eq!(by_limit, [(600 * MIB, 590 * MIB), (400 * MIB, 350 * MIB)]);
    }

    #[test]
    fn v1_limits_are_read_below_a_namespaced_mount_root() {
        let root = fake_root(
            "v1",
            &[
                (
                    "proc/self/cgroup",
                    "5:cpu:/\n4:memory:/docker/abc/inner\n0::/\n",
                ),
                (
                    "proc/self/mountinfo",
                    "35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                     41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
                ),
                ("sys/fs/cgroup/memory/memory.limit_in_bytes", "157286400\n"),
                ("sys/fs/cgroup/memory/memory.usage_in_bytes", "20971520\n"),
                (
                    "sys/fs/cgroup/memory/memory.stat",
                    "total_inactive_file 0\n",
                ),
                (
                    "sys/fs/cgroup/memory/inner/memory.limit_in_bytes",
                    "9223372036854771712\n",
                ),
            ],
        );
        let levels = cgroup_levels(&root);
        assert_eq!(levels.len(), 1, "{levels:?}");
        assert_eq!((levels[0].limit, levels[0].left()), (150 * MIB, 130 * MIB));
        assert!(levels[0].dir.ends_with("sys/fs/cgroup/memory"));
    }

    #[test]
    fn ulimit_v_and_d_bound_the_memory_left_by_what_the_process_has_mapped() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max data size             unlimited            unlimited            bytes     \n\
                      Max stack size            8388608              unlimited            bytes     \n\
                      Max address space         629145600            unlimited            bytes     \n";
        let root = fake_root(
            "rlimit",
            &[
                ("proc/self/cgroup", "0::/\n"),
                (
                    "proc/meminfo",
                    "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n",
                ),
                ("proc/self/limits", limits),
                (
                    "proc/self/status",
                    "VmPeak:\t  300000 kB\nVmSize:\t  245760 kB\nVmData:\t   10240 kB\n",
                ),
            ],
        );
        let found = bounds(&root);
        let lowest = |f: fn(&Bound) -> u64| found.iter().map(f).min();
        assert_eq!(lowest(|b| b.limit), Some(600 * MIB));
        assert_eq!(lowest(|b| b.left), Some(360 * MIB));
        assert_eq!(
            source_of(&found),
            "ulimit -v (RLIMIT_AS) of 600.0 MiB, 240.0 MiB of it in use"
        );
        // The data limit binds instead where it leaves less.
        let tighter = limits.replace(
            "Max data size             unlimited",
            "Max data size             104857600",
        );
        let status = "VmSize:\t  245760 kB\nVmData:\t   10240 kB\n";
        let set = process_limits_in(&tighter, status);
        let names: Vec<(&str, u64)> = set.iter().map(|p| (p.name, p.left())).collect();
        assert_eq!(
            names,
            [
                ("ulimit -v (RLIMIT_AS)", 360 * MIB),
                ("ulimit -d (RLIMIT_DATA)", 90 * MIB)
            ]
        );
        assert!(process_limits_in(&limits.replace("629145600", "unlimited"), status).is_empty());
    }

    #[test]
    fn no_cgroup_files_mean_no_limit() {
        let root = fake_root("none", &[("proc/self/cgroup", "0::/\n")]);
        assert!(cgroup_levels(&root).is_empty());
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
    }
}
