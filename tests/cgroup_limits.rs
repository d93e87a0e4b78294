//! Memory limits of the process's own cgroup are seen and kept: inside a child memory
//! cgroup (cgroup v1 or v2, the limit one level above the process's own cgroup) the CPU
//! reports the limit, and the seed case's evaluation (100 sequences of 2000 steps)
//! streams within 400 MB and within 150 MB either runs or is refused with the reason —
//! never killed by the kernel.
//!
//! Creating a cgroup needs root and a writable cgroup file system (CI runs as root);
//! elsewhere the tests print why they skip.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{json, scratch};

/// A memory cgroup `outer` with a limit, and `outer/inner` without one, where the
/// command runs: the limit is a level above the process's own cgroup, as in a container
/// or a batch job's step. Both are removed when dropped.
#[derive(Debug)]
struct LimitedCgroup {
    outer: PathBuf,
    v2: bool,
}

impl LimitedCgroup {
    /// `None`, after printing why, where no cgroup can be made here.
    fn create(name: &str, limit: u64) -> Option<LimitedCgroup> {
        let name = format!("tensorfit-test-{}-{name}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let (outer, is_v2) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(&name), false)
        } else if fs::read_to_string(v2.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
        {
            (v2.join(&name), true)
        } else {
            println!("skipped: no cgroup v1 memory hierarchy and no cgroup v2 memory controller at /sys/fs/cgroup");
            return None;
        };
        let made = (|| -> std::io::Result<()> {
            fs::create_dir(&outer)?;
            if is_v2 {
                // Let the child have the memory controller too.
                let control = Path::new("/sys/fs/cgroup/cgroup.subtree_control");
                fs::write(control, "+memory")?;
                fs::write(outer.join("cgroup.subtree_control"), "+memory")?;
                fs::write(outer.join("memory.max"), limit.to_string())?;
                // No swap either, where swap accounting exists.
                let _ = fs::write(outer.join("memory.swap.max"), "0");
            } else {
                fs::write(outer.join("memory.limit_in_bytes"), limit.to_string())?;
                // No swap either, where swap accounting exists.
                let _ = fs::write(outer.join("memory.memsw.limit_in_bytes"), limit.to_string());
            }
            fs::create_dir(outer.join("inner"))
        })();
        let group = LimitedCgroup { outer, v2: is_v2 };
        match made {
            Ok(()) => Some(group),
            Err(e) => {
                println!(
                    "skipped: cannot create a memory cgroup at {} ({e})",
                    group.outer.display()
                );
                None
            }
        }
    }

    /// Runs tensorfit with `args` inside the inner cgroup.
    fn run(&self, args: &[&str]) -> Output {
        let procs = self.outer.join("inner").join("cgroup.procs");
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}' && exec \"$0\" \"$@\"",
                procs.display()
            ))
            .arg(env!("CARGO_BIN_EXE_tensorfit"))
            .args(args)
            .env("XDG_CACHE_HOME", scratch("cache"))
            .output()
            .unwrap()
    }

    /// How many times the kernel's OOM killer acted in the cgroup.
    fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill ")
        } else {
            ("memory.oom_control", "oom_kill ")
        };
        fs::read_to_string(self.outer.join(file))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for LimitedCgroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(self.outer.join("inner"));
        let _ = fs::remove_dir(&self.outer);
    }
}

const MB: u64 = 1_000_000;

#[test]
fn the_cpu_reports_the_limit_of_a_cgroup_above_its_own() {
    let Some(group) = LimitedCgroup::create("devices", 400 * MB) else {
        return;
    };
    let out = group.run(&["devices", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let cpu = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["kind"] == "cpu")
        .unwrap()
        .clone();
    assert!(cpu["total_bytes"].as_u64().unwrap() <= 400 * MB, "{cpu}");
    assert!(cpu["free_bytes"].as_u64().unwrap() < 400 * MB, "{cpu}");
    assert!(
        cpu["capacity_source"].as_str().unwrap().contains("cgroup"),
        "{cpu}"
    );
}

#[test]
fn the_seed_case_evaluation_is_split_in_400_mb_and_never_killed_in_150_mb() {
    let eval = ["eval", "--batch", "100", "--seq-len", "2000", "--json"];
    let Some(group) = LimitedCgroup::create("eval400", 400 * MB) else {
        return;
    };
    let out = group.run(&eval);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "400 MB: {:?}: {err}", out.status);
    let v = json(&out);
    // Split in time chunks or in micro-batches, whichever is estimated faster.
    let strategy = v["strategy"].as_str().unwrap();
    assert!(
        strategy.contains("streamed") || strategy.contains("micro-batches"),
        "{v}"
    );
    assert_eq!(group.oom_kills(), 0);
    drop(group);

    let Some(group) = LimitedCgroup::create("eval150", 150 * MB) else {
        return;
    };
    let out = group.run(&eval);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    println!(
        "150 MB: {:?}: {}",
        out.status,
        err.lines().last().unwrap_or("")
    );
    assert_eq!(group.oom_kills(), 0, "killed by the kernel: {err}");
    match out.status.code() {
        Some(0) => {}
        Some(1) => assert!(
            err.contains("host memory") || err.contains("smallest plan"),
            "{err}"
        ),
        _ => panic!("150 MB: ended by {:?}: {err}", out.status),
    }
}
