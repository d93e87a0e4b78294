//! The arrays of a tensor file, located without reading their data: a safetensors
//! header, an `.npy` header, or the `.npy` members of an `.npz` (a zip). Each array is
//! its dtype, shape and where its bytes are: a byte offset in the file (read by seeking,
//! so a file larger than memory streams), or, for a member np.savez_compressed deflated,
//! the inflated bytes in memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tensorfit_core::{half_float, safetensors};

use crate::error::{DataError, Place, Result};
use crate::format::Format;

/// Element types read from tensor files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F16,
    BF16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
}

/// The element types read, for messages.
const READ: &str = "float16, bfloat16, float32, float64, int8 to int64 and uint8 to uint64";

impl DType {
    pub fn size_bytes(self) -> usize {
        match self {
            DType::I8 | DType::U8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    fn from_safetensors(dtype: safetensors::Dtype) -> Option<DType> {
        use safetensors::Dtype as S;
        Some(match dtype {
            S::F16 => DType::F16,
            S::BF16 => DType::BF16,
            S::F32 => DType::F32,
            S::F64 => DType::F64,
            S::I8 => DType::I8,
            S::I16 => DType::I16,
            S::I32 => DType::I32,
            S::I64 => DType::I64,
            S::U8 => DType::U8,
            S::U16 => DType::U16,
            S::U32 => DType::U32,
            S::U64 => DType::U64,
            S::Bool
            | S::F4
            | S::F6E2M3
            | S::F6E3M2
            | S::F8E5M2
            | S::F8E4M3
            | S::F8E8M0
            | S::F8E4M3Fnuz
            | S::F8E5M2Fnuz
            | S::C64 => return None,
        })
    }

    /// A numpy `descr` (`<f4`, `|u1`, ...), or why it is not read.
    fn from_numpy(descr: &str) -> std::result::Result<DType, String> {
        // A header read lossily may start with a character of several bytes.
        let (order, code) = descr.split_at_checked(1).unwrap_or(("", descr));
        let dtype = match code {
            "f2" => Some(DType::F16),
            "f4" => Some(DType::F32),
            "f8" => Some(DType::F64),
            "i1" => Some(DType::I8),
            "i2" => Some(DType::I16),
            "i4" => Some(DType::I32),
            "i8" => Some(DType::I64),
            "u1" => Some(DType::U8),
            "u2" => Some(DType::U16),
            "u4" => Some(DType::U32),
            "u8" => Some(DType::U64),
            _ => None,
        };
        match (order, dtype) {
            ("<" | "|", Some(dtype)) => Ok(dtype),
            (">", Some(_)) => Err(format!("dtype `{descr}` is big-endian, which is not read; save little-endian numbers (.astype('<{code}'))")),
            _ => {
                let what = match code.trim_start_matches(char::is_numeric) {
                    c if c.starts_with('b') => "bool",
                    c if c.starts_with('O') => "Python objects",
                    c if c.starts_with('c') => "complex numbers",
                    c if c.starts_with('U') || c.starts_with('S') => "strings",
                    c if c.starts_with('M') || c.starts_with('m') => "dates or times",
                    c if c.starts_with('V') || descr.starts_with('[') => "records (a structured array)",
                    _ => "not a number type",
                };
                Err(format!("dtype `{descr}` ({what}) is not read; arrays of float16, float32, float64, int8 to int64 and uint8 to uint64 are (little-endian): convert with .astype(np.float32), or .astype(np.int64) for ids"))
            }
        }
    }

    /// Element `i` of little-endian `bytes` as f64 (exact for every integer dtype up to
    /// 2^53 and for every float dtype).
    pub fn get(self, bytes: &[u8], i: usize) -> f64 {
        let n = self.size_bytes();
        let b = &bytes[i * n..(i + 1) * n];
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(b);
        match self {
            DType::F16 => f64::from(half_float::f16_to_f32([b[0], b[1]])),
            DType::BF16 => f64::from(half_float::bf16_to_f32([b[0], b[1]])),
            DType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::F64 => f64::from_le_bytes(w),
            DType::I8 => b[0] as i8 as f64,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f64,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::I64 => i64::from_le_bytes(w) as f64,
            DType::U8 => b[0] as f64,
            DType::U16 => u16::from_le_bytes([b[0], b[1]]) as f64,
            DType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
            DType::U64 => u64::from_le_bytes(w) as f64,
        }
    }

    /// Element `i` of little-endian `bytes` as written in the file, for messages: an
    /// integer exactly (2^64 - 1 as 18446744073709551615), a float as its own type prints
    /// it (an f32 0.1 as 0.1).
    pub fn show(self, bytes: &[u8], i: usize) -> String {
        let n = self.size_bytes();
        let mut w = [0u8; 8];
        w[..n].copy_from_slice(&bytes[i * n..(i + 1) * n]);
        match self {
            DType::I64 => i64::from_le_bytes(w).to_string(),
            DType::U64 => u64::from_le_bytes(w).to_string(),
            DType::F64 => f64::from_le_bytes(w).to_string(),
            // Every other type is exact as an f32 or an integer below 2^53.
            d if d.is_float() => (d.get(bytes, i) as f32).to_string(),
            d => d.get(bytes, i).to_string(),
        }
    }
}

/// Where an array's bytes are.
#[derive(Debug, Clone)]
pub enum Storage {
    /// At this byte offset of the file.
    File { offset: u64 },
    /// Inflated into memory (a compressed `.npz` member), from this byte offset.
    Memory { bytes: Arc<Vec<u8>>, offset: usize },
}

/// One array of a tensor file.
#[derive(Debug, Clone)]
pub struct Array {
    pub file: PathBuf,
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub storage: Storage,
}

impl Array {
    pub(crate) fn in_file(
        path: &Path,
        name: &str,
        dtype: DType,
        shape: Vec<usize>,
        offset: u64,
    ) -> Array {
        Array {
            file: path.to_path_buf(),
            name: name.to_string(),
            dtype,
            shape,
            storage: Storage::File { offset },
        }
    }

    /// Reads elements `start..start + count` into `buf` (as little-endian bytes).
    pub fn read(
        &self,
        file: &mut File,
        start: usize,
        count: usize,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        let size = self.dtype.size_bytes();
        buf.resize(count * size, 0);
        match &self.storage {
            Storage::File { offset } => {
                let at = offset + (start * size) as u64;
                file.seek(SeekFrom::Start(at))
                    .map_err(DataError::io(&self.file))?;
                file.read_exact(buf).map_err(DataError::io(&self.file))
            }
            Storage::Memory { bytes, offset } => {
                let from = offset + start * size;
                buf.copy_from_slice(&bytes[from..from + count * size]);
                Ok(())
            }
        }
    }

    /// The file offset of element `i` (for error messages; 0 in memory).
    pub fn byte_of(&self, i: usize) -> u64 {
        match self.storage {
            Storage::File { offset } => offset + (i * self.dtype.size_bytes()) as u64,
            Storage::Memory { .. } => 0,
        }
    }
}

/// The arrays of `path` by name: a safetensors file, an `.npy` (one array, named by the
/// file's stem) or an `.npz` (arrays named by their members, `.npy` removed), as
/// [`format_of`](crate::format_of) tells them apart.
pub fn arrays(path: &Path) -> Result<BTreeMap<String, Array>> {
    let format = crate::format::format_of(path)?;
    let mut file = File::open(path).map_err(DataError::io(path))?;
    let len = file.metadata().map_err(DataError::io(path))?.len();
    if len == 0 {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            what: "no bytes",
        });
    }
    match format {
        Format::Npy => {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_string();
            let (dtype, shape, offset) = npy_header(path, &mut file, 0, len, &name)?;
            let array = Array::in_file(path, &name, dtype, shape, offset);
            Ok(BTreeMap::from([(name, array)]))
        }
        Format::Npz => crate::zip::npz_arrays(path, &mut file, len),
        _ => safetensors_arrays(path, &mut file, len),
    }
}

/// The arrays of a safetensors file, its header checked by
/// [`tensorfit_core::safetensors`] (what Python's `safetensors` refuses is refused, and a
/// name given twice): the tensors' byte ranges one after another from 0 with no overlap
/// and no hole, each the size of its shape, and the data section ending where the file
/// ends.
fn safetensors_arrays(path: &Path, file: &mut File, len: u64) -> Result<BTreeMap<String, Array>> {
    let bad = |m: String| {
        DataError::format(
            Place::file(path),
            format!("not a valid safetensors file ({m})"),
        )
    };
    let (header, json) = safetensors::read_header(file, Some(len)).map_err(|e| match e {
        safetensors::SafetensorsError::Io(e) => DataError::io(path)(e),
        e => bad(e.to_string()),
    })?;
    let data_start = 8 + json.len() as u64;
    let mut out = BTreeMap::new();
    for (name, info) in header.tensors() {
        let dtype = DType::from_safetensors(info.dtype).ok_or_else(|| {
            bad(format!(
                "tensor `{name}` has dtype {}, which is not read; tensors of {READ} are",
                info.dtype
            ))
        })?;
        let offset = data_start + info.begin;
        let array = Array::in_file(path, name, dtype, info.shape.clone(), offset);
        out.insert(name.to_string(), array);
    }
    Ok(out)
}

/// The dtype, shape and data offset of the `.npy` array whose header starts at `start`
/// in `file` (the file `path`; the array's bytes end at `end`).
pub(crate) fn npy_header(
    path: &Path,
    file: &mut (impl Read + Seek),
    start: u64,
    end: u64,
    name: &str,
) -> Result<(DType, Vec<usize>, u64)> {
    let bad = |m: &str| {
        DataError::format(
            Place::byte(path, start),
            format!("`{name}` is not a valid .npy array ({m})"),
        )
    };
    file.seek(SeekFrom::Start(start))
        .map_err(DataError::io(path))?;
    let mut magic = [0u8; 10];
    file.read_exact(&mut magic)
        .map_err(|_| bad("shorter than its magic string"))?;
    if &magic[..6] != b"\x93NUMPY" {
        return Err(bad("no \\x93NUMPY magic string"));
    }
    let (header_len, fixed) = if magic[6] == 1 {
        (u16::from_le_bytes([magic[8], magic[9]]) as usize, 10)
    } else {
        let mut two = [0u8; 2];
        file.read_exact(&mut two).map_err(DataError::io(path))?;
        (
            u32::from_le_bytes([magic[8], magic[9], two[0], two[1]]) as usize,
            12,
        )
    };
    if start + (fixed + header_len) as u64 > end {
        return Err(bad("header longer than the array"));
    }
    let mut header = vec![0u8; header_len];
    file.read_exact(&mut header).map_err(DataError::io(path))?;
    let header = String::from_utf8_lossy(&header);
    let value = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}'"))? + key.len() + 2;
        let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
        let stop = if rest.starts_with('(') {
            rest.find(')')? + 1
        } else {
            rest.find([',', '}'])?
        };
        Some(rest[..stop].trim())
    };
    let descr = value("descr").unwrap_or("").trim_matches(['\'', '"']);
    let dtype = DType::from_numpy(descr).map_err(|why| bad(&why))?;
    if value("fortran_order") != Some("False") {
        return Err(bad(
            "Fortran order; save a C-ordered array (np.ascontiguousarray)",
        ));
    }
    let shape: Vec<usize> = value("shape")
        .ok_or_else(|| bad("no shape"))?
        .trim_matches(['(', ')'])
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad("unreadable shape"))?;
    let offset = start + (fixed + header_len) as u64;
    let bytes = shape.iter().product::<usize>() * dtype.size_bytes();
    if offset + bytes as u64 > end {
        return Err(bad(&format!(
            "truncated: shape {shape:?} needs {bytes} bytes"
        )));
    }
    Ok((dtype, shape, offset))
}

#[cfg(test)]
mod tests {
    use super::DType;

    #[test]
    fn a_numpy_descr_starting_with_a_wide_character_is_refused_not_a_panic() {
        // What `from_utf8_lossy` makes of a header whose first byte is not UTF-8.
        assert!(DType::from_numpy("\u{fffd}f4").is_err());
        assert!(DType::from_numpy("").is_err());
        assert_eq!(DType::from_numpy("<f4"), Ok(DType::F32));
    }
}
