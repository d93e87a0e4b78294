//! A header read and checked: every tensor's dtype, shape and byte range, and the
//! metadata.
//!
//! The checks are the `safetensors` crate's (what Python's `safetensors` refuses is
//! refused) and a few more: a tensor or metadata key named twice is refused (JSON maps
//! keep one of the two silently), so is a field given twice in a tensor's entry; every
//! count is checked for overflow; each error names the tensor.

use std::collections::BTreeMap;

use super::json::{repeated_key, Json};
use super::{Dtype, SafetensorsError};

/// One tensor as the header describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Byte range in the data section (which starts after the header).
    pub begin: u64,
    pub end: u64,
}

impl TensorInfo {
    /// Bytes of the tensor's data.
    pub fn byte_len(&self) -> u64 {
        self.end - self.begin
    }

    /// Elements of the tensor (1 for a scalar, shape `[]`).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A checked header: the tensors in the order of their bytes, and the metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    tensors: Vec<(String, TensorInfo)>,
    /// Each tensor's place in `tensors`, by name.
    index: BTreeMap<String, usize>,
    metadata: BTreeMap<String, String>,
    /// Bytes of the data section: where the last tensor ends.
    data_len: u64,
}

impl Header {
    /// Parses and checks the header's JSON (the bytes after the 8-byte length, trailing
    /// spaces included).
    pub fn parse(json: &[u8]) -> Result<Header, SafetensorsError> {
        let text = std::str::from_utf8(json).map_err(|e| SafetensorsError::NotUtf8 {
            at: e.valid_up_to(),
        })?;
        let root: Json =
            serde_json::from_str(text).map_err(|e| SafetensorsError::Json(e.to_string()))?;
        let Json::Object(entries) = root else {
            return Err(SafetensorsError::NotAnObject { found: root.kind() });
        };
        if let Some(name) = repeated_key(&entries) {
            return Err(SafetensorsError::RepeatedTensor(name.to_string()));
        }
        let mut metadata = BTreeMap::new();
        let mut tensors = Vec::with_capacity(entries.len());
        for (name, value) in entries {
            if name == "__metadata__" {
                metadata = read_metadata(value)?;
            } else {
                let info = tensor_info(&name, value)?;
                tensors.push((name, info));
            }
        }
        // In the order of their bytes (a file may list them in any order); ties by name,
        // so that the same header always gives the same error.
        tensors.sort_by(|(n1, t1), (n2, t2)| (t1.begin, t1.end, n1).cmp(&(t2.begin, t2.end, n2)));
        let data_len = check_layout(&tensors)?;
        let index = tensors
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        Ok(Header {
            tensors,
            index,
            metadata,
            data_len,
        })
    }

    /// The tensor `name`, if the header has it.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i].1)
    }

    /// Every tensor with its name, in the order of their bytes.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &TensorInfo)> {
        self.tensors
            .iter()
            .map(|(name, info)| (name.as_str(), info))
    }

    /// How many tensors the header has.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The `__metadata__` strings (empty when the header has none).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Bytes of the data section: where the last tensor ends (0 with no tensor).
    pub fn data_len(&self) -> u64 {
        self.data_len
    }
}

/// The `__metadata__` entry: an object of strings (or null, which the `safetensors` crate
/// also reads as none).
fn read_metadata(value: Json) -> Result<BTreeMap<String, String>, SafetensorsError> {
    let entries = match value {
        Json::Null => return Ok(BTreeMap::new()),
        Json::Object(entries) => entries,
        other => {
            return Err(SafetensorsError::Metadata(format!(
                "is {}, not an object of strings",
                other.kind()
            )))
        }
    };
    if let Some(key) = repeated_key(&entries) {
        return Err(SafetensorsError::Metadata(format!("gives `{key}` twice")));
    }
    entries
        .into_iter()
        .map(|(key, value)| match value {
            Json::String(text) => Ok((key, text)),
            other => Err(SafetensorsError::Metadata(format!(
                "gives `{key}` {}, not a string",
                other.kind()
            ))),
        })
        .collect()
}

/// A tensor's entry, `{"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}`
/// (other fields are ignored, as the `safetensors` crate ignores them).
fn tensor_info(name: &str, value: Json) -> Result<TensorInfo, SafetensorsError> {
    let bad = |message: String| SafetensorsError::Tensor {
        tensor: name.to_string(),
        message,
    };
    let Json::Object(fields) = value else {
        return Err(bad(format!(
            "is {}, not an object of dtype, shape and data_offsets",
            value.kind()
        )));
    };
    if let Some(field) = repeated_key(&fields) {
        return Err(bad(format!("gives `{field}` twice")));
    }
    let field = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| bad(format!("has no `{key}`")))
    };
    let dtype = match field("dtype")? {
        Json::String(text) => {
            Dtype::from_name(text).ok_or_else(|| SafetensorsError::UnknownDtype {
                tensor: name.to_string(),
                dtype: text.clone(),
            })?
        }
        other => return Err(bad(format!("its dtype is {}, not a string", other.kind()))),
    };
    let counts = |key: &str| -> Result<Vec<u64>, SafetensorsError> {
        let not_counts = |found: &str| {
            bad(format!(
                "its {key} is {found}, not an array of whole numbers from 0"
            ))
        };
        match field(key)? {
            Json::Array(items) => items
                .iter()
                .map(|item| match item {
                    Json::Count(n) => Ok(*n),
                    other => Err(not_counts(&format!("an array holding {}", other.kind()))),
                })
                .collect(),
            other => Err(not_counts(other.kind())),
        }
    };
    let shape = counts("shape")?
        .into_iter()
        .map(|d| {
            usize::try_from(d).map_err(|_| SafetensorsError::Overflow {
                tensor: name.to_string(),
            })
        })
        .collect::<Result<Vec<usize>, _>>()?;
    let offsets = counts("data_offsets")?;
    let [begin, end] = offsets[..] else {
        return Err(bad(format!(
            "its data_offsets are {} numbers, not 2 (begin and end)",
            offsets.len()
        )));
    };
    Ok(TensorInfo {
        dtype,
        shape,
        begin,
        end,
    })
}

/// Checks that the tensors (in byte order) follow one another from byte 0 with no
/// overlap and no hole, each the size of its shape and dtype; returns where the last
/// ends.
fn check_layout(tensors: &[(String, TensorInfo)]) -> Result<u64, SafetensorsError> {
    let mut start = 0u64;
    for (name, info) in tensors {
        if info.begin != start || info.end < info.begin {
            return Err(SafetensorsError::InvalidOffset {
                tensor: name.clone(),
                begin: info.begin,
                end: info.end,
                expected: start,
            });
        }
        let numel = info
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
            .ok_or_else(|| SafetensorsError::Overflow {
                tensor: name.clone(),
            })?;
        if numel.checked_mul(info.dtype.bits()).is_none() || usize::try_from(numel).is_err() {
            return Err(SafetensorsError::Overflow {
                tensor: name.clone(),
            });
        }
        let needed = info.dtype.bytes_of(numel);
        if needed != Some(info.byte_len()) {
            return Err(SafetensorsError::ByteCount {
                tensor: name.clone(),
                dtype: info.dtype,
                shape: info.shape.clone(),
                needed,
                found: info.byte_len(),
            });
        }
        start = info.end;
    }
    Ok(start)
}
