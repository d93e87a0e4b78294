//! What a data run watches (`train --data`): the training loss since the last line, the
//! best validation and the early-stopping count, the epoch's progress bar, and the lines
//! of metrics.jsonl.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use tensorfit::Runner;

use super::files_eval::Scores;
use super::quality_text;

/// What the run has seen since it started: the training loss since the last validation,
/// the best validation, and where each validation's line goes.
pub(super) struct Watch {
    pub(super) loss_sum: f64,
    pub(super) loss_count: u64,
    /// The lowest validation loss and its step.
    pub(super) best: Option<(f32, u64)>,
    /// Validations since the best one.
    pub(super) since_best: u64,
    pub(super) patience: Option<u64>,
    pub(super) stopped_early: bool,
    pub(super) last: Option<Scores>,
    pub(super) metrics: Option<(PathBuf, File)>,
    pub(super) json: bool,
    /// A rank other than 0 of a data-parallel run: rank 0 prints for all.
    pub(super) quiet: bool,
    /// On a terminal: the epoch's progress bar with its ETA.
    pub(super) bar: Option<ProgressBar>,
    pub(super) started: Instant,
}

impl Watch {
    /// A new bar for epoch `epoch` of `epochs` when stderr is a terminal (and not --json).
    pub(super) fn start_epoch(&mut self, epoch: u64, epochs: u64, steps: u64) {
        if let Some(old) = self.bar.take() {
            old.finish_and_clear();
        }
        if self.json || !std::io::stderr().is_terminal() {
            return;
        }
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "epoch {prefix} [{bar:30}] {pos}/{len} steps, ETA {eta}  {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("{epoch}/{epochs}"));
        self.bar = Some(bar);
    }

    /// A line for people: above the bar on a terminal, on stderr otherwise.
    pub(super) fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => errln!("{line}"),
        }
    }

    /// The end of an epoch without validation: a line of the mean training loss
    /// (metrics.jsonl, and stdout with --json or stderr).
    pub(super) fn epoch_done(&mut self, epoch: u64, epochs: u64, step: u64) -> Result<()> {
        let train_loss = self.take_train_loss();
        let line = json!({
            "epoch": epoch, "step": step, "train_loss": train_loss,
            "seconds": self.started.elapsed().as_secs_f64(),
        });
        self.record(&line)?;
        if !self.json {
            self.say(&format!(
                "epoch {epoch}/{epochs} done: train loss {train_loss:.4}"
            ));
        }
        Ok(())
    }

    /// Writes `line` to metrics.jsonl (if kept) and, with --json, to stdout.
    fn record(&mut self, line: &serde_json::Value) -> Result<()> {
        if let Some((path, file)) = &mut self.metrics {
            writeln!(file, "{line}")
                .and_then(|()| file.flush())
                .with_context(|| format!("writing {}", path.display()))?;
        }
        if self.json && !self.quiet {
            outln!("{line}");
        }
        Ok(())
    }

    /// The mean training loss since the last call.
    fn take_train_loss(&mut self) -> f32 {
        let mean = self.loss_sum / self.loss_count.max(1) as f64;
        (self.loss_sum, self.loss_count) = (0.0, 0);
        mean as f32
    }

    /// Takes a validation's scores: saves the model when they are the best so far, tells
    /// the schedule, writes the line (metrics.jsonl, and stdout with --json or stderr);
    /// returns whether to stop early.
    pub(super) fn validated(
        &mut self,
        run: &mut Runner,
        scores: Scores,
        epoch: u64,
        step: u64,
        save_all: &dyn Fn(&mut Runner) -> Result<()>,
    ) -> Result<bool> {
        let train_loss = self.take_train_loss();
        self.last = Some(scores);
        let improved = self.best.is_none_or(|(l, _)| scores.loss < l);
        if improved {
            self.best = Some((scores.loss, step));
            self.since_best = 0;
            // A checkpoint that cannot be written costs that checkpoint, not the run.
            if let Err(e) = save_all(run) {
                self.say(&format!(
                    "warning: step {step}: the best model so far was not saved ({e:#}); training continues, and the next best validation tries again"
                ));
            }
        } else {
            self.since_best += 1;
        }
        run.observe_validation(scores.loss as f64);
        let line = json!({
            "epoch": epoch, "step": step, "train_loss": train_loss,
            "val_loss": scores.loss, "val_accuracy": scores.accuracy,
            "best": improved, "seconds": self.started.elapsed().as_secs_f64(),
        });
        self.record(&line)?;
        if !self.json {
            self.say(&format!(
                "epoch {epoch} step {step}: train loss {train_loss:.4}, validation {}{}",
                quality_text(run.description(), scores.loss, scores.accuracy),
                if improved {
                    " (best so far: saved)"
                } else {
                    ""
                }
            ));
        }
        self.stopped_early = self.patience.is_some_and(|p| self.since_best >= p);
        Ok(self.stopped_early)
    }
}
