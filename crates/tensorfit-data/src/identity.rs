//! The identity of a data file or of a DL4J directory: where it is, its size, a hash of its
//! content and how many sequences were read from it. A data run keeps its data's identity
//! (and its `--val` file's) in every checkpoint ([`DataIdentities`], under
//! [`IDENTITY_KEY`]), so that a resumed run can refuse data that is not the data it was
//! trained on, and ranks of one launch can check that they all read the same data.
//!
//! The hash is cheap for large files: a file of at most [`WHOLE_FILE`] bytes is hashed
//! whole; a larger one by its size, its first and last MiB and [`SAMPLES`] blocks of
//! 64 KiB evenly spaced between them (about 6 MiB read, whatever the file's size). It
//! catches any change to a file up to 16 MiB, any change of size, and a change anywhere in
//! the parts of a larger file it reads; it cannot catch an edit that keeps a large file's
//! size and falls between its samples (one label rewritten in the middle of a 1 GB file).
//! Neither a file's name nor its modification time is part of the content: a copy or a
//! moved file is the same data. A directory (DL4J's layout) is hashed file by file over
//! its `features/` and `labels/` (each file's name, size and hash; hidden files such as
//! `.DS_Store` are left out).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::error::{DataError, Result};

/// The checkpoint metadata key of a data run's [`DataIdentities`].
pub const IDENTITY_KEY: &str = "data.identity";

/// Files up to this size are hashed whole.
const WHOLE_FILE: u64 = 16 << 20;

/// The head and the tail of a larger file hashed whole.
const END: u64 = 1 << 20;

/// Blocks of a larger file hashed between its head and tail, and their size.
const SAMPLES: u64 = 64;
const SAMPLE: u64 = 64 << 10;

/// The subdirectories of a DL4J directory that hold its data.
const DIR_PARTS: [&str; 2] = ["features", "labels"];

/// What a data file (or DL4J directory) is: where, its size, a hash of its content and
/// the sequences read from it. The hash reads a file up to 16 MiB whole, and a larger one
/// by its size, its first and last MiB and 64 blocks of 64 KiB evenly spaced between:
/// it sees any change to a small file and any change of size, but not an edit that keeps
/// a large file's size and falls between its samples. Names and modification times are
/// not content (a copy is the same data); a directory is hashed over the files of its
/// `features/` and `labels/`, hidden files left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataIdentity {
    /// Where it was read, made absolute.
    pub path: PathBuf,
    /// Its size (a directory's: the sum of its files').
    pub bytes: u64,
    /// The files hashed: 1 for a file.
    pub files: u64,
    /// The hash of its content (of samples of a file over 16 MiB).
    pub hash: u64,
    /// The sequences read from it (a text's: its windows).
    pub sequences: u64,
}

impl DataIdentity {
    /// The identity of the file or DL4J directory at `path`, from which `sequences`
    /// sequences were read.
    pub fn of(path: &Path, sequences: usize) -> Result<DataIdentity> {
        let absolute = std::fs::canonicalize(path).map_err(DataError::io(path))?;
        let mut h = Hasher::new();
        let (mut bytes, mut files) = (0, 0);
        if absolute.is_dir() {
            for part in DIR_PARTS {
                let dir = absolute.join(part);
                if !dir.is_dir() {
                    continue;
                }
                for file in visible_files(&dir)? {
                    let (size, hash) = file_hash(&file)?;
                    let name = file.strip_prefix(&absolute).unwrap_or(&file);
                    h.bytes(name.to_string_lossy().as_bytes());
                    h.word(size);
                    h.word(hash);
                    bytes += size;
                    files += 1;
                }
            }
        } else {
            let (size, hash) = file_hash(&absolute)?;
            h.word(hash);
            (bytes, files) = (size, 1);
        }
        Ok(DataIdentity {
            path: absolute,
            bytes,
            files,
            hash: h.finish(),
            sequences: sequences as u64,
        })
    }

    /// Its content, without where it is: what ranks of one launch compare (each may
    /// read its own copy).
    pub fn content(&self) -> String {
        format!(
            "{} sequences, {} bytes in {} file{}, content hash {:016x}",
            self.sequences,
            self.bytes,
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.hash
        )
    }

    /// How this data differs from `run`'s (each difference naming both values); empty
    /// when it holds the same content (it may have moved: compare [`DataIdentity::path`]).
    pub fn differences(&self, run: &DataIdentity) -> Vec<String> {
        let mut out = Vec::new();
        if self.files != run.files {
            out.push(format!("{} files (the run's: {})", self.files, run.files));
        }
        if self.bytes != run.bytes {
            out.push(format!("{} bytes (the run's: {})", self.bytes, run.bytes));
        }
        if self.hash != run.hash {
            out.push(format!(
                "content hash {:016x} (the run's: {:016x})",
                self.hash, run.hash
            ));
        }
        if self.sequences != run.sequences {
            out.push(format!(
                "{} sequences read (the run read {}{})",
                self.sequences,
                run.sequences,
                match out.is_empty() {
                    // The same bytes read otherwise: the reading settings changed.
                    true => " from the same bytes: --max-seq-len or --cut-long differ",
                    false => "",
                }
            ));
        }
        out
    }

    fn to_json(&self) -> Value {
        json!({
            "path": self.path.to_string_lossy(),
            "bytes": self.bytes,
            "files": self.files,
            "hash": format!("{:016x}", self.hash),
            "sequences": self.sequences,
        })
    }

    fn from_json(v: &Value) -> Option<DataIdentity> {
        Some(DataIdentity {
            path: PathBuf::from(v["path"].as_str()?),
            bytes: v["bytes"].as_u64()?,
            files: v["files"].as_u64()?,
            hash: u64::from_str_radix(v["hash"].as_str()?, 16).ok()?,
            sequences: v["sequences"].as_u64()?,
        })
    }
}

/// The identities of a data run's `--data` and `--val` (`None`: it validates on a part of
/// `--data`, or not at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataIdentities {
    pub data: DataIdentity,
    pub val: Option<DataIdentity>,
}

impl DataIdentities {
    /// Writes the identities into a checkpoint's metadata under [`IDENTITY_KEY`].
    pub fn store(&self, extra: &mut HashMap<String, String>) {
        let v = json!({
            "data": self.data.to_json(),
            "val": self.val.as_ref().map(DataIdentity::to_json),
        });
        extra.insert(IDENTITY_KEY.to_string(), v.to_string());
    }

    /// The identities a checkpoint's metadata holds; `None` for a checkpoint written
    /// before they were kept.
    pub fn load(extra: &HashMap<String, String>) -> Result<Option<DataIdentities>> {
        let Some(text) = extra.get(IDENTITY_KEY) else {
            return Ok(None);
        };
        let bad =
            || DataError::Settings(format!("`{IDENTITY_KEY}` is not a data identity: {text}"));
        let v: Value = serde_json::from_str(text).map_err(|_| bad())?;
        let data = DataIdentity::from_json(&v["data"]).ok_or_else(bad)?;
        let val = match &v["val"] {
            Value::Null => None,
            val => Some(DataIdentity::from_json(val).ok_or_else(bad)?),
        };
        Ok(Some(DataIdentities { data, val }))
    }
}

/// The files of `dir` not hidden (no leading `.`), by name.
fn visible_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(DataError::io(dir))? {
        let path = entry.map_err(DataError::io(dir))?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if path.is_file() && !hidden {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A file's size and the hash of its content: whole up to [`WHOLE_FILE`], else its head,
/// its tail and [`SAMPLES`] blocks evenly spaced between them.
fn file_hash(path: &Path) -> Result<(u64, u64)> {
    let io = DataError::io(path);
    let mut file = File::open(path).map_err(DataError::io(path))?;
    let size = file.metadata().map_err(DataError::io(path))?.len();
    let mut h = Hasher::new();
    h.word(size);
    // Read a MiB at a time: whole files up to 16 MiB need no buffer of their size.
    let mut buf = vec![0u8; END as usize];
    let mut read = |at: u64, len: u64, h: &mut Hasher| -> std::io::Result<()> {
        file.seek(SeekFrom::Start(at))?;
        let mut left = len;
        while left > 0 {
            let part = &mut buf[..left.min(END) as usize];
            file.read_exact(part)?;
            h.bytes(part);
            left -= part.len() as u64;
        }
        Ok(())
    };
    let outcome = if size <= WHOLE_FILE {
        read(0, size, &mut h)
    } else {
        let between = size - 2 * END - SAMPLE;
        (|| {
            read(0, END, &mut h)?;
            for i in 0..SAMPLES {
                read(END + between * i / (SAMPLES - 1), SAMPLE, &mut h)?;
            }
            read(size - END, END, &mut h)
        })()
    };
    outcome.map_err(io)?;
    Ok((size, h.finish()))
}

/// A 64-bit hash over 8-byte words: each word is mixed in by steps that are one-to-one in
/// the state (xor, multiplication by an odd constant, xor-shift), so two inputs that
/// differ in one word always hash differently.
struct Hasher(u64);

impl Hasher {
    fn new() -> Hasher {
        Hasher(0x243F_6A88_85A3_08D3)
    }

    fn word(&mut self, w: u64) {
        let h = (self.0 ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }

    /// `bytes` and their count (so that trailing zeros are seen).
    fn bytes(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut le = [0u8; 8];
            le.copy_from_slice(w);
            self.word(u64::from_le_bytes(le));
        }
        let mut last = [0u8; 8];
        last[..words.remainder().len()].copy_from_slice(words.remainder());
        self.word(u64::from_le_bytes(last));
        self.word(bytes.len() as u64);
    }

    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^ (h >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn the_same_bytes_elsewhere_are_the_same_data_and_any_byte_changed_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        write(&a, &bytes);
        write(&b, &bytes);
        let one = DataIdentity::of(&a, 10).unwrap();
        let copy = DataIdentity::of(&b, 10).unwrap();
        assert!(copy.differences(&one).is_empty());
        assert_ne!(copy.path, one.path);
        for at in [0, 4_999, bytes.len() - 1] {
            let mut changed = bytes.clone();
            changed[at] ^= 1;
            write(&b, &changed);
            let diff = DataIdentity::of(&b, 10).unwrap().differences(&one);
            assert_eq!(diff.len(), 1, "byte {at}: {diff:?}");
            assert!(diff[0].starts_with("content hash"), "{diff:?}");
        }
        write(&b, &bytes[1..]);
        let diff = DataIdentity::of(&b, 9).unwrap().differences(&one);
        assert!(
            diff[0].contains("99999 bytes (the run's: 100000)"),
            "{diff:?}"
        );
        assert!(
            diff[2].contains("9 sequences read (the run read 10)"),
            "{diff:?}"
        );
        write(&b, &bytes);
        let diff = DataIdentity::of(&b, 11).unwrap().differences(&one);
        assert!(diff[0].contains("from the same bytes"), "{diff:?}");
    }

    #[test]
    fn a_large_file_is_hashed_by_its_samples_and_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.npy");
        let size = WHOLE_FILE + 12_345;
        let mut bytes = vec![7u8; size as usize];
        write(&path, &bytes);
        let before = DataIdentity::of(&path, 1).unwrap();
        // The head, the tail and the first sample after the head are read.
        for at in [0, size - 1, END] {
            bytes[at as usize] ^= 1;
            write(&path, &bytes);
            assert_ne!(
                DataIdentity::of(&path, 1).unwrap().hash,
                before.hash,
                "{at}"
            );
            bytes[at as usize] ^= 1;
        }
        // Between two samples nothing is read: documented as what the hash cannot see.
        bytes[(END + SAMPLE + 100) as usize] ^= 1;
        write(&path, &bytes);
        assert_eq!(DataIdentity::of(&path, 1).unwrap().hash, before.hash);
    }

    #[test]
    fn a_dl4j_directory_is_its_features_and_labels_without_hidden_files() {
        let dir = tempfile::tempdir().unwrap();
        for part in DIR_PARTS {
            std::fs::create_dir(dir.path().join(part)).unwrap();
            write(&dir.path().join(part).join("0.csv"), b"1,2\n");
        }
        let before = DataIdentity::of(dir.path(), 1).unwrap();
        assert_eq!((before.files, before.bytes), (2, 8));
        write(&dir.path().join("features").join(".DS_Store"), b"x");
        write(&dir.path().join("notes.txt"), b"x");
        assert_eq!(DataIdentity::of(dir.path(), 1).unwrap(), before);
        write(&dir.path().join("labels").join("0.csv"), b"1,3\n");
        let diff = DataIdentity::of(dir.path(), 1)
            .unwrap()
            .differences(&before);
        assert_eq!(diff.len(), 1, "{diff:?}");
        write(&dir.path().join("labels").join("1.csv"), b"1,3\n");
        let diff = DataIdentity::of(dir.path(), 1)
            .unwrap()
            .differences(&before);
        assert!(diff[0].contains("3 files (the run's: 2)"), "{diff:?}");
    }

    #[test]
    fn identities_come_back_from_a_checkpoints_extra_and_old_ones_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.tsv");
        write(&path, b"a\tbc\n");
        let ids = DataIdentities {
            data: DataIdentity::of(&path, 1).unwrap(),
            val: Some(DataIdentity {
                hash: u64::MAX,
                ..DataIdentity::of(&path, 1).unwrap()
            }),
        };
        let mut extra = HashMap::new();
        assert_eq!(DataIdentities::load(&extra).unwrap(), None);
        ids.store(&mut extra);
        assert_eq!(DataIdentities::load(&extra).unwrap(), Some(ids.clone()));
        let no_val = DataIdentities { val: None, ..ids };
        no_val.store(&mut extra);
        assert_eq!(DataIdentities::load(&extra).unwrap(), Some(no_val));
        extra.insert(IDENTITY_KEY.into(), r#"{"data": {"bytes": -1}}"#.into());
        assert!(DataIdentities::load(&extra).is_err());
    }

    #[test]
    fn a_missing_file_names_its_path() {
        let err = DataIdentity::of(Path::new("/nonexistent/x.csv"), 1).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x.csv"), "{err}");
    }
}
