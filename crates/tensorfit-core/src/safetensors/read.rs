//! Reading a safetensors file's header from a stream, and whole files held in memory.

use std::io::Read;

use super::{Dtype, Header, SafetensorsError, TensorInfo, MAX_HEADER_BYTES};

/// Reads the 8-byte length and the header from `reader` (at the file's start) and checks
/// them. `file_len` is the whole file's length where known (a regular file; not a pipe):
/// a header longer than the file is refused before it is read, and a file longer or
/// shorter than the header describes after. Returns the header and its JSON bytes as
/// read (for a caller that copies the file).
pub fn read_header(
    reader: &mut impl Read,
    file_len: Option<u64>,
) -> Result<(Header, Vec<u8>), SafetensorsError> {
    let mut prefix = [0u8; 8];
    read_exact(reader, &mut prefix, "the header length")?;
    let length = u64::from_le_bytes(prefix);
    if !(2..=MAX_HEADER_BYTES).contains(&length) {
        return Err(SafetensorsError::HeaderLength { length });
    }
    if let Some(file_len) = file_len.filter(|&len| 8 + length > len) {
        return Err(SafetensorsError::HeaderPastEnd { length, file_len });
    }
    // At most MAX_HEADER_BYTES (100 MB), checked above.
    let mut json = vec![0u8; length as usize];
    read_exact(reader, &mut json, "the header")?;
    let header = Header::parse(&json)?;
    let described = file_len_of(&header, length)?;
    if let Some(found) = file_len.filter(|&len| len != described) {
        return Err(SafetensorsError::FileLength { described, found });
    }
    Ok((header, json))
}

/// The length of a file of this header (`length` bytes of JSON) and its data.
fn file_len_of(header: &Header, length: u64) -> Result<u64, SafetensorsError> {
    (8 + length)
        .checked_add(header.data_len())
        .ok_or(SafetensorsError::TooLarge)
}

fn read_exact(
    reader: &mut impl Read,
    buf: &mut [u8],
    what: &'static str,
) -> Result<(), SafetensorsError> {
    reader.read_exact(buf).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => SafetensorsError::Truncated { what },
        _ => SafetensorsError::Io(e),
    })
}

/// A whole safetensors file in memory, checked: its header and its tensors' bytes.
#[derive(Debug)]
pub struct SafeTensors<'a> {
    header: Header,
    /// The data section.
    data: &'a [u8],
}

/// One tensor of a [`SafeTensors`]: dtype, shape and its bytes (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorBytes<'a> {
    pub dtype: Dtype,
    pub shape: &'a [usize],
    pub data: &'a [u8],
}

impl<'a> SafeTensors<'a> {
    /// Reads and checks the file `bytes` (its length must be the one its header
    /// describes).
    pub fn parse(bytes: &'a [u8]) -> Result<SafeTensors<'a>, SafetensorsError> {
        let (header, json) = read_header(&mut &bytes[..], Some(bytes.len() as u64))?;
        let data = &bytes[8 + json.len()..];
        Ok(SafeTensors { header, data })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The tensor `name`, if the file has it.
    pub fn tensor(&self, name: &str) -> Option<TensorBytes<'_>> {
        self.header.tensor(name).map(|info| self.bytes_of(info))
    }

    /// Every tensor with its name, in the order of their bytes.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, TensorBytes<'_>)> {
        self.header
            .tensors()
            .map(|(name, info)| (name, self.bytes_of(info)))
    }

    fn bytes_of<'s>(&'s self, info: &'s TensorInfo) -> TensorBytes<'s> {
        // In range: read_header checked that the data section ends where the last
        // tensor does, and the tensors' ranges follow one another up to it.
        TensorBytes {
            dtype: info.dtype,
            shape: &info.shape,
            data: &self.data[info.begin as usize..info.end as usize],
        }
    }
}
