//! The file `predict --data` writes, a part at a time as batches come (so the
//! predictions of a large file never sit in memory whole): safetensors holding the tensor
//! `probabilities` (a regression's `predictions`) in file order, one row per sequence
//! `[N, C]` with a head on the last step, and with a head on every step one row per step
//! `[N, T, C]`, batch-first (PyTorch's `pad_packed_sequence(batch_first=True)` layout,
//! T the longest sequence), with 0 on every step at or past a sequence's end (that
//! function's default `padding_value`) and the lengths as the I64 tensor `lengths` [N].
//! The sequences' ids (in the same order) are in the file's metadata as a JSON list
//! under `ids`; with a head on every step, `padding_value` says "0".

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use tensorfit::core::HostTensor;
use tensorfit::nn::{HeadOn, LossSpec, ModelDescription};

/// The tensor of a model's outputs: a classifier's `probabilities`, a regression's
/// `predictions` (what `predict` writes, with `--input` as with `--data`).
pub fn output_name(loss: &LossSpec) -> &'static str {
    if loss.is_classification() {
        "probabilities"
    } else {
        "predictions"
    }
}

/// A predictions file being written: its header and `lengths` are in place and every
/// value is 0 until a batch's rows are written.
pub struct PredictionsFile<'f> {
    file: &'f mut File,
    /// Byte offset of the first value of the outputs tensor.
    start: u64,
    /// Rows per sequence: the longest sequence with a head on every step, else 1.
    steps: usize,
    /// Values per row (classes, or a regression's outputs).
    width: usize,
    lengths: &'f [usize],
    every_step: bool,
}

impl<'f> PredictionsFile<'f> {
    /// Starts the file of `model`'s outputs for the sequences of `lengths` known by `ids`
    /// in `file` (new and empty).
    pub fn start(
        file: &'f mut File,
        model: &ModelDescription,
        lengths: &'f [usize],
        ids: Vec<String>,
    ) -> Result<PredictionsFile<'f>> {
        let every_step = model.head.on == HeadOn::EveryStep;
        let (n, width) = (lengths.len(), model.loss.outputs());
        let steps = match every_step {
            true => lengths.iter().copied().max().unwrap_or(0),
            false => 1,
        };
        let name = output_name(&model.loss);
        let mut metadata = Map::new();
        metadata.insert("ids".into(), json!(json!(ids).to_string()));
        let mut header = Map::new();
        let mut shape = vec![n, width];
        let mut offset = 0u64;
        if every_step {
            metadata.insert("padding_value".into(), json!("0"));
            shape.insert(1, steps);
            offset = 8 * n as u64;
            header.insert(
                "lengths".into(),
                json!({"dtype": "I64", "shape": [n], "data_offsets": [0, offset]}),
            );
        }
        let values = shape.iter().map(|&d| d as u64).product::<u64>();
        let end = offset + 4 * values;
        header.insert(
            name.into(),
            json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, end]}),
        );
        header.insert("__metadata__".into(), Value::Object(metadata));
        let mut head = Value::Object(header).to_string().into_bytes();
        // The header padded with spaces to 8 bytes, as the safetensors writer pads it.
        head.resize(head.len().next_multiple_of(8), b' ');
        let data = 8 + head.len() as u64;
        // A file's new bytes read 0: the padding is in place before anything is written.
        file.set_len(data + end)?;
        file.write_all(&(head.len() as u64).to_le_bytes())?;
        file.write_all(&head)?;
        if every_step {
            let bytes: Vec<u8> = lengths
                .iter()
                .flat_map(|&l| (l as i64).to_le_bytes())
                .collect();
            file.write_all(&bytes)?;
        }
        Ok(PredictionsFile {
            file,
            start: data + offset,
            steps,
            width,
            lengths,
            every_step,
        })
    }

    /// Writes the outputs `probs` of the batch of sequences `ids`: `[B, C]`, or `[T, B, C]`
    /// time-major with a head on every step (steps past a sequence's end not written).
    pub fn write_batch(&mut self, ids: &[usize], probs: &HostTensor) -> Result<()> {
        let (b, width) = (ids.len(), self.width);
        let mut row = Vec::new();
        for (r, &i) in ids.iter().enumerate() {
            row.clear();
            let steps = if self.every_step { self.lengths[i] } else { 1 };
            for t in 0..steps {
                let at = (t * b + r) * width;
                let values = probs.data.get(at..at + width).with_context(|| {
                    format!(
                        "the batch's outputs {:?} lack step {t} of row {r}",
                        probs.shape.dims()
                    )
                })?;
                row.extend(values.iter().flat_map(|v| v.to_le_bytes()));
            }
            let offset = self.start + (i * self.steps * width * 4) as u64;
            self.file.seek(SeekFrom::Start(offset))?;
            self.file.write_all(&row)?;
        }
        Ok(())
    }
}
