//! The `.npy` members of an `.npz`, which is a zip: the end-of-central-directory record
//! (zip64 where numpy wrote it), then each member's central-directory entry and local
//! header, which give where its bytes start. Stored members (np.savez) are read in place;
//! deflated ones (np.savez_compressed) are inflated into memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::arrays::{npy_header, Array, Storage};
use crate::error::{DataError, Place, Result};

const EOCD: u64 = 0x0605_4b50;
const EOCD64_LOCATOR: u64 = 0x0706_4b50;
const CENTRAL: u64 = 0x0201_4b50;
const LOCAL: u64 = 0x0403_4b50;

fn u16_at(b: &[u8], i: usize) -> u64 {
    u16::from_le_bytes([b[i], b[i + 1]]) as u64
}

fn u32_at(b: &[u8], i: usize) -> u64 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as u64
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

fn read_at(path: &Path, file: &mut File, at: u64, n: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    file.seek(SeekFrom::Start(at))
        .map_err(DataError::io(path))?;
    file.read_exact(&mut buf).map_err(|_| {
        DataError::format(
            Place::byte(path, at),
            "not a valid .npz (zip) file: truncated",
        )
    })?;
    Ok(buf)
}

/// One member of a zip, as its central-directory entry gives it.
struct Member {
    name: String,
    /// Compression method (0 stored, 8 deflated).
    method: u64,
    packed: u64,
    size: u64,
    local_at: u64,
}

/// The members of the zip at `path` (`len` bytes), from its central directory.
fn members(path: &Path, file: &mut File, len: u64) -> Result<Vec<Member>> {
    let bad = |at: u64, m: &str| {
        DataError::format(
            Place::byte(path, at),
            format!("not a valid .npz (zip) file: {m}"),
        )
    };
    // The end record is 22 bytes plus a comment of up to 65535.
    let tail_len = len.min(22 + 65_535);
    let tail = read_at(path, file, len - tail_len, tail_len as usize)?;
    let eocd = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(&tail, i) == EOCD)
        .ok_or_else(|| bad(len, "no end-of-central-directory record"))?;
    let (mut count, mut dir_at) = (u16_at(&tail, eocd + 10), u32_at(&tail, eocd + 16));
    if (count == 0xFFFF || dir_at == 0xFFFF_FFFF)
        && eocd >= 20
        && u32_at(&tail, eocd - 20) == EOCD64_LOCATOR
    {
        let record_at = u64_at(&tail, eocd - 20 + 8);
        let record = read_at(path, file, record_at, 56)?;
        count = u64_at(&record, 32);
        dir_at = u64_at(&record, 48);
    }
    let mut out = Vec::new();
    let mut at = dir_at;
    for _ in 0..count {
        let entry = read_at(path, file, at, 46)?;
        if u32_at(&entry, 0) != CENTRAL {
            return Err(bad(at, "broken central directory"));
        }
        let method = u16_at(&entry, 10);
        let (mut packed, mut size, mut local_at) =
            (u32_at(&entry, 20), u32_at(&entry, 24), u32_at(&entry, 42));
        let (name_len, extra_len, comment_len) =
            (u16_at(&entry, 28), u16_at(&entry, 30), u16_at(&entry, 32));
        let rest = read_at(path, file, at + 46, (name_len + extra_len) as usize)?;
        let name = String::from_utf8_lossy(&rest[..name_len as usize]).to_string();
        // Zip64 extra field: the 64-bit values of the fields set to 0xFFFFFFFF, in order.
        let mut extra = &rest[name_len as usize..];
        while extra.len() >= 4 {
            let (tag, n) = (u16_at(extra, 0), u16_at(extra, 2) as usize);
            let body = &extra[4..(4 + n).min(extra.len())];
            if tag == 1 {
                let mut i = 0;
                for field in [&mut size, &mut packed, &mut local_at] {
                    if *field == 0xFFFF_FFFF && i + 8 <= body.len() {
                        *field = u64_at(body, i);
                        i += 8;
                    }
                }
            }
            extra = &extra[(4 + n).min(extra.len())..];
        }
        at += 46 + name_len + extra_len + comment_len;
        out.push(Member {
            name,
            method,
            packed,
            size,
            local_at,
        });
    }
    Ok(out)
}

/// The names of the members of the zip at `path` (`len` bytes), as its central directory
/// lists them.
pub(crate) fn member_names(path: &Path, file: &mut File, len: u64) -> Result<Vec<String>> {
    Ok(members(path, file, len)?
        .into_iter()
        .map(|m| m.name)
        .collect())
}

/// The arrays of the `.npz` at `path` (`len` bytes), named by member without `.npy`.
pub(crate) fn npz_arrays(
    path: &Path,
    file: &mut File,
    len: u64,
) -> Result<BTreeMap<String, Array>> {
    let mut arrays = BTreeMap::new();
    let members = members(path, file, len)?;
    if !members.is_empty() && !members.iter().any(|m| m.name.ends_with(".npy")) {
        let names: Vec<String> = members
            .iter()
            .take(3)
            .map(|m| format!("`{}`", m.name))
            .collect();
        return Err(DataError::format(
            Place::file(path),
            format!(
                "is a zip without .npy members (it has {}{}), not an .npz of arrays as np.savez writes one",
                names.join(", "),
                if members.len() > 3 { ", ..." } else { "" }
            ),
        ));
    }
    for member in members {
        let Some(name) = member.name.strip_suffix(".npy") else {
            continue;
        };
        let Member {
            method,
            packed,
            size,
            local_at,
            ..
        } = member;
        let local = read_at(path, file, local_at, 30)?;
        let bad = |m: String| {
            DataError::format(
                Place::byte(path, local_at),
                format!("not a valid .npz (zip) file: member `{}` {m}", member.name),
            )
        };
        if u32_at(&local, 0) != LOCAL {
            return Err(bad("has no local header".into()));
        }
        let data_at = local_at + 30 + u16_at(&local, 26) + u16_at(&local, 28);
        let array = match method {
            0 => {
                let (dtype, shape, offset) = npy_header(path, file, data_at, data_at + size, name)?;
                Array::in_file(path, name, dtype, shape, offset)
            }
            8 => inflated(path, file, data_at, packed, size, name)?,
            m => {
                return Err(bad(format!(
                    "uses compression method {m}; np.savez and np.savez_compressed write 0 and 8"
                )))
            }
        };
        if arrays.insert(name.to_string(), array).is_some() {
            return Err(bad("appears twice".into()));
        }
    }
    if arrays.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            what: "no .npy members",
        });
    }
    Ok(arrays)
}

/// A deflated member, inflated into memory and read as an `.npy`.
fn inflated(
    path: &Path,
    file: &mut File,
    at: u64,
    packed: u64,
    size: u64,
    name: &str,
) -> Result<Array> {
    file.seek(SeekFrom::Start(at))
        .map_err(DataError::io(path))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|_| {
        DataError::format(Place::byte(path, at), format!("member `{name}` inflates to {size} bytes, more than this process can hold; save it with np.savez (uncompressed) to stream it"))
    })?;
    let broken = |why: String| {
        DataError::format(
            Place::byte(path, at),
            format!("member `{name}` does not inflate: {why}"),
        )
    };
    inflate(&mut file.take(packed), &mut bytes, size as usize)
        .map_err(DataError::io(path))?
        .map_err(broken)?;
    let mut cursor = std::io::Cursor::new(&bytes);
    let (dtype, shape, offset) = npy_header(path, &mut cursor, 0, size, name)?;
    Ok(Array {
        file: path.to_path_buf(),
        name: name.to_string(),
        dtype,
        shape,
        storage: Storage::Memory {
            bytes: Arc::new(bytes),
            offset: offset as usize,
        },
    })
}

/// Inflates the raw deflate stream `packed` into `out` (empty), a piece of the file at a
/// time, `out` growing only as bytes come out (a small file claiming a huge size fails
/// when it ends, without that memory ever being touched). The outer error is the file's;
/// the inner one says why the stream is not a deflate stream of `size` bytes.
fn inflate(
    packed: &mut impl Read,
    out: &mut Vec<u8>,
    size: usize,
) -> std::io::Result<std::result::Result<(), String>> {
    use miniz_oxide::inflate::stream::{inflate, InflateState};
    use miniz_oxide::{DataFormat, MZError, MZFlush, MZStatus};

    let mut state = InflateState::new_boxed(DataFormat::Raw);
    let (mut piece, mut chunk) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = packed.read(&mut piece)?;
        let flush = if n == 0 {
            MZFlush::Finish
        } else {
            MZFlush::None
        };
        let mut input = &piece[..n];
        loop {
            let r = inflate(&mut state, input, &mut chunk, flush);
            input = &input[r.bytes_consumed..];
            if out.len() + r.bytes_written > size {
                return Ok(Err(format!(
                    "it does not end within the {size} bytes its entry says"
                )));
            }
            out.extend_from_slice(&chunk[..r.bytes_written]);
            let progress = r.bytes_consumed > 0 || r.bytes_written > 0;
            match r.status {
                Ok(MZStatus::StreamEnd) if out.len() == size => return Ok(Ok(())),
                Ok(MZStatus::StreamEnd) => {
                    return Ok(Err(format!(
                        "it holds {} bytes, its entry says {size}",
                        out.len()
                    )))
                }
                // More output may be waiting, or more input is needed.
                Ok(_) | Err(MZError::Buf) if r.bytes_written == chunk.len() => {}
                Ok(_) | Err(MZError::Buf) if input.is_empty() && n > 0 => break,
                Ok(_) | Err(MZError::Buf) if progress => {}
                // No progress and nothing more to read: the file ended before the stream.
                Ok(_) | Err(MZError::Buf) => {
                    return Ok(Err(format!(
                        "the stream ends after {} of {size} bytes",
                        out.len()
                    )))
                }
                Err(e) => return Ok(Err(format!("{e:?}"))),
            }
        }
    }
}

#[cfg(test)]
mod inflate_tests {
    use super::inflate;

    /// `data` deflated raw (no zlib header), as a zip member holds it.
    fn deflated(data: &[u8]) -> Vec<u8> {
        miniz_oxide::deflate::compress_to_vec(data, 6)
    }

    fn run(packed: &[u8], size: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        inflate(&mut &packed[..], &mut out, size)
            .unwrap()
            .map(|()| out)
    }

    #[test]
    fn a_member_inflates_to_its_bytes_across_pieces() {
        // Larger than one piece of input read at a time, and compressible.
        let data: Vec<u8> = (0..300_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 997) as u8)
            .collect();
        assert_eq!(run(&deflated(&data), data.len()).unwrap(), data);
        assert_eq!(run(&deflated(&[]), 0).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn a_member_of_another_size_or_cut_short_or_not_deflate_is_refused() {
        let data = vec![7u8; 10_000];
        let packed = deflated(&data);
        let more = run(&packed, 9_000).unwrap_err();
        assert!(
            more.contains("does not end within the 9000 bytes"),
            "{more}"
        );
        let fewer = run(&packed, 11_000).unwrap_err();
        assert!(fewer.contains("10000"), "{fewer}");
        let cut = run(&packed[..packed.len() / 2], 10_000).unwrap_err();
        assert!(cut.contains("ends after"), "{cut}");
        assert!(run(&[0xff; 64], 100).is_err());
        // A few bytes claiming 64 GiB: refused when the stream ends, nothing allocated.
        let huge = run(&packed, 1 << 36).unwrap_err();
        assert!(huge.contains("holds 10000 bytes"), "{huge}");
    }
}
