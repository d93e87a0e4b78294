//! How much memory the host has for this process: `/proc/meminfo` bounded by the memory
//! limits of the cgroup the process is in *and of every cgroup above it*, so a process in
//! a container, a Slurm job or a Kubernetes pod with a 4 GiB limit on a 256 GiB machine
//! plans for 4 GiB (and a job step inside a job, for the smaller of the two).
//!
//! The cgroup comes from `/proc/self/cgroup`, the hierarchy's mount from
//! `/proc/self/mountinfo`. cgroup v2 (`memory.max`, and `memory.high`, above which the
//! kernel throttles the process hard) and v1 (`memory.limit_in_bytes`) are both read,
//! from the process's cgroup up to the hierarchy's root; a missing file or `max` means no
//! limit there. What a cgroup has left is its limit less its working set: usage less the
//! inactive file cache, which the kernel reclaims before it kills anything (the figure
//! `docker stats` and the kubelet use).

use std::fs;
use std::path::{Path, PathBuf};

/// Physical memory usable by this process: MemTotal, or the tightest cgroup limit if
/// lower.
pub fn total() -> Option<u64> {
    let limit = cgroup_levels(Path::new("/")).iter().map(|l| l.limit).min();
    min_known(meminfo_bytes("MemTotal"), limit)
}

/// Memory available now: MemAvailable, or what is left under the tightest cgroup if
/// lower.
pub fn available() -> Option<u64> {
    let left = cgroup_levels(Path::new("/"))
        .iter()
        .map(CgroupLevel::left)
        .min();
    min_known(meminfo_bytes("MemAvailable"), left)
}

/// Where [`total`] and [`available`] come from, for device tables.
pub fn source() -> String {
    match cgroup_levels(Path::new("/")).iter().min_by_key(|l| l.limit) {
        Some(l) => format!("MemAvailable and the cgroup limit of {}", l.dir.display()),
        None => "MemAvailable".into(),
    }
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

fn status_bytes(key: &str) -> Option<u64> {
    kib_field(&fs::read_to_string("/proc/self/status").ok()?, key)
}

fn min_known(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn meminfo_bytes(key: &str) -> Option<u64> {
    kib_field(&fs::read_to_string("/proc/meminfo").ok()?, key)
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
    fn no_cgroup_files_mean_no_limit() {
        let root = fake_root("none", &[("proc/self/cgroup", "0::/\n")]);
        assert!(cgroup_levels(&root).is_empty());
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
    }
}
