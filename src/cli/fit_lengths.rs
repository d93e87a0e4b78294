//! `train --data` over sequences of several lengths: the bound its plan is made for
//! ([`bound`]), and what the padded batches need of the model and of truncated BPTT, checked before the first step (and before the checkpoint
//! directory is written) from the lengths the scan found and every epoch's batches, which
//! the seed decides. The trainer checks each batch again ([`Reach`]); this finds the
//! batch that would fail at step k and refuses at the start, naming the flag, the lengths
//! and what would train.

use anyhow::{bail, Result};
use tensorfit::nn::every_step::check_padded_model;
use tensorfit::nn::{
    HeadOn, Job, Mode, ModelDescription, Reach, RunSettings, TbpttMode, TrainOptions,
};

use super::data_args::Files;

/// A batch whose shortest sequence ends before the steps the head reads.
struct Unreached {
    epoch: u64,
    shortest: usize,
    reach: Reach,
}

/// Refuses, before anything runs, padded batches that a step cannot train: a head on
/// every step that cannot mask padding (BatchNorm, mean squared error), and a batch of
/// `epochs` (each epoch's batches from `order(epoch)`) whose shortest sequence ends before
/// the steps its head reads under `settings`' truncated BPTT.
pub fn check(
    cfg: &ModelDescription,
    settings: &RunSettings,
    files: &Files,
    epochs: u64,
    order: impl Fn(u64) -> Result<Vec<Vec<usize>>>,
) -> Result<()> {
    if !files.padded {
        return Ok(());
    }
    let lengths = files.source.lengths();
    let (Some(&shortest), Some(&longest)) = (lengths.iter().min(), lengths.iter().max()) else {
        return Ok(());
    };
    let shown = files.path.display();
    if let Err(e) = check_padded_model(cfg, Mode::Train) {
        bail!("{shown}: sequences of {shortest} to {longest} steps, in padded batches: {e}");
    }
    let opts = TrainOptions {
        tbptt: settings.tbptt,
        tbptt_mode: settings.tbptt_mode,
        padded: true,
        ..TrainOptions::default()
    };
    let reach = |steps: usize| Reach::of(cfg, &opts.train_programs(cfg, 1, steps), steps);
    // No batch can hold a sequence shorter than the file's shortest.
    if (shortest..=longest).all(|t| reach(t).is_none_or(|r| r.reached_by(shortest))) {
        return Ok(());
    }
    let mut first: Option<Unreached> = None;
    // The truncated-BPTT length every batch of every epoch would reach with.
    let mut needed = 0;
    for epoch in 0..epochs {
        for batch in order(epoch)? {
            let Some(min) = batch.iter().map(|&i| lengths[i]).min() else {
                continue;
            };
            let steps = batch.iter().map(|&i| lengths[i]).max().unwrap_or(min);
            let Some(r) = reach(steps).filter(|r| !r.reached_by(min)) else {
                continue;
            };
            needed = needed.max(r.needed_for(min));
            first.get_or_insert(Unreached {
                epoch,
                shortest: min,
                reach: r,
            });
        }
    }
    let Some(Unreached {
        epoch,
        shortest,
        reach,
    }) = first
    else {
        return Ok(());
    };
    let flags = match settings.tbptt_mode {
        TbpttMode::Last => format!("--tbptt {}", settings.tbptt),
        TbpttMode::Windows => format!("--tbptt {} --tbptt-mode windows", settings.tbptt),
    };
    let fix = match (cfg.head.on, settings.tbptt_mode) {
        (HeadOn::EveryStep, _) => format!(
            "give --tbptt-mode windows (every step of every sequence trains, window by window), or --tbptt at least {needed}"
        ),
        (HeadOn::Sequence(_), TbpttMode::Last) => format!("give --tbptt at least {needed}"),
        (HeadOn::Sequence(_), TbpttMode::Windows) => format!(
            "give --tbptt at least {needed} with --tbptt-mode last (a head on the last step has a loss in the last window only)"
        ),
    };
    bail!(
        "{flags} on {shown}: a batch of epoch {} pads sequences of {shortest} to {} steps, and a sequence of {shortest} steps ends before the {}; {}: {fix}",
        epoch + 1,
        reach.steps,
        reach.what(),
        reach.why(),
    )
}

/// The bound a data run is planned for, which every batch of every epoch is within: the
/// largest batch this process reads of the first epoch's `reading` order (every epoch
/// cuts batches of the same sizes; under ranks, this rank's part of each) by `max_len`,
/// the data's longest sequence, and the largest shape of the validation batches `val`.
pub fn bound(
    files: &Files,
    reading: &[Vec<usize>],
    max_len: usize,
    val: Option<(&Files, &[Vec<usize>])>,
) -> Job {
    let largest = |f: &Files, order: &[Vec<usize>]| {
        let shapes = order.iter().map(|b| f.shape(b));
        shapes.reduce(|x, y| (x.0.max(y.0), x.1.max(y.1)))
    };
    Job::Train {
        batch: largest(files, reading).map_or(1, |s| s.0),
        seq_len: max_len.max(1),
        eval: val.and_then(|(f, order)| largest(f, order)),
    }
}
