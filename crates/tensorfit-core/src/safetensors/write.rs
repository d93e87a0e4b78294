//! Writing safetensors headers (and whole files of small tensors) as the `safetensors`
//! crate writes them: the 8-byte little-endian length, then the JSON padded with spaces
//! to a multiple of 8 bytes, so that the data section starts 8-aligned.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::{Dtype, SafetensorsError, MAX_HEADER_BYTES};

/// One tensor of a file to write: its name, dtype and shape. Its data comes after the
/// previous tensor's, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec<'a> {
    pub name: &'a str,
    pub dtype: Dtype,
    pub shape: &'a [usize],
}

impl TensorSpec<'_> {
    /// Bytes of the tensor's data, or why it has no byte count.
    pub fn byte_len(&self) -> Result<u64, SafetensorsError> {
        let overflow = || SafetensorsError::Overflow {
            tensor: self.name.to_string(),
        };
        let numel = self
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .ok_or_else(overflow)?;
        if numel.checked_mul(self.dtype.bits()).is_none() {
            return Err(overflow());
        }
        self.dtype
            .bytes_of(numel)
            .ok_or_else(|| SafetensorsError::ByteCount {
                tensor: self.name.to_string(),
                dtype: self.dtype,
                shape: self.shape.to_vec(),
                needed: None,
                found: 0,
            })
    }
}

/// The header (length and padded JSON) of a file holding `tensors`, their data back to
/// back in the order given, with `metadata` (left out when empty). Keys are written in
/// sorted order, so the same tensors give the same bytes.
pub fn header_bytes<K: AsRef<str>, V: AsRef<str>>(
    tensors: &[TensorSpec],
    metadata: impl IntoIterator<Item = (K, V)>,
) -> Result<Vec<u8>, SafetensorsError> {
    let mut entries = Map::new();
    let metadata: BTreeMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| (k.as_ref().to_string(), v.as_ref().to_string()))
        .collect();
    if !metadata.is_empty() {
        entries.insert("__metadata__".into(), json!(metadata));
    }
    let mut offset = 0u64;
    for t in tensors {
        if t.name.is_empty() || t.name == "__metadata__" || entries.contains_key(t.name) {
            return Err(SafetensorsError::Name(t.name.to_string()));
        }
        let end = offset
            .checked_add(t.byte_len()?)
            .ok_or(SafetensorsError::TooLarge)?;
        entries.insert(
            t.name.to_string(),
            json!({"dtype": t.dtype.name(), "shape": t.shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    // Serialising a map of strings, numbers and arrays cannot fail.
    let mut json = serde_json::to_vec(&Value::Object(entries))
        .map_err(|e| SafetensorsError::Json(e.to_string()))?;
    json.resize(json.len().next_multiple_of(8), b' ');
    let length = json.len() as u64;
    if length > MAX_HEADER_BYTES {
        return Err(SafetensorsError::HeaderLength { length });
    }
    let mut out = Vec::with_capacity(8 + json.len());
    out.extend(length.to_le_bytes());
    out.extend(json);
    Ok(out)
}

/// A whole file of `tensors`, each with its little-endian bytes, and `metadata`: for
/// small files (everything is in memory twice); large ones stream the header from
/// [`header_bytes`], then each tensor's data.
pub fn serialize<K: AsRef<str>, V: AsRef<str>>(
    tensors: &[(TensorSpec, &[u8])],
    metadata: impl IntoIterator<Item = (K, V)>,
) -> Result<Vec<u8>, SafetensorsError> {
    let specs: Vec<TensorSpec> = tensors.iter().map(|(spec, _)| *spec).collect();
    let mut out = header_bytes(&specs, metadata)?;
    for (spec, data) in tensors {
        let needed = spec.byte_len()?;
        if data.len() as u64 != needed {
            return Err(SafetensorsError::DataLength {
                tensor: spec.name.to_string(),
                needed,
                found: data.len() as u64,
            });
        }
        out.extend_from_slice(data);
    }
    Ok(out)
}
