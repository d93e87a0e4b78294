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

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use tensorfit_core::safetensors::{read_header, Dtype, Header, TensorInfo};
use tensorfit_core::{Error, Result};

/// An open safetensors file whose header has been read and checked
/// ([`tensorfit_core::safetensors::read_header`]).
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    reader: BufReader<File>,
    /// The length prefix and header bytes, as read.
    head: Vec<u8>,
    header: Header,
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
        let (header, json) = read_header(&mut reader, file_len).map_err(|e| e.in_file(path))?;
        let mut head = (json.len() as u64).to_le_bytes().to_vec();
        head.extend(json);
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            reader,
            head,
            header,
            position: 0,
        })
    }

    /// The tensor `name` as the header describes it.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensor(name)
    }

    /// The whole file's bytes (header and data), read up to the length the header
    /// implies and no further.
    pub fn into_bytes(mut self) -> Result<Vec<u8>> {
        let data_len = self.header.data_len();
        let total = self.head.len() as u64 + data_len;
        let data_bytes = usize::try_from(data_len)
            .map_err(|_| file_error(&self.path, format!("{total} bytes do not fit in memory")))?;
        let mut bytes = std::mem::take(&mut self.head);
        bytes.try_reserve_exact(data_bytes).map_err(|_| {
            file_error(
                &self.path,
                format!("{total} bytes do not fit in this process's memory"),
            )
        })?;
        let read = (&mut self.reader)
            .take(data_len)
            .read_to_end(&mut bytes)
            .map_err(|e| file_error(&self.path, e.to_string()))?;
        if read as u64 != data_len {
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
        let size: usize = match entry.dtype {
            Dtype::F32 => 4,
            Dtype::F64 => 8,
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
            self.reader.read_exact(&mut bytes).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "not a valid safetensors file (it ends inside tensor data)".to_string()
                } else {
                    e.to_string()
                };
                file_error(&self.path, why)
            })?;
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
    fn overlapping_tensors_and_holes_are_refused_as_python_refuses_them() {
        // The file as long as the header says: only the offsets are wrong.
        for (name, offsets, data) in [("overlap", "[4,8]", 8), ("hole", "[12,16]", 16)] {
            let header = format!(
                r#"{{"a":{{"dtype":"F32","shape":[2],"data_offsets":[0,8]}},"b":{{"dtype":"F32","shape":[1],"data_offsets":{offsets}}}}}"#
            );
            let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
            bytes.extend(header.as_bytes());
            bytes.extend(vec![0u8; data]);
            let p = scratch(&format!("{name}.safetensors"));
            std::fs::write(&p, &bytes).unwrap();
            let e = SafetensorsFile::open(&p).unwrap_err().to_string();
            assert!(e.contains("invalid offset for tensor `b`"), "{name}: {e}");
        }
    }

    #[test]
    fn a_tensor_named_twice_is_refused_not_one_of_them_kept() {
        // The same entry twice: a JSON map would keep one and find nothing wrong.
        let a = r#""a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#;
        let bytes = tensorfit_testing::files::safetensors(&format!("{{{a},{a}}}"), &[0; 8]);
        let p = scratch("twice.safetensors");
        std::fs::write(&p, &bytes).unwrap();
        let e = SafetensorsFile::open(&p).unwrap_err().to_string();
        assert!(e.contains("the header names `a` twice"), "{e}");
        let e = ParamStore::from_safetensors(&bytes, "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("the header names `a` twice"), "{e}");
        let spec = crate::layers::ParamSpec::trainable(
            "a".into(),
            [2],
            crate::layers::Init::Constant(0.0),
        );
        let e = crate::pytorch_import::import_state_dict(&[spec], &p)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "twice.safetensors: not a valid safetensors file (the header names `a` twice)"
            ),
            "{e}"
        );
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
