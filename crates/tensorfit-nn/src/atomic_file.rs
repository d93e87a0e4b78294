//! Output files written whole or not at all, and checked before any work is done.
//!
//! Every file tensorfit writes (checkpoints, predictions, the throughput cache) goes
//! through [`write_atomic`]: the bytes go to a temporary file beside the target
//! (`.<name>.tmp<pid>`), which is flushed to disk and renamed over the target, so a
//! crash, a kill or a full disk leaves either the previous file or the new one, never a
//! truncated one. A write that fails removes its temporary file; temporaries left by
//! processes that no longer exist (killed mid-write) are removed by the next write of the
//! same file. [`check_writable`] tries the same steps with an empty file, so a run can
//! refuse an output it could not write before it spends hours computing it.

use std::io::Write;
use std::path::{Path, PathBuf};

use tensorfit_core::{Error, Result};

fn file_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// The file name of `path`, or an error naming it (`/`, `..` and `` have none).
fn file_name(path: &Path) -> Result<String> {
    match path.file_name() {
        Some(n) => Ok(n.to_string_lossy().into_owned()),
        None => Err(file_error(path, "is not a file name")),
    }
}

/// The temporary file `path` is written through: `.<name>.tmp<pid>` in its directory.
fn temporary(path: &Path, pid: u32) -> Result<PathBuf> {
    Ok(path.with_file_name(format!(".{}.tmp{pid}", file_name(path)?)))
}

/// Writes `bytes` to `path` atomically (see the module documentation).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes what `write` writes to `path` atomically (see the module documentation): for
/// a file made piece by piece, with no copy of it whole in memory.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    remove_stale_temporaries(path);
    let tmp = temporary(path, std::process::id())?;
    let written = (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        // Leave nothing behind: a full disk must not stay full of our half-written file.
        let _ = std::fs::remove_file(&tmp);
        return Err(file_error(path, e));
    }
    sync_directory(path);
    Ok(())
}

/// Makes a rename in `path`'s directory durable; not every platform can open a directory.
fn sync_directory(path: &Path) {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Checks that [`write_atomic`] could write `path`: it is not a directory, and an empty
/// temporary file can be created in its directory and removed. Nothing at `path` itself
/// changes. Errors say what is wrong (no such directory, permission, read-only file
/// system) and name the path.
pub fn check_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(file_error(path, "is a directory, not a file"));
    }
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => Path::new("."),
    };
    if !dir.is_dir() {
        let why = if dir.exists() {
            format!("{} is not a directory", dir.display())
        } else {
            format!("the directory {} does not exist", dir.display())
        };
        return Err(file_error(path, why));
    }
    let tmp = temporary(path, std::process::id())?;
    std::fs::File::create(&tmp).map_err(|e| file_error(path, format!("cannot be written: {e}")))?;
    std::fs::remove_file(&tmp).map_err(|e| file_error(&tmp, e))
}

/// Whether `a` and `b` are the same existing file (through links and different
/// spellings of the path). False if either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// Whether process `pid` may still be running. Only Linux's /proc can tell that a
/// process is gone; elsewhere every process counts as running (its files are kept).
fn may_be_running(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// Removes the temporaries of `path` (`.<name>.tmp<pid>`) whose writer no longer runs.
pub fn remove_stale_temporaries(path: &Path) {
    let Ok(name) = file_name(path) else {
        return;
    };
    let prefix = format!(".{name}.tmp");
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let pid = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !may_be_running(p)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = tensorfit_testing::scratch_dir("atomic").join(name);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The pid of a process that has exited.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = scratch("whole");
        let path = dir.join("out.bin");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        assert_eq!(names(&dir), ["out.bin"]);
    }

    #[test]
    fn a_failed_write_removes_its_temporary_and_keeps_the_old_file() {
        let dir = scratch("failed");
        let path = dir.join("out.bin");
        write_atomic(&path, b"old").unwrap();
        // Renaming a file over a non-empty directory fails after the temporary exists.
        let blocked = dir.join("blocked");
        std::fs::create_dir_all(blocked.join("inside")).unwrap();
        assert!(write_atomic(&blocked, b"new").is_err());
        assert_eq!(names(&dir), ["blocked", "out.bin"]);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
    }

    #[test]
    fn temporaries_of_dead_writers_are_removed_and_live_ones_kept() {
        if !Path::new("/proc/self").exists() {
            println!("skipped: no /proc to tell whether a process runs");
            return;
        }
        let dir = scratch("stale");
        let path = dir.join("ck.safetensors");
        let dead = format!(".ck.safetensors.tmp{}", dead_pid());
        // Process 1 always runs; its file is not ours to remove.
        let alive = ".ck.safetensors.tmp1".to_string();
        let other = ".other.safetensors.tmp4000000".to_string();
        for n in [&dead, &alive, &other] {
            std::fs::write(dir.join(n), b"partial").unwrap();
        }
        write_atomic(&path, b"new").unwrap();
        let mut want = vec![alive, other, "ck.safetensors".to_string()];
        want.sort();
        assert_eq!(names(&dir), want);
    }

    #[test]
    fn unwritable_outputs_are_named_before_any_work() {
        let dir = scratch("check");
        let e = check_writable(&dir.join("missing").join("model.safetensors"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist") && e.contains("missing"), "{e}");
        let e = check_writable(&dir).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        let e = check_writable(&file.join("model.safetensors"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
        check_writable(&dir.join("fine.safetensors")).unwrap();
        assert_eq!(names(&dir), ["plain"], "the check leaves nothing behind");
    }

    #[test]
    fn the_same_file_is_recognised_through_other_spellings() {
        let dir = scratch("same");
        let a = dir.join("a");
        std::fs::write(&a, b"x").unwrap();
        let dotted = dir.join(".").join("a");
        assert!(same_file(&a, &dotted));
        assert!(!same_file(&a, &dir.join("b")));
    }
}
