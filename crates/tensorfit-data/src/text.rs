//! A UTF-8 corpus for a next-character language model. The scan reads the file in
//! blocks (so a corpus larger than memory streams), checks it is UTF-8 (naming the byte
//! offset and line of the first bad byte), learns the character vocabulary, and records
//! the byte offset of every 65,536th character, so that any character can be found
//! again by seeking to the mark before it and decoding forward.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::{DataError, Place, Result};
use crate::vocab::CharVocab;

/// Characters between two recorded byte offsets.
const MARK_EVERY: u64 = 1 << 16;

/// A scanned text file.
#[derive(Debug, Clone)]
pub struct CharCorpus {
    pub(crate) path: PathBuf,
    /// Characters in the file.
    pub chars: u64,
    /// Byte offset of character `i * MARK_EVERY`.
    marks: Vec<u64>,
    /// The characters the file has (the vocabulary is made from these, or given).
    seen: BTreeSet<char>,
}

impl CharCorpus {
    /// Scans `path`.
    pub fn open(path: &Path) -> Result<CharCorpus> {
        let file = File::open(path).map_err(DataError::io(path))?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut seen = BTreeSet::new();
        let mut marks = Vec::new();
        let (mut chars, mut byte, mut line) = (0u64, 0u64, 1usize);
        // Bytes of a character cut by the end of a block, carried to the next.
        let mut carry: Vec<u8> = Vec::with_capacity(4);
        loop {
            let block = reader.fill_buf().map_err(DataError::io(path))?;
            if block.is_empty() {
                break;
            }
            let taken = block.len();
            let mut bytes = std::mem::take(&mut carry);
            bytes.extend_from_slice(block);
            reader.consume(taken);
            let start = byte + taken as u64 - bytes.len() as u64;
            let (text, rest) = match std::str::from_utf8(&bytes) {
                Ok(text) => (text, &[][..]),
                Err(e) if e.error_len().is_none() => {
                    let (good, rest) = bytes.split_at(e.valid_up_to());
                    (std::str::from_utf8(good).unwrap_or_default(), rest)
                }
                Err(e) => {
                    let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default();
                    let line = line + good.matches('\n').count();
                    return Err(DataError::InvalidUtf8 {
                        place: Place {
                            byte: Some(start + e.valid_up_to() as u64),
                            ..Place::line(path, line)
                        },
                    });
                }
            };
            let mut at = start;
            for c in text.chars() {
                if chars % MARK_EVERY == 0 {
                    marks.push(at);
                }
                seen.insert(c);
                line += usize::from(c == '\n');
                chars += 1;
                at += c.len_utf8() as u64;
            }
            carry = rest.to_vec();
            byte = at + carry.len() as u64;
        }
        if !carry.is_empty() {
            return Err(DataError::InvalidUtf8 {
                place: Place {
                    byte: Some(byte - carry.len() as u64),
                    ..Place::line(path, line)
                },
            });
        }
        if chars == 0 {
            return Err(DataError::Empty {
                path: path.to_path_buf(),
                what: "no characters",
            });
        }
        Ok(CharCorpus {
            path: path.to_path_buf(),
            chars,
            marks,
            seen,
        })
    }

    /// Character ranges (training, validation): the last `val_fraction` of the corpus
    /// validates. Cut each into [`CharWindows`](crate::CharWindows).
    pub fn split(&self, val_fraction: f64) -> Result<((u64, u64), (u64, u64))> {
        let cut = self.chars - crate::pipeline::val_count(self.chars, val_fraction)?;
        Ok(((0, cut), (cut, self.chars)))
    }

    /// The vocabulary of the characters this corpus has.
    pub fn vocab(&self) -> CharVocab {
        CharVocab::new(self.seen.clone())
    }
}

/// Reads characters of a scanned corpus from any position, fastest when read forward.
#[derive(Debug)]
pub(crate) struct CharCursor {
    corpus: CharCorpus,
    reader: BufReader<File>,
    /// The next character's index and byte offset.
    at: (u64, u64),
    /// The character before `at`: windows overlap by one (the last target is the next
    /// window's first input), so it is kept rather than sought again.
    last: Option<char>,
}

impl CharCursor {
    pub fn new(corpus: &CharCorpus) -> Result<CharCursor> {
        let file = File::open(&corpus.path).map_err(DataError::io(&corpus.path))?;
        Ok(CharCursor {
            corpus: corpus.clone(),
            reader: BufReader::with_capacity(1 << 14, file),
            at: (0, 0),
            last: None,
        })
    }

    /// Characters `from..from + n`, as ids of `vocab`.
    pub fn read(
        &mut self,
        mut from: u64,
        mut n: usize,
        vocab: &CharVocab,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        if let (Some(c), true) = (self.last, from + 1 == self.at.0 && n > 0) {
            out.push(vocab.id(c));
            from += 1;
            n -= 1;
        }
        if from < self.at.0 || from - self.at.0 > MARK_EVERY {
            let mark = (from / MARK_EVERY) as usize;
            let byte = self.corpus.marks[mark];
            self.seek(mark as u64 * MARK_EVERY, byte)?;
        }
        while self.at.0 < from {
            self.next_char()?;
        }
        for _ in 0..n {
            let c = self.next_char()?;
            out.push(vocab.id(c));
        }
        Ok(())
    }

    fn seek(&mut self, index: u64, byte: u64) -> Result<()> {
        let path = &self.corpus.path;
        self.reader
            .seek(SeekFrom::Start(byte))
            .map_err(DataError::io(path))?;
        self.at = (index, byte);
        self.last = None;
        Ok(())
    }

    fn next_char(&mut self) -> Result<char> {
        let path = &self.corpus.path;
        let mut b = [0u8; 4];
        let changed =
            || DataError::format(Place::file(path), "the file changed since it was scanned");
        self.reader.read_exact(&mut b[..1]).map_err(|_| changed())?;
        let n = match b[0] {
            0x00..=0x7F => 1,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        self.reader
            .read_exact(&mut b[1..n])
            .map_err(|_| changed())?;
        let c = std::str::from_utf8(&b[..n])
            .ok()
            .and_then(|s| s.chars().next())
            .ok_or_else(changed)?;
        self.at = (self.at.0 + 1, self.at.1 + n as u64);
        self.last = Some(c);
        Ok(c)
    }
}
