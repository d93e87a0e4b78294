//! A training run's checkpoint directory: `DIR/checkpoint.safetensors`, kept current by
//! one run at a time.
//!
//! [`CheckpointDir::lock`] takes an advisory lock on `DIR/.lock` ([`take`]: the operating
//! system releases it when the process ends, however it ends), so a second run on the same
//! directory is refused instead of racing the first for the last rename. While the lock
//! is held no other tensorfit writes there, so every temporary file left in it is stale
//! (from a writer that was killed) and is removed. Whether the checkpoint already in the
//! directory may be replaced is the caller's decision; [`CheckpointDir::existing`] reads
//! it.

use std::fs::File;
use std::path::{Path, PathBuf};

use tensorfit_core::{Error, Result};
use tensorfit_nn::atomic_file::check_writable;
use tensorfit_nn::Checkpoint;

use crate::output_lock::take;

/// The checkpoint's file name inside its directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.safetensors";

/// The lock file's name inside the directory.
const LOCK_FILE: &str = ".lock";

/// A checkpoint path as users give it: a file, or a directory holding [`CHECKPOINT_FILE`].
pub fn checkpoint_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(CHECKPOINT_FILE)
    } else {
        path.to_path_buf()
    }
}

/// A checkpoint directory this process holds the lock of (until it is dropped).
#[derive(Debug)]
pub struct CheckpointDir {
    dir: PathBuf,
    /// Holds the lock while open.
    _lock: File,
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

impl CheckpointDir {
    /// Creates `dir` if needed, locks it, removes stale temporary files and checks that a
    /// checkpoint can be written there. Refuses a directory another process has locked,
    /// naming that process.
    pub fn lock(dir: &Path) -> Result<CheckpointDir> {
        if dir.exists() && !dir.is_dir() {
            return Err(file_error(dir, "is a file, not a directory"));
        }
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = match take(&lock_path)? {
            Ok(lock) => lock,
            Err(holder) => {
                return Err(file_error(
                    dir,
                    format!("is in use by another training run{holder}; one directory serves one run at a time"),
                ))
            }
        };
        let me = CheckpointDir {
            dir: dir.to_path_buf(),
            _lock: lock,
        };
        me.remove_temporaries();
        check_writable(&me.checkpoint_path())?;
        Ok(me)
    }

    /// `DIR/checkpoint.safetensors`.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.dir.join(CHECKPOINT_FILE)
    }

    /// The directory this lock holds.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The checkpoint already in the directory: `None` if there is none, else the
    /// checkpoint or why it cannot be read.
    pub fn existing(&self) -> Option<Result<Checkpoint>> {
        let path = self.checkpoint_path();
        path.exists().then(|| Checkpoint::load(&path))
    }

    /// Removes `.checkpoint.safetensors.tmp<pid>` files: with the lock held, no other
    /// process is writing them.
    fn remove_temporaries(&self) {
        let prefix = format!(".{CHECKPOINT_FILE}.tmp");
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_locked_directory_is_refused_until_its_holder_lets_go() {
        let dir = tensorfit_testing::scratch_dir("checkpoint-dir");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(".checkpoint.safetensors.tmp1"), b"stale").unwrap();
        let held = CheckpointDir::lock(&dir).unwrap();
        assert!(!dir.join(".checkpoint.safetensors.tmp1").exists());
        let e = CheckpointDir::lock(&dir).unwrap_err().to_string();
        assert!(
            e.contains("in use by another training run")
                && e.contains(&format!("process {}", std::process::id())),
            "{e}"
        );
        drop(held);
        assert!(CheckpointDir::lock(&dir).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
