//! Writing safetensors files tensor by tensor.
//!
//! The header (every tensor's name, dtype, shape and byte range, and the metadata) is
//! made from the tensors' shapes alone and written first; then each tensor's values go
//! out in the header's order through a small buffer. No copy of the tensors' bytes is
//! ever made whole, so writing a checkpoint holds no more memory than the tensors
//! themselves (a serialised copy of a 4 GB training state would be 4 GB more, twice:
//! the bytes of each tensor, then the file's). Files go through
//! [`crate::atomic_file::write_atomic_with`]: a crash leaves the old file or the new
//! one, never part of one.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use tensorfit_core::safetensors::{header_bytes, Dtype, TensorSpec};
use tensorfit_core::{Error, HostTensor, Result};

use crate::atomic_file::write_atomic_with;

/// Values converted to bytes at a time: 64 KiB.
const CHUNK_VALUES: usize = 16 << 10;

/// The header of a safetensors file holding `tensors` (F32, in this order, their data
/// back to back) with `metadata`, as [`tensorfit_core::safetensors::header_bytes`] writes
/// it (padded to 8 bytes, as the safetensors library writes it).
fn header(tensors: &[(&str, &HostTensor)], metadata: &HashMap<String, String>) -> Result<Vec<u8>> {
    let specs: Vec<TensorSpec> = tensors
        .iter()
        .map(|(name, t)| TensorSpec {
            name,
            dtype: Dtype::F32,
            shape: t.shape.dims(),
        })
        .collect();
    header_bytes(&specs, metadata).map_err(|e| Error::input(e.to_string()))
}

/// Writes a safetensors file of `tensors` (F32, stored in the order given) with
/// `metadata` to `out`: the header, then each tensor's values in pieces of
/// `CHUNK_VALUES`.
pub fn write_tensors(
    out: &mut dyn Write,
    tensors: &[(&str, &HostTensor)],
    metadata: &HashMap<String, String>,
) -> Result<()> {
    let head = header(tensors, metadata)?;
    let io = |e: std::io::Error| Error::input(format!("writing safetensors: {e}"));
    out.write_all(&head).map_err(io)?;
    let mut bytes = Vec::with_capacity(CHUNK_VALUES * 4);
    for (_, t) in tensors {
        for piece in t.data.chunks(CHUNK_VALUES) {
            bytes.clear();
            bytes.extend(piece.iter().flat_map(|v| v.to_le_bytes()));
            out.write_all(&bytes).map_err(io)?;
        }
    }
    Ok(())
}

/// [`write_tensors`] to the file `path`, atomically; errors name the file.
pub fn save_tensors(
    path: &Path,
    tensors: &[(&str, &HostTensor)],
    metadata: &HashMap<String, String>,
) -> Result<()> {
    // The header's errors (a name no file can hold) are the caller's, not the file's.
    header(tensors, metadata)?;
    let file_error = |message: String| Error::File {
        path: path.display().to_string(),
        message,
    };
    write_atomic_with(path, |f| {
        let mut out = std::io::BufWriter::new(f);
        write_tensors(&mut out, tensors, metadata).map_err(|e| file_error(e.to_string()))?;
        out.flush().map_err(|e| file_error(e.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::ParamStore;

    #[test]
    fn a_streamed_file_reads_back_as_the_tensors_and_metadata_written() {
        let a = HostTensor::new([2, 3], (0..6).map(|i| i as f32 - 2.5).collect()).unwrap();
        // Larger than one piece, so the values go out in several.
        let b = HostTensor::new(
            [CHUNK_VALUES + 5],
            (0..CHUNK_VALUES + 5).map(|i| i as f32).collect(),
        )
        .unwrap();
        let empty = HostTensor::zeros([0, 4]);
        let meta = HashMap::from([("step".to_string(), "7".to_string())]);
        let mut bytes = Vec::new();
        let tensors = [("a", &a), ("b.weight", &b), ("c", &empty)];
        write_tensors(&mut bytes, &tensors, &meta).unwrap();
        let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        assert_eq!(header_len % 8, 0);
        let (store, got_meta) = ParamStore::from_safetensors(&bytes, "").unwrap();
        assert_eq!(got_meta, meta);
        assert_eq!(store.get("a"), Some(&a));
        assert_eq!(store.get("b.weight"), Some(&b));
        assert_eq!(store.get("c"), Some(&empty));
        let e = write_tensors(&mut Vec::new(), &[("a", &a), ("a", &a)], &meta)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`a`"), "{e}");
    }
}
