//! Evaluation and prediction over data files (`eval --data`, `predict --data`, and the
//! validations of `train --data`, on ranks too): batches grouped by length and padded,
//! every sequence run (the last partial batch included), on a run planned for the bound
//! every batch is within (replanned only for a shape outside it).

use std::path::Path;

use anyhow::{bail, Context, Result};
use tensorfit::core::HostTensor;
use tensorfit::data::{same_length_batches, Labels};
use tensorfit::distributed::Ranks;
use tensorfit::nn::atomic_file::write_atomic_with;
use tensorfit::nn::every_step::check_padded_model;
use tensorfit::nn::{Job, Mode, ModelDescription, OptimConfig, ParamStore};
use tensorfit::{CarriedState, Runner};

use super::data_args::{trainer_inputs, DataArgs, Files};
use super::data_vocab;
use super::predictions_file::PredictionsFile;
use super::ranks;
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
/// steps)`. `each` sees every batch's sequence indices and probabilities [B, classes]
/// ([T, B, classes] with a head on every step).
/// A text's batches ([`Files::carry`]) start from the state the batch before left, the
/// first from zeros.
pub fn evaluate(
    run: &mut Runner,
    files: &Files,
    order: Vec<Vec<usize>>,
    job: impl Fn(usize, usize) -> Job,
    mut each: impl FnMut(&[usize], &HostTensor),
) -> Result<Scores> {
    evaluate_with(run, files, order, job, |ids, probs| {
        each(ids, probs);
        Ok(())
    })
}

/// [`evaluate`] whose `each` may fail, which stops it.
fn evaluate_with(
    run: &mut Runner,
    files: &Files,
    order: Vec<Vec<usize>>,
    job: impl Fn(usize, usize) -> Job,
    mut each: impl FnMut(&[usize], &HostTensor) -> Result<()>,
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
        // Within the plan's bound: nothing to do (a shape outside it is planned again,
        // and the run's summary says so).
        run.hold(job(size, steps))?;
        let report = run.evaluate_batch_carrying(&b, &mut carried)?;
        loss += report.loss as f64 * size as f64;
        correct = correct
            .zip(report.accuracy)
            .map(|(c, a)| c + a as f64 * size as f64);
        n += size;
        each(&ids, &report.probs)?;
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
/// inference run planned for its largest batch: the file, its batches (grouped by length, in
/// increasing length) and the run. A text is read with the vocabulary of
/// `checkpoint` when it has one.
pub fn start(
    data: &DataArgs,
    (cfg, params, checkpoint): (ModelDescription, &ParamStore, Option<&Path>),
    labels: Labels,
    batch: usize,
    dev: &DeviceArgs,
    quiet: bool,
) -> Result<(Files, Vec<Vec<usize>>, Runner)> {
    let vocab = data_vocab::of_checkpoint(checkpoint, data.path())?;
    let Some(files) = data.open(&cfg, labels, vocab.as_ref()).context("--data")? else {
        bail!("--data is missing");
    };
    // A text: each row of a batch reads a contiguous part of it.
    let files = files.whole_text(batch).context("--data")?;
    let all: Vec<usize> = (0..files.dataset().sequences).collect();
    // A model that cannot mask padded steps (a head on every step with mean squared
    // error) reads the sequences of each length in batches of their own, unpadded:
    // inference needs no batch of mixed lengths. (A BatchNorm infers row by row.)
    let padded = files.padded && check_padded_model(&cfg, Mode::Infer).is_ok();
    let order = match padded || !files.padded {
        true => files.order(&all, batch, None)?,
        false => same_length_batches(files.source.lengths(), &all, batch, None)?,
    };
    let max_len = files.dataset().max_len;
    // Planned once, for the largest batch (the bound every batch is within).
    let (b, t) = order
        .iter()
        .map(|batch| files.shape(batch))
        .reduce(|x, y| (x.0.max(y.0), x.1.max(y.1)))
        .unwrap_or((1, 1));
    let mut req = request(cfg, eval_job(b, t), max_len, OptimConfig::default(), dev)?;
    req.read_ahead_bytes = files.read_ahead_bytes(batch, order.len());
    req.padded = padded;
    let run = begin(&req, params, quiet)?;
    Ok((files, order, run))
}

/// `eval --data`: loss and accuracy over every sequence of the file.
pub fn eval(run: &mut Runner, files: &Files, order: Vec<Vec<usize>>) -> Result<Scores> {
    evaluate(run, files, order, eval_job, |_, _| {})
}

/// `predict --data`: the probabilities of every sequence (a regression's predictions),
/// written to `output` a batch at a time as [`PredictionsFile`] lays them out.
pub fn predict(
    run: &mut Runner,
    files: &Files,
    order: Vec<Vec<usize>>,
    output: &Path,
) -> Result<Scores> {
    let n = files.dataset().sequences;
    let ids: Vec<String> = (0..n).map(|i| files.source.id(i)).collect();
    let model = run.description().clone();
    let mut scores = None;
    write_atomic_with(output, |file| -> Result<()> {
        let mut out = PredictionsFile::start(file, &model, files.source.lengths(), ids)?;
        let each = |ids: &[usize], probs: &HostTensor| out.write_batch(ids, probs);
        scores = Some(evaluate_with(run, files, order, eval_job, each)?);
        Ok(())
    })
    .with_context(|| format!("--output {}", output.display()))?;
    scores.context("no batch was evaluated")
}

/// What is being validated on: a file and the sequences of it.
pub struct Validation {
    pub files: Files,
    pub order: Vec<Vec<usize>>,
}

/// Loss and accuracy over the validation sequences, each batch within the plan's bound
/// (the training shape is the bound's); on ranks, each scores its whole batches and the totals are summed.
pub fn validate(run: &mut Runner, v: &Validation, ranks: &mut Option<Ranks>) -> Result<Scores> {
    let (batch, seq_len) = match run.bound() {
        Job::Train { batch, seq_len, .. } => (batch, seq_len),
        Job::Eval { batch, seq_len } => (batch, seq_len),
    };
    let order = match ranks {
        Some(r) => r.shard().whole_batches(&v.order),
        None => v.order.clone(),
    };
    let scores = evaluate(
        run,
        &v.files,
        order,
        |b, t| Job::Train {
            batch,
            seq_len,
            eval: Some((b, t)),
        },
        |_, _| {},
    )
    .context("validating")?;
    ranks::sum_scores(ranks, scores)
}
