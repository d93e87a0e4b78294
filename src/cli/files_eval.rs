//! Evaluation and prediction over data files (`eval --data`, `predict --data`, and the
//! validations of `train --data`): batches grouped by length and padded, the session
//! replanned when the shape changes.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::json;
use tensorfit::core::HostTensor;
use tensorfit::data::Labels;
use tensorfit::nn::atomic_file::write_atomic;
use tensorfit::nn::{CarriedState, Job, ModelDescription, OptimConfig, ParamStore};
use tensorfit::session::Session;

use super::data_args::{trainer_inputs, DataArgs, Files};
use super::data_vocab;
use super::{begin, request, DeviceArgs};

/// Mean loss and accuracy over a set of sequences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    pub loss: f32,
    /// None for a regression.
    pub accuracy: Option<f32>,
    pub sequences: usize,
}

/// Evaluates the batches `order` of `files`; each runs on the plan of `job(batch,
/// steps)`. `each` sees every batch's sequence indices and probabilities [B, classes].
/// A text's batches ([`Files::carry`]) start from the state the batch before left, the
/// first from zeros.
pub fn evaluate(
    session: &mut Session,
    files: &Files,
    order: Vec<Vec<usize>>,
    job: impl Fn(usize, usize) -> Job,
    mut each: impl FnMut(&[usize], &HostTensor),
) -> Result<Scores> {
    let (mut loss, mut correct, mut n) = (0f64, Some(0f64), 0usize);
    let mut carried = CarriedState::new();
    let batches = files.batches(order)?;
    let buffers = batches.buffers();
    for batch in batches {
        let batch = batch?;
        if !(files.carry && batch.continues) {
            carried.reset();
        }
        let (size, steps, ids) = (batch.size(), batch.steps, batch.ids.clone());
        let b = trainer_inputs(batch)?;
        session.switch_job(job(size, steps))?;
        let lengths = Some(&b.lengths[..]);
        let report = session
            .with_recovery(|t| t.evaluate_carrying(&b.x, &b.labels, lengths, &mut carried))?;
        loss += report.loss as f64 * size as f64;
        correct = correct
            .zip(report.accuracy)
            .map(|(c, a)| c + a as f64 * size as f64);
        n += size;
        each(&ids, &report.probs);
        buffers.give_back(b.x.data);
    }
    let n_f = n.max(1) as f64;
    Ok(Scores {
        loss: (loss / n_f) as f32,
        accuracy: correct.map(|c| (c / n_f) as f32),
        sequences: n,
    })
}

/// The inference job of one batch.
pub fn eval_job(batch: usize, seq_len: usize) -> Job {
    Job::Eval { batch, seq_len }
}

/// Opens `--data` for `cfg`, its labels read or ignored as `labels` says, and starts the
/// inference session of its first batch: the file, its batches (grouped by length, in
/// increasing length) and the session. A text is read with the vocabulary of
/// `checkpoint` when it has one.
pub fn start(
    data: &DataArgs,
    (cfg, params, checkpoint): (ModelDescription, &ParamStore, Option<&Path>),
    labels: Labels,
    batch: usize,
    dev: &DeviceArgs,
    quiet: bool,
) -> Result<(Files, Vec<Vec<usize>>, Session)> {
    let vocab = data_vocab::of_checkpoint(checkpoint, data.path())?;
    let Some(files) = data.open(&cfg, labels, vocab.as_ref()).context("--data")? else {
        bail!("--data is missing");
    };
    // A text: each row of a batch reads a contiguous part of it.
    let files = files.whole_text(batch).context("--data")?;
    let all: Vec<usize> = (0..files.dataset().sequences).collect();
    let order = files.order(&all, batch, None)?;
    let max_len = files.dataset().max_len;
    let (b, t) = files.shape(order.first().map_or(&[], Vec::as_slice));
    let mut req = request(cfg, eval_job(b, t), max_len, OptimConfig::default(), dev)?;
    req.read_ahead_bytes = files.read_ahead_bytes(batch, order.len());
    req.padded = files.padded;
    let session = begin(&req, params, quiet)?;
    Ok((files, order, session))
}

/// `eval --data`: loss and accuracy over every sequence of the file.
pub fn eval(session: &mut Session, files: &Files, order: Vec<Vec<usize>>) -> Result<Scores> {
    evaluate(session, files, order, eval_job, |_, _| {})
}

/// `predict --data`: the probabilities of every sequence, written to `output` as the
/// tensor `probabilities` [N, classes] in file order (a regression's `predictions`
/// [N, outputs]), with the sequences' ids (in the same order) in the file's metadata as a
/// JSON list under `ids`.
pub fn predict(
    session: &mut Session,
    files: &Files,
    order: Vec<Vec<usize>>,
    output: &Path,
) -> Result<Scores> {
    let n = files.dataset().sequences;
    let classes = session.trainer.model().loss.outputs();
    let mut rows = vec![0f32; n * classes];
    let scores = evaluate(session, files, order, eval_job, |ids, probs| {
        for (b, &i) in ids.iter().enumerate() {
            rows[i * classes..(i + 1) * classes]
                .copy_from_slice(&probs.data[b * classes..(b + 1) * classes]);
        }
    })?;
    let ids: Vec<String> = (0..n).map(|i| files.source.id(i)).collect();
    let mut out = ParamStore::new();
    let name = match session.trainer.model().loss.is_classification() {
        true => "probabilities",
        false => "predictions",
    };
    out.insert(name, HostTensor::new([n, classes], rows)?);
    let metadata = [("ids".to_string(), json!(ids).to_string())].into();
    let bytes = out.to_safetensors("", metadata)?;
    write_atomic(output, &bytes).context("--output")?;
    Ok(scores)
}
