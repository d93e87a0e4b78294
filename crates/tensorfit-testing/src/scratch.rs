//! Where tests find files: scratch directories, one per test process, swept once the
//! process has ended; and the repository's own files.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// Prefix of every test process's scratch directory in the temporary directory.
const PREFIX: &str = "tensorfit-test-";

/// `<temp>/tensorfit-test-<pid>/<name>`, created if missing (its contents are kept between
/// calls of one process). The first call of a process removes the scratch directories of
/// test processes that have ended — a run's checkpoints and data files add up to over
/// 100 MB, and test runs are many — so a failed test's files stay for inspection until the
/// next test run. It also empties this process's own directory: anything there was left
/// by an earlier process with the same pid (pids are reused, and a fresh container
/// hands out the same ones run after run), and a test that resumes from a checkpoint
/// must not find another run's.
pub fn scratch_dir(name: &str) -> PathBuf {
    static SWEEP: Once = Once::new();
    let mine = own_dir();
    SWEEP.call_once(|| {
        remove_ended();
        let _ = std::fs::remove_dir_all(&mine);
    });
    let d = mine.join(name);
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("scratch directory {}: {e}", d.display());
    }
    d
}

/// `<temp>/tensorfit-test-<pid>`: this process's scratch directory.
fn own_dir() -> PathBuf {
    std::env::temp_dir().join(format!("{PREFIX}{}", std::process::id()))
}

/// The repository's file at `path` from the workspace root (`examples/data/classify.csv`),
/// the same for every crate's tests (this crate sits at `crates/tensorfit-testing`).
pub fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Removes `tensorfit-test-<pid>` directories whose process is gone (where `/proc` tells;
/// elsewhere nothing is removed).
fn remove_ended() {
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let ended =
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && !proc.join(pid).exists();
        if ended {
            // Another test process may sweep the same directory at once.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_processs_scratch_is_swept_and_a_running_ones_is_kept() {
        // What an earlier process with this pid left is gone by the first call (this is
        // the only test of this crate that calls `scratch_dir`, so that call is the first).
        let stale = own_dir().join("stale");
        let _ = std::fs::create_dir_all(&stale);
        std::fs::write(stale.join("run.safetensors"), b"old").unwrap();
        // Above Linux's largest pid (2^22), so no process has it.
        let ended = std::env::temp_dir().join(format!("{PREFIX}4999999"));
        std::fs::create_dir_all(ended.join("run")).unwrap();
        let mine = scratch_dir("kept");
        assert!(!stale.exists(), "{} was kept", stale.display());
        remove_ended();
        assert!(mine.exists());
        if Path::new("/proc/self").exists() {
            assert!(!ended.exists(), "{} was left", ended.display());
        } else {
            println!("skipped the sweep check: no /proc here to tell which processes ended");
            let _ = std::fs::remove_dir_all(ended);
        }
    }
}
