//! Reading safetensors files without trusting them.
//!
//! A safetensors file is an 8-byte little-endian header length, a JSON header naming
//! every tensor with its dtype, shape and byte range, then the data. [`SafetensorsFile`]
//! reads the header first and checks it against the file (the header's size limit, the
//! length the header implies against the file's length), so every later read is bounded
//! by what the header says and the file holds: `/dev/zero`, a truncated file or a header
//! that claims terabytes fails at once with the reason, instead of reading until the
//! kernel kills the process. Tensors can then be read whole or a row at a time (so a
//! large input needs no second host copy).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use tensorfit_core::{Error, Result};

/// Largest header accepted (the safetensors format's own limit).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// One tensor as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// `F32`, `F16`, `I64`, ...
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Byte range in the data section (after the header).
    pub begin: u64,
    pub end: u64,
}

/// An open safetensors file whose header has been read and checked.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    reader: BufReader<File>,
    /// The length prefix and header bytes, as read.
    head: Vec<u8>,
    tensors: BTreeMap<String, TensorEntry>,
    /// Bytes of the data section, as the header implies.
    data_bytes: u64,
    /// Bytes of the data section read so far (reads go forward only, so pipes work).
    position: u64,
}

impl SafetensorsFile {
    /// Opens `path` and reads and checks its header.
    pub fn open(path: &Path) -> Result<SafetensorsFile> {
        let err = |m: String| file_error(path, m);
        let file = File::open(path).map_err(|e| err(e.to_string()))?;
        let meta = file.metadata().map_err(|e| err(e.to_string()))?;
        if meta.is_dir() {
            return Err(err("is a directory".into()));
        }
        // Regular files have a length to check against; pipes and devices are read only
        // as far as the header says.
        let file_len = meta.is_file().then_some(meta.len());
        let mut reader = BufReader::new(file);
        let mut prefix = [0u8; 8];
        read_exact(&mut reader, &mut prefix, path, "the header length")?;
        let n = u64::from_le_bytes(prefix);
        if !(2..=MAX_HEADER_BYTES).contains(&n) {
            return Err(err(format!(
                "not a valid safetensors file (header length {n}; a header is 2 to {MAX_HEADER_BYTES} bytes)"
            )));
        }
        if let Some(len) = file_len.filter(|&len| 8 + n > len) {
            return Err(err(format!(
                "not a valid safetensors file (its header claims {n} bytes, the file has {len} in all)"
            )));
        }
        let mut head = prefix.to_vec();
        head.resize(8 + n as usize, 0);
        read_exact(&mut reader, &mut head[8..], path, "the header")?;
        let (tensors, data_bytes) = parse_header(&head[8..])
            .map_err(|m| err(format!("not a valid safetensors file ({m})")))?;
        let total = (8 + n).checked_add(data_bytes).ok_or_else(|| {
            err("not a valid safetensors file (its header describes more bytes than any file holds)".into())
        })?;
        if let Some(len) = file_len.filter(|&len| len != total) {
            return Err(err(format!(
                "not a valid safetensors file (its header describes {total} bytes, the file has {len}: truncated or padded)"
            )));
        }
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            reader,
            head,
            tensors,
            data_bytes,
            position: 0,
        })
    }

    /// The tensor `name` as the header describes it.
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors.get(name)
    }

    /// The whole file's bytes (header and data), read up to the length the header
    /// implies and no further.
    pub fn into_bytes(mut self) -> Result<Vec<u8>> {
        let total = self.head.len() as u64 + self.data_bytes;
        let data_bytes = usize::try_from(self.data_bytes)
            .map_err(|_| file_error(&self.path, format!("{total} bytes do not fit in memory")))?;
        let mut bytes = std::mem::take(&mut self.head);
        bytes.try_reserve_exact(data_bytes).map_err(|_| {
            file_error(
                &self.path,
                format!("{total} bytes do not fit in this process's memory"),
            )
        })?;
        let read = (&mut self.reader)
            .take(self.data_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| file_error(&self.path, e.to_string()))?;
        if read as u64 != self.data_bytes {
            return Err(file_error(
                &self.path,
                format!(
                    "truncated: the header describes {total} bytes, the file ended after {}",
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    /// Reads the F32 or F64 tensor `name` as f32 in rows of `row` values, calling
    /// `each(index, values)` for every row in order. Only one row is held at a time. An
    /// F64 value beyond f32's range is refused, naming its element.
    pub fn read_f32_rows(
        &mut self,
        name: &str,
        row: usize,
        mut each: impl FnMut(usize, &[f32]) -> Result<()>,
    ) -> Result<()> {
        let entry = self
            .tensor(name)
            .cloned()
            .ok_or_else(|| file_error(&self.path, format!("has no tensor `{name}`")))?;
        let size: usize = match entry.dtype.as_str() {
            "F32" => 4,
            "F64" => 8,
            other => {
                return Err(file_error(
                    &self.path,
                    format!("tensor `{name}` has dtype {other}; tensorfit reads F32 or F64"),
                ))
            }
        };
        let row_bytes = (row * size) as u64;
        let len = entry.end - entry.begin;
        if row == 0 || len % row_bytes != 0 || entry.begin < self.position {
            return Err(file_error(
                &self.path,
                format!("tensor `{name}` cannot be read in rows of {row} values"),
            ));
        }
        self.skip(entry.begin - self.position)?;
        let mut bytes = vec![0u8; row_bytes as usize];
        let mut values = vec![0f32; row];
        for index in 0..(len / row_bytes) as usize {
            read_exact(&mut self.reader, &mut bytes, &self.path, "tensor data")?;
            self.position += row_bytes;
            for (k, (v, b)) in values.iter_mut().zip(bytes.chunks_exact(size)).enumerate() {
                let mut w = [0u8; 8];
                w[..size].copy_from_slice(b);
                *v = if size == 4 {
                    f32::from_le_bytes([w[0], w[1], w[2], w[3]])
                } else {
                    let wide = f64::from_le_bytes(w);
                    if wide.is_finite() && !(wide as f32).is_finite() {
                        return Err(file_error(
                            &self.path,
                            format!(
                                "tensor `{name}` holds {wide:e} at element {}, beyond f32's range",
                                index * row + k
                            ),
                        ));
                    }
                    wide as f32
                };
            }
            each(index, &values)?;
        }
        Ok(())
    }

    fn skip(&mut self, bytes: u64) -> Result<()> {
        let skipped = std::io::copy(&mut (&mut self.reader).take(bytes), &mut std::io::sink())
            .map_err(|e| file_error(&self.path, e.to_string()))?;
        self.position += skipped;
        if skipped != bytes {
            return Err(file_error(&self.path, "truncated: tensor data ends early"));
        }
        Ok(())
    }
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

fn read_exact(r: &mut impl Read, buf: &mut [u8], path: &Path, what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format!("not a valid safetensors file (it ends inside {what})")
        } else {
            e.to_string()
        };
        file_error(path, why)
    })
}

/// Bytes per element of a safetensors dtype.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}

/// The tensors of a header and the length of the data section; each tensor's byte range
/// must match its shape and dtype and lie inside the data.
fn parse_header(text: &[u8]) -> std::result::Result<(BTreeMap<String, TensorEntry>, u64), String> {
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(text).map_err(|e| format!("header: {e}"))?;
    let mut tensors = BTreeMap::new();
    let mut data_bytes = 0u64;
    for (name, t) in v {
        if name == "__metadata__" {
            continue;
        }
        let dtype = t
            .get("dtype")
            .and_then(|d| d.as_str())
            .ok_or_else(|| format!("tensor `{name}` has no dtype"))?
            .to_string();
        let shape: Vec<usize> = t
            .get("shape")
            .and_then(|s| s.as_array())
            .and_then(|dims| {
                dims.iter()
                    .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                    .collect()
            })
            .ok_or_else(|| format!("tensor `{name}` has no valid shape"))?;
        let offsets: Vec<u64> = t
            .get("data_offsets")
            .and_then(|o| o.as_array())
            .and_then(|o| o.iter().map(|x| x.as_u64()).collect())
            .filter(|o: &Vec<u64>| o.len() == 2 && o[0] <= o[1])
            .ok_or_else(|| format!("tensor `{name}` has no valid data_offsets"))?;
        let size = dtype_bytes(&dtype)
            .ok_or_else(|| format!("tensor `{name}` has unknown dtype {dtype}"))?;
        let want = shape
            .iter()
            .try_fold(size, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| format!("tensor `{name}` is larger than any file"))?;
        if offsets[1] - offsets[0] != want {
            return Err(format!(
                "tensor `{name}` of shape {shape:?} {dtype} needs {want} bytes, its offsets give {}",
                offsets[1] - offsets[0]
            ));
        }
        data_bytes = data_bytes.max(offsets[1]);
        tensors.insert(
            name,
            TensorEntry {
                dtype,
                shape,
                begin: offsets[0],
                end: offsets[1],
            },
        );
    }
    Ok((tensors, data_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamStore;
    use tensorfit_core::HostTensor;

    fn scratch(name: &str) -> PathBuf {
        tensorfit_testing::scratch_dir("safetensors").join(name)
    }

    #[test]
    fn endless_and_lying_files_fail_at_once() {
        let e = SafetensorsFile::open(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("header length 0"), "{e}");
        // A header that claims more data than the file has.
        let mut store = ParamStore::new();
        store.insert("x", HostTensor::zeros([4, 3]));
        let bytes = store.to_safetensors("", Default::default()).unwrap();
        let cut = scratch("cut.safetensors");
        std::fs::write(&cut, &bytes[..bytes.len() - 4]).unwrap();
        let e = SafetensorsFile::open(&cut).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let mut huge = (u64::MAX / 2).to_le_bytes().to_vec();
        huge.extend(b"{}");
        let p = scratch("huge.safetensors");
        std::fs::write(&p, &huge).unwrap();
        assert!(SafetensorsFile::open(&p).is_err());
    }

    #[test]
    fn rows_and_whole_files_read_back_what_was_written() {
        let mut store = ParamStore::new();
        let data: Vec<f32> = (0..24).map(|i| i as f32).collect();
        store.insert("a", HostTensor::zeros([2]));
        store.insert("input", HostTensor::new([2, 3, 4], data.clone()).unwrap());
        let bytes = store.to_safetensors("", Default::default()).unwrap();
        let p = scratch("rows.safetensors");
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(
            SafetensorsFile::open(&p).unwrap().into_bytes().unwrap(),
            bytes
        );
        let mut f = SafetensorsFile::open(&p).unwrap();
        assert_eq!(f.tensor("input").unwrap().shape, [2, 3, 4]);
        let mut got = Vec::new();
        f.read_f32_rows("input", 12, |i, row| {
            assert_eq!(i, got.len() / 12);
            got.extend_from_slice(row);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, data);
    }
}
