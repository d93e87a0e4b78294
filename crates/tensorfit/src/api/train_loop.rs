//! [`Runner::train`]: an app's training loop — epochs of shuffled batches over sequences
//! held in memory (of one length or of many), validation, early stopping, the best
//! model and the latest state written as checkpoints, a resume that continues exactly,
//! and a callback that sees every step and validation and can stop the run.

use std::path::Path;

use tensorfit_nn::run_settings::crossed;
use tensorfit_nn::{Batch, Checkpoint, Job};

use super::error::{BadInput, Error, Result};
use super::runner::{Control, Runner};
use super::sequences::Sequences;
use super::train_options::FitOptions;
use super::train_position::TrainPosition;
use super::train_report::{Event, Stopped, TrainReport, Validated};

/// The checkpoint entry holding the loop's settings that decide the data's order (batch,
/// order, seed, data size): a resumed run refuses others.
const SETTINGS_KEY: &str = "train.loop";

impl Runner {
    /// Trains on `data` for [`FitOptions::epochs`] epochs of batches of up to
    /// [`FitOptions::batch`], each padded to its longest sequence (masked: the run must be
    /// planned for padded batches when the sequences differ in length, as
    /// [`Sequences::shapes`] plans them), validating on `validation` after every epoch
    /// (and every [`FitOptions::validate_every`] steps), stopping early after
    /// [`FitOptions::patience`] validations without a better loss, writing the best
    /// model and the latest state where the options say. `on_event` sees every step,
    /// validation and epoch's end and may return [`Control::Stop`]. A batch outside the
    /// plan's bound replans once ([`Runner::replans`]).
    ///
    /// ```
    /// use tensorfit::{Control, DevicePolicy, Event, FitOptions, Model, ModelDescription, Sequences};
    /// // 40 sequences of 3 to 9 steps of one feature; the class: is the first value high?
    /// let inputs: Vec<Vec<f32>> = (0..40).map(|i| vec![(i % 2) as f32; 3 + i % 7]).collect();
    /// let labels: Vec<f32> = (0..40).map(|i| (i % 2) as f32).collect();
    /// let (train, val) = Sequences::new(inputs, labels, 1).unwrap().split(0.25, 1).unwrap();
    /// let model = Model::new(ModelDescription::builder().features(1).lstm(8, 1).classify(2).build().unwrap(), 1).unwrap();
    /// let mut run = model
    ///     .open(train.shapes(8).holding(&val, 8), &DevicePolicy::only_cpu())
    ///     .unwrap();
    /// let options = FitOptions { epochs: 3, batch: 8, patience: Some(2), ..FitOptions::default() };
    /// let report = run
    ///     .train(&train, Some(&val), &options, |e| {
    ///         if let Event::Validated(v) = e {
    ///             println!("epoch {} validation loss {:.3}", v.epoch, v.scores.loss);
    ///         }
    ///         Control::Continue
    ///     })
    ///     .unwrap();
    /// assert_eq!(report.history.len(), report.epochs as usize);
    /// assert_eq!(report.steps, 3 * 4); // 30 sequences: 4 batches an epoch, the last of 6
    /// ```
    pub fn train(
        &mut self,
        data: &Sequences,
        validation: Option<&Sequences>,
        options: &FitOptions,
        mut on_event: impl FnMut(&Event) -> Control,
    ) -> Result<TrainReport> {
        check_options(options, validation.is_some())?;
        let settings = loop_settings(data, options);
        let mut pos = match options.checkpoint.as_deref() {
            Some(p) if options.resume && p.exists() => self.resume_from(p, &settings)?,
            _ => TrainPosition::default(),
        };
        let mut report = TrainReport {
            steps: self.session.trainer.step(),
            epochs: pos.epoch,
            last_loss: f32::NAN,
            history: Vec::new(),
            best: pos.best,
            stopped: Stopped::Finished,
        };
        // A run stopped early (its latest state past its patience) stays stopped.
        if options.patience.is_some_and(|p| pos.since_best >= p) {
            report.stopped = Stopped::EarlyStopping;
        }
        let mut best_state: Option<Checkpoint> = None;
        'epochs: while report.stopped == Stopped::Finished && pos.epoch < options.epochs {
            let epoch = pos.epoch;
            let order = data.epoch_order(options.batch, options.order, (options.seed, epoch))?;
            let (mut validated_at, mut asked_stop) = (None, false);
            for rows in order.iter().skip(pos.batches_done as usize) {
                let batch = data.batch(rows)?;
                self.hold_shape(step_shape(&batch), (report.steps, &mut on_event))?;
                let step = self.train_batch(&batch)?;
                let before = report.steps;
                report.steps = self.session.trainer.step();
                report.last_loss = step.loss;
                pos.batches_done += 1;
                pos.loss_sum += step.loss as f64;
                pos.loss_count += 1;
                let event = Event::Step {
                    epoch: epoch + 1,
                    report: &step,
                };
                // A stop asked for here comes after this step's validation and
                // checkpoint, so that a run resumed from it does what one never stopped
                // does.
                let asked = on_event(&event) == Control::Stop;
                if let (Some(v), Some(every)) = (validation, options.validate_every) {
                    if crossed(before, report.steps, every) {
                        validated_at = Some(report.steps);
                        let ctx = (epoch + 1, options, &mut best_state);
                        if let Some(stop) =
                            self.validate(v, &mut pos, &mut report, ctx, &mut on_event)?
                        {
                            report.stopped = stop;
                            break 'epochs;
                        }
                    }
                }
                if options
                    .checkpoint_every
                    .is_some_and(|e| crossed(before, report.steps, e))
                {
                    self.save_latest(options, &settings, &pos, &mut on_event);
                }
                if asked {
                    asked_stop = true;
                    break;
                }
            }
            // Stopped within the epoch: its end (a validation) comes when it is resumed.
            // Stopped at its last batch: the epoch ends first, so the latest state is at
            // the next epoch's start either way.
            if asked_stop && (pos.batches_done as usize) < order.len() {
                report.stopped = Stopped::Callback;
                break;
            }
            (pos.epoch, pos.batches_done) = (epoch + 1, 0);
            report.epochs = pos.epoch;
            if let Some(v) = validation.filter(|_| validated_at != Some(report.steps)) {
                let ctx = (epoch + 1, options, &mut best_state);
                if let Some(stop) = self.validate(v, &mut pos, &mut report, ctx, &mut on_event)? {
                    report.stopped = stop;
                    break;
                }
            }
            let event = Event::EpochEnd {
                epoch: epoch + 1,
                step: report.steps,
            };
            if on_event(&event) == Control::Stop || asked_stop {
                report.stopped = Stopped::Callback;
            }
        }
        // Without validation the best checkpoint gets the last state; a file that cannot
        // be written is told, and the latest state below is still written.
        if let (None, Some(path)) = (validation, options.best_checkpoint.as_deref()) {
            if let Err(error) = self.save(path) {
                on_event(&Event::CheckpointFailed {
                    path,
                    error: &error,
                });
            }
        }
        self.save_latest(options, &settings, &pos, &mut on_event);
        if let Some(best) = best_state.filter(|_| options.restore_best) {
            self.session.trainer.restore_state(&best)?;
        }
        Ok(report)
    }

    /// Validates on `data`, records the validation in `pos` and `report`, tells the
    /// schedule (reduce-on-plateau), writes the best model and keeps its state when asked;
    /// returns why to stop, if the callback or early stopping says so.
    fn validate(
        &mut self,
        data: &Sequences,
        pos: &mut TrainPosition,
        report: &mut TrainReport,
        (epoch, options, best_state): (u64, &FitOptions, &mut Option<Checkpoint>),
        on_event: &mut impl FnMut(&Event) -> Control,
    ) -> Result<Option<Stopped>> {
        // The evaluation's batches: up to the plan's evaluation batch, of up to the
        // longest sequence's steps.
        let shape = Job::Eval {
            batch: self.eval_batch().min(data.len()),
            seq_len: data.steps(),
        };
        self.hold_shape(shape, (report.steps, on_event))?;
        let scores = self.evaluate_sequences(data)?;
        let train_loss = (pos.loss_sum / pos.loss_count.max(1) as f64) as f32;
        (pos.loss_sum, pos.loss_count) = (0.0, 0);
        let best = pos.best.is_none_or(|(l, _)| scores.loss < l);
        if best {
            pos.best = Some((scores.loss, report.steps));
            pos.since_best = 0;
            report.best = pos.best;
            if let Some(path) = options.best_checkpoint.as_deref() {
                if let Err(error) = self.save(path) {
                    on_event(&Event::CheckpointFailed {
                        path,
                        error: &error,
                    });
                }
            }
            if options.restore_best {
                *best_state = Some(self.session.state()?.clone());
            }
        } else {
            pos.since_best += 1;
        }
        self.observe_validation(scores.loss as f64);
        let validated = Validated {
            epoch,
            step: report.steps,
            train_loss,
            scores,
            best,
            since_best: pos.since_best,
        };
        report.history.push(validated);
        if on_event(&Event::Validated(&validated)) == Control::Stop {
            return Ok(Some(Stopped::Callback));
        }
        Ok(options
            .patience
            .is_some_and(|p| pos.since_best >= p)
            .then_some(Stopped::EarlyStopping))
    }

    /// Writes the latest state with the run's position to [`FitOptions::checkpoint`];
    /// a failure is told to the callback and costs that checkpoint only.
    fn save_latest(
        &mut self,
        options: &FitOptions,
        settings: &str,
        pos: &TrainPosition,
        on_event: &mut impl FnMut(&Event) -> Control,
    ) {
        let Some(path) = options.checkpoint.as_deref() else {
            return;
        };
        let written = (|| -> Result<()> {
            let metadata = self.metadata.clone();
            let state = self.state()?;
            state.extra.extend(metadata);
            pos.store(&mut state.extra);
            state.extra.insert(SETTINGS_KEY.into(), settings.into());
            Ok(state.save(path)?)
        })();
        if let Err(error) = written {
            on_event(&Event::CheckpointFailed {
                path,
                error: &error,
            });
        }
    }

    /// Restores the latest state written by a run of the same settings at `path`, and
    /// returns its position.
    fn resume_from(&mut self, path: &Path, settings: &str) -> Result<TrainPosition> {
        let ck = Checkpoint::load(path)?;
        let refuse = |message: String| Error::File {
            path: path.to_path_buf(),
            message,
        };
        let pos = TrainPosition::load(&ck.extra)?.ok_or_else(|| {
            refuse("holds no training position: it is not the latest state of a run (load it with Model::load to start a new run from its weights)".into())
        })?;
        match ck.extra.get(SETTINGS_KEY) {
            Some(s) if s == settings => {}
            other => {
                return Err(refuse(format!(
                    "was written by a run of other settings or data ({}), not {settings}: resuming would not continue it",
                    other.map_or("none", String::as_str)
                )))
            }
        }
        if ck.config != *self.session.trainer.model() {
            return Err(refuse(format!(
                "holds the model {}, and the run is of {}",
                ck.config,
                self.session.trainer.model()
            )));
        }
        // Its weights, optimizer state and step, then its schedule's state.
        self.session.trainer.restore_state(&ck)?;
        self.restore_schedule(&ck)?;
        Ok(pos)
    }

    /// Makes the run's bound hold `shape` (a training step's or the evaluation of a set of
    /// sequences), replanning once when it does not, which the callback is told (at step
    /// `step`).
    fn hold_shape(
        &mut self,
        shape: Job,
        (step, on_event): (u64, &mut impl FnMut(&Event) -> Control),
    ) -> Result<()> {
        for message in self.hold(shape)? {
            on_event(&Event::Replanned {
                step,
                message: &message,
            });
        }
        Ok(())
    }
}

/// A training step's shape: `batch`'s sequences and steps.
fn step_shape(batch: &Batch) -> Job {
    let d = batch.x.shape.dims();
    Job::Train {
        batch: d.get(1).copied().unwrap_or(0),
        seq_len: d.first().copied().unwrap_or(0),
        eval: None,
    }
}

/// Refuses options that cannot run.
fn check_options(options: &FitOptions, validating: bool) -> Result<()> {
    if options.batch == 0 {
        return Err(Error::BadInput(BadInput::of(
            "batch",
            "at least 1 sequence",
            "0",
            "a batch of 0 sequences: a batch needs at least 1",
        )));
    }
    if options.patience.is_some() && !validating {
        return Err(Error::BadInput(BadInput::of(
            "patience",
            "validation data to watch",
            "no validation data",
            "early stopping (patience) needs validation data: give Runner::train some (Sequences::split holds some out)",
        )));
    }
    if options.resume && options.checkpoint.is_none() {
        return Err(Error::BadInput(BadInput::of(
            "resume",
            "a checkpoint file to resume from",
            "no checkpoint",
            "resume continues from FitOptions::checkpoint: give the file",
        )));
    }
    Ok(())
}

/// What decides the data's order and so must match on resume: batch, order, seed, and
/// the training data's size and lengths.
fn loop_settings(data: &Sequences, options: &FitOptions) -> String {
    let steps: u64 = data.lengths().iter().map(|&l| l as u64).sum();
    format!(
        "batch {}, order {}, seed {}, {} sequences of {steps} steps",
        options.batch,
        options.order.name(),
        options.seed,
        data.len()
    )
}
