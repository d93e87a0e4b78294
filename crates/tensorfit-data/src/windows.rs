//! Next-character windows of a corpus, for a language model trained with truncated BPTT.
//!
//! The characters `[from, to)` are cut into `streams` contiguous streams of equal length
//! (the batch size: row `s` of every batch continues stream `s`), and each stream into
//! windows of `window` steps whose targets are the inputs shifted by one character
//! (inputs = chars[i..i+T], targets = chars[i+1..i+T+1]). Sequence `k * streams + s` is
//! window `k` of stream `s`, so batches taken in order hold window `k` of every stream,
//! and the recurrent state of a row can be carried into the next batch.

use crate::dataset::{Example, Inputs, LabelsPer, Reader, Scanned, Source, Targets, Values};
use crate::error::{DataError, Result};
use crate::text::{CharCorpus, CharCursor};
use crate::vocab::CharVocab;

/// The windows of part of a corpus.
#[derive(Debug, Clone)]
pub struct CharWindows {
    corpus: CharCorpus,
    vocab: CharVocab,
    scanned: Scanned,
    /// First character of each stream.
    starts: Vec<u64>,
    window: usize,
}

impl CharWindows {
    /// Windows of `window` characters over characters `from..to` of `corpus`, in
    /// `streams` parallel streams; ids from `vocab`.
    pub fn new(
        corpus: &CharCorpus,
        vocab: &CharVocab,
        (from, to): (u64, u64),
        streams: usize,
        window: usize,
    ) -> Result<CharWindows> {
        if streams == 0 || window == 0 {
            return Err(DataError::Settings(
                "windows need a batch and a window of at least 1".into(),
            ));
        }
        if from > to || to > corpus.chars {
            return Err(DataError::Settings(format!(
                "characters {from}..{to} are not a range of {}, which has {}",
                corpus.path.display(),
                corpus.chars
            )));
        }
        let per_stream = to.saturating_sub(from) / streams as u64;
        let windows = (per_stream.saturating_sub(1) / window as u64) as usize;
        // The caller names the file and the part of it (its error context).
        if windows == 0 {
            let rows = match streams {
                1 => String::new(),
                n => format!(" in each of {n} rows of a batch"),
            };
            return Err(DataError::Settings(format!(
                "{} characters are too few for one window and the character after it{rows}",
                to.saturating_sub(from)
            )));
        }
        let lengths = vec![window; windows * streams];
        let scanned = Scanned::new(
            Inputs::Tokens { vocab: vocab.len() },
            Targets::Classes {
                classes: vocab.len(),
            },
            LabelsPer::Step,
            lengths,
        );
        Ok(CharWindows {
            corpus: corpus.clone(),
            vocab: vocab.clone(),
            scanned,
            starts: (0..streams as u64).map(|s| from + s * per_stream).collect(),
            window,
        })
    }

    /// Number of parallel streams (the batch size these windows are read in).
    pub fn streams(&self) -> usize {
        self.starts.len()
    }

    /// (stream, window within the stream) of sequence `index`.
    pub fn position(&self, index: usize) -> (usize, usize) {
        (index % self.streams(), index / self.streams())
    }
}

impl Source for CharWindows {
    fn scanned(&self) -> &Scanned {
        &self.scanned
    }

    fn streams(&self) -> Option<usize> {
        Some(self.starts.len())
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        let cursors = self
            .starts
            .iter()
            .map(|_| CharCursor::new(&self.corpus))
            .collect::<Result<_>>()?;
        Ok(Box::new(WindowReader {
            windows: self.clone(),
            cursors,
        }))
    }
}

/// One cursor per stream, so that reading windows in order reads each stream forward.
#[derive(Debug)]
struct WindowReader {
    windows: CharWindows,
    cursors: Vec<CharCursor>,
}

impl Reader for WindowReader {
    fn read(&mut self, index: usize) -> Result<Example> {
        let w = &self.windows;
        let (stream, k) = w.position(index);
        let from = w.starts[stream] + (k * w.window) as u64;
        let mut ids = Vec::with_capacity(w.window + 1);
        self.cursors[stream].read(from, w.window + 1, &w.vocab, &mut ids)?;
        let targets = ids[1..].to_vec();
        ids.truncate(w.window);
        Ok(Example {
            len: w.window,
            inputs: Values::Ids(ids),
            labels: Values::Ids(targets),
        })
    }
}
