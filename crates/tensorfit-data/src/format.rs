//! Which reader a path is for: the one place that decides. A directory is DL4J's layout;
//! a file is judged by its first bytes where they say what it is (numpy's `\x93NUMPY`, a
//! zip's `PK\x03\x04`, safetensors' header length followed by `{`, a pickle's `\x80`
//! protocol bytes), and otherwise by its extension in any case (`seq.CSV` is a CSV). A
//! PyTorch file (`torch.save`: a zip holding `data.pkl`, or a bare pickle) is refused
//! with how to export its tensors, whatever its name.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{DataError, Place, Result};

/// The form of a data path, and so its reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// DL4J's layout: `features/` and `labels/` of numbered CSV files.
    Directory,
    Safetensors,
    /// One numpy array.
    Npy,
    /// numpy's zip of arrays.
    Npz,
    /// One long CSV (`sequence,step,f1,…,fk,label`).
    LongCsv,
    /// `label<TAB>text` lines.
    Tsv,
    /// A text corpus for a character language model.
    Text,
}

impl Format {
    /// Whether the file is read as text with a character vocabulary (a TSV or a corpus).
    pub fn is_text(self) -> bool {
        matches!(self, Format::Tsv | Format::Text)
    }
}

/// How to bring a PyTorch file's tensors here.
const EXPORT: &str = "save the tensors as safetensors instead: `from safetensors.torch import save_file; save_file({\"input\": x, \"labels\": y}, \"data.safetensors\")` (tensors contiguous: x.contiguous())";

/// The form of `path`: its first bytes where they tell, else its extension (any case).
pub fn format_of(path: &Path) -> Result<Format> {
    if path.is_dir() {
        return Ok(Format::Directory);
    }
    let mut file = File::open(path).map_err(DataError::io(path))?;
    let meta = file.metadata().map_err(DataError::io(path))?;
    let len = meta.len();
    let mut head = [0u8; 16];
    let mut got = 0;
    // A pipe or a device is not read ahead (its bytes would be gone): its name says.
    while meta.is_file() && got < head.len() {
        match file.read(&mut head[got..]).map_err(DataError::io(path))? {
            0 => break,
            n => got += n,
        }
    }
    let head = &head[..got];
    if head.starts_with(b"\x93NUMPY") {
        return Ok(Format::Npy);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        let names = crate::zip::member_names(path, &mut file, len)?;
        let has = |m: &str| {
            names
                .iter()
                .any(|n| n == m || n.ends_with(&format!("/{m}")))
        };
        if has("data.pkl") {
            return Err(DataError::format(
                Place::file(path),
                format!("is a PyTorch file (torch.save's zip of pickles, with data.pkl), which is not read: it can hold any Python object; {EXPORT}"),
            ));
        }
        if has("workbook.xml") {
            return Err(foreign(
                path,
                "an Excel workbook",
                "save it as CSV (comma-separated), one row per step: sequence,step,f1,...,fk,label",
            ));
        }
        return Ok(Format::Npz);
    }
    let others: [(&[u8], &str, &str); 3] = [
        (b"\x1f\x8b", "compressed with gzip", "decompress it first (gunzip)"),
        (b"\x89HDF\r\n\x1a\n", "an HDF5 file", "save its arrays with np.savez (input, labels, lengths) or as safetensors"),
        (b"PAR1", "a Parquet file", "save it as CSV: df.to_csv(path, index=False), one row per step: sequence,step,f1,...,fk,label"),
    ];
    if let Some((_, what, how)) = others.iter().find(|(magic, ..)| head.starts_with(magic)) {
        return Err(foreign(path, what, how));
    }
    if let [0x80, 2..=5, ..] = head {
        return Err(DataError::format(
            Place::file(path),
            format!("is a Python pickle (pickle.dump, or torch.save's legacy format), which is not read: it can hold any Python object; {EXPORT}"),
        ));
    }
    if head.len() > 8 && head[8] == b'{' {
        let n = u64::from_le_bytes(head[..8].try_into().unwrap_or_default());
        if n >= 2 && len.checked_sub(8).is_some_and(|room| n <= room) {
            return Ok(Format::Safetensors);
        }
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    Ok(match ext.as_str() {
        // The readers say what is wrong with a file named so that is not one.
        "safetensors" => Format::Safetensors,
        "npy" => Format::Npy,
        "npz" => Format::Npz,
        "csv" => Format::LongCsv,
        "tsv" => Format::Tsv,
        _ => Format::Text,
    })
}

/// The error for a file of a format that is not read: what it is, and how to bring it.
fn foreign(path: &Path, what: &str, how: &str) -> DataError {
    DataError::format(
        Place::file(path),
        format!("is {what}, which is not read; {how}"),
    )
}
