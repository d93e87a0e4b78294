//! An output file written by one process at a time.
//!
//! Outputs are written atomically (a temporary file renamed over the target), so two
//! processes writing the same path never leave a torn file; but the last rename wins, and
//! the other process's result is lost although it reported success. A command that
//! writes a file at its end (`train --save`, `predict --output`, `plan --plot`, `import
//! --output`) therefore holds [`OutputLock`] on that path from its start: an advisory
//! lock on `.<name>.lock` beside it, holding the holder's process id, which a second
//! process finds taken and is refused, naming the path and the holder. The operating
//! system releases the lock when the process ends, however it ends; a lock file left by
//! a killed process is taken over by the next. The holder removes the file when done.
//!
//! [`take`] is the lock itself, shared with the checkpoint directory's `DIR/.lock`.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use tensorfit_core::{Error, Result};

fn file_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Takes the advisory lock of `lock_path` (created if needed) and writes this process's
/// id into it, for the message another process gets. `Ok(Err(holder))` when another
/// process holds it: `holder` is " (process N)", or empty when it wrote no id.
pub fn take(lock_path: &Path) -> Result<std::result::Result<File, String>> {
    let mut lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_path)
        .map_err(|e| file_error(lock_path, e))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = lock.read_to_string(&mut holder);
            return Ok(Err(match holder.trim() {
                "" => String::new(),
                pid => format!(" (process {pid})"),
            }));
        }
        Err(TryLockError::Error(e)) => return Err(file_error(lock_path, e)),
    }
    let _ = lock.set_len(0);
    let _ = lock.rewind();
    let _ = write!(lock, "{}", std::process::id());
    let _ = lock.flush();
    Ok(Ok(lock))
}

/// An output path this process alone writes until the lock is dropped.
#[derive(Debug)]
pub struct OutputLock {
    lock_path: PathBuf,
    /// Holds the lock while open.
    file: File,
}

impl OutputLock {
    /// Locks the output `path` (see the module documentation). Refuses a path another
    /// process holds, naming it and that process.
    pub fn hold(path: &Path) -> Result<OutputLock> {
        let name = path
            .file_name()
            .ok_or_else(|| file_error(path, "is not a file name"))?;
        let lock_path = path.with_file_name(format!(".{}.lock", name.to_string_lossy()));
        // A holder removes the file before it lets go: a lock taken on a file no longer
        // at the path (or replaced there) is no lock, and is taken again.
        for _ in 0..100 {
            let file = match take(&lock_path)? {
                Ok(f) => f,
                Err(holder) => {
                    return Err(file_error(
                        path,
                        format!("is the output of another tensorfit process{holder}, which writes it when it ends; give each run its own output file"),
                    ))
                }
            };
            if still_at(&file, &lock_path) {
                return Ok(OutputLock { lock_path, file });
            }
        }
        Err(file_error(
            &lock_path,
            "keeps being replaced by other processes; the lock could not be taken",
        ))
    }
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Removed while still held (the lock goes with `file` after this), so that no
        // other process takes the lock of a file that is gone (see `hold`).
        if cfg!(unix) && still_at(&self.file, &self.lock_path) {
            let _ = std::fs::remove_file(&self.lock_path);
        }
    }
}

/// Whether `file` is the file at `path` (not removed, nor replaced by another).
fn still_at(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        // No inode to compare: the file is never removed (see `drop`), so the file
        // locked is always the one at the path.
        let _ = (file, path);
        true
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_output_is_held_by_one_holder_and_free_again_once_dropped() {
        let dir = tensorfit_testing::scratch_dir("output-lock");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("model.safetensors");
        let held = OutputLock::hold(&out).unwrap();
        let e = OutputLock::hold(&out).unwrap_err().to_string();
        assert!(
            e.contains("model.safetensors")
                && e.contains("is the output of another tensorfit process")
                && e.contains(&format!("(process {})", std::process::id())),
            "{e}"
        );
        // Another output in the same directory is free.
        let other = OutputLock::hold(&dir.join("other.safetensors")).unwrap();
        drop((held, other));
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.is_empty() || cfg!(not(unix)), "{names:?}");
        assert!(OutputLock::hold(&out).is_ok());
    }
}
