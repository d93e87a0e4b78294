//! `tensorfit train --data`: training from the user's files. Epochs of batches drawn from
//! the whole shuffled epoch (or grouped by length: `--batch-order`), each padded to its
//! longest sequence with the lengths passed on, read ahead on a background thread, on one
//! plan made for the bound every batch is within (`--batch` × the data's longest); validation every `--eval-every` steps and after every epoch; early stopping
//! (`--stop-patience`) with the checkpoint outputs holding the best model validated; one
//! JSON line per validation in `DIR/metrics.jsonl` (`--checkpoint-dir`) and on stdout with
//! `--json`, and the curves image beside it at the end; `--resume` from the latest state
//! (`fit_resume`).

use std::fs::File;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;
use tensorfit::checkpoint_dir::checkpoint_path;
use tensorfit::data::{epoch_seed, split, BatchOrder, DataIdentities, DataIdentity, Labels};
use tensorfit::distributed::Ranks;
use tensorfit::nn::{Checkpoint, Job, ModelDescription, RunSettings};
use tensorfit::{CarriedState, Runner};

use super::curves::{write_curves, CURVES_FILE};
use super::data_args::{data_figures, open_for, trainer_inputs, Files};
use super::data_vocab::TextVocab;
use super::files_eval::{validate, Validation};
use super::fit_lengths;
use super::fit_resume::{self, Position, LAST_FILE};
use super::fit_watch::Watch;
use super::interrupt::{Interrupts, Signal};
use super::optim_args;
use super::rank_agree;
use super::ranks;
use super::train::{open_checkpoint_dir, TrainArgs};
use super::{
    begin, claim_output, crossed, print_memory, request, summary, train_settings,
    updates_per_batch, Exit,
};

/// Flags of the built-in task that the data decides instead.
const TASK_FLAGS: [(&str, &str); 2] =
    [("seq_len", "the data's lengths"), ("eval_batch", "--batch")];

pub fn run(mut a: TrainArgs) -> Result<Exit> {
    for (id, instead) in TASK_FLAGS {
        if a.given.iter().any(|g| g == id) {
            bail!(
                "--{} is a flag of the built-in task; with --data use {instead}",
                id.replace('_', "-")
            );
        }
    }
    // --steps with --data: a budget of optimizer steps, as Lightning's max_steps.
    a.fit.max_steps = a.given.iter().any(|g| g == "steps").then_some(a.steps);
    let resumed = a.resume.as_deref().map(fit_resume::load).transpose()?;
    if let Some(r) = &resumed {
        // A resumed run keeps its settings: the data's order depends on them. A flag
        // typed with another value is refused, as for the built-in task.
        train_settings::keep_data_run(&mut a, r)?;
    }
    let (cfg, init, vocab) = match (&resumed, &a.fit.init) {
        (Some(r), _) => {
            let ck = &r.loaded.1;
            let vocab = TextVocab::load(&ck.extra).context("--resume")?;
            (ck.config.clone(), Some(ck.params.clone()), vocab)
        }
        (None, Some(p)) => {
            let path = checkpoint_path(p);
            let ck = Checkpoint::load(&path).context("--init")?;
            if a.given.iter().any(|g| g == "model") {
                let described = a.model.load()?.model;
                let advice = "drop --model to start from the checkpoint's";
                a.model.check_is(&described, &path, &ck.config, advice)?;
            }
            let vocab = TextVocab::load(&ck.extra).context("--init")?;
            (ck.config, Some(ck.params), vocab)
        }
        (None, None) => (described_for_data(&a)?, None, None),
    };
    let Some(files) = a
        .data
        .open(&cfg, Labels::Required, vocab.as_ref())
        .context("--data")?
    else {
        bail!("--data is missing");
    };
    // A text: each row of a batch reads a contiguous part of it, and the last
    // --val-fraction of it validates, so that validation's windows are streams too.
    let text_split = match (&files.text, &a.fit.val) {
        (Some((corpus, _)), None) => {
            Some(corpus.split(a.fit.val_fraction).context("--val-fraction")?)
        }
        _ => None,
    };
    // What the run reads, kept in its checkpoints: a resumed run refuses other data.
    let mut identities = DataIdentities {
        data: DataIdentity::of(&files.path, files.dataset().sequences).context("--data")?,
        val: None,
    };
    let (files, train, val) = match (&a.fit.val, text_split) {
        (Some(p), _) => {
            let settings = a.data.read_settings(&cfg);
            let v = open_for(p, &cfg, &settings, files.read_ahead, files.vocab.as_ref())
                .and_then(|v| {
                    identities.val = Some(DataIdentity::of(p, v.dataset().sequences)?);
                    v.whole_text(a.batch)
                })
                .context("--val")?;
            let v = Files {
                carry: files.carry,
                ..v
            };
            let files = files.whole_text(a.batch)?;
            let all: Vec<usize> = (0..v.dataset().sequences).collect();
            let order = v.order(&all, a.batch, None)?;
            let train = (0..files.dataset().sequences).collect();
            (files, train, Some(Validation { files: v, order }))
        }
        (None, Some((train_chars, val_chars))) => {
            let files = files.text_part(train_chars, a.batch).with_context(|| {
                format!(
                    "--val-fraction {} leaves too little of the text to train on (give a smaller --val-fraction or --max-seq-len)",
                    a.fit.val_fraction
                )
            })?;
            let v = (val_chars.1 > val_chars.0)
                .then(|| -> Result<Validation> {
                    let v = files.text_part(val_chars, a.batch).with_context(|| {
                        format!(
                            "--val-fraction {} holds out too little of the text for one window (give a larger --val-fraction, a smaller --max-seq-len, or --val FILE)",
                            a.fit.val_fraction
                        )
                    })?;
                    let all: Vec<usize> = (0..v.dataset().sequences).collect();
                    let order = v.order(&all, a.batch, None)?;
                    Ok(Validation { files: v, order })
                })
                .transpose()?;
            let train = (0..files.dataset().sequences).collect();
            (files, train, v)
        }
        (None, None) => {
            let n = files.dataset().sequences;
            let (train, val) = split(n, a.fit.val_fraction, a.seed).context("--val-fraction")?;
            let v = (!val.is_empty())
                .then(|| -> Result<Validation> {
                    let order = files.order(&val, a.batch, None)?;
                    Ok(Validation {
                        files: files.clone(),
                        order,
                    })
                })
                .transpose()?;
            (files, train, v)
        }
    };
    if let Some(r) = &resumed {
        fit_resume::check_data(r, &identities)?;
    }
    if a.fit.stop_patience.is_some() && val.is_none() {
        bail!("--stop-patience needs validation: a --val-fraction above 0, or --val");
    }
    let max_len = val
        .as_ref()
        .map_or(0, |v| v.files.dataset().max_len)
        .max(files.dataset().max_len);
    let start = resumed.as_ref().map_or(0, |r| r.loaded.1.step);
    let position = resumed.as_ref().map(|r| r.position).unwrap_or_default();
    let resumed_carried = match &resumed {
        Some(r) => CarriedState::load(&r.loaded.1.extra).context("--resume")?,
        None => None,
    };
    let mut settings = RunSettings {
        run_id: resumed
            .as_ref()
            .map_or_else(RunSettings::new_run_id, |r| r.settings.run_id.clone()),
        batch: a.batch,
        seq_len: max_len,
        tbptt: a.tbptt.unwrap_or(max_len),
        tbptt_mode: a.tbptt_mode,
        lr: a.lr,
        seed: a.seed,
        eval_every: a.eval_every,
        eval_batch: a.batch,
        data: Some(train_settings::data_settings(&a, &files.path)),
    };
    let epoch_order = |epoch: u64| {
        let seed = epoch_seed(a.seed, epoch);
        files.training_order(&train, a.batch, (a.fit.batch_order, seed))
    };
    let first = epoch_order(0)?;
    // A step is an optimizer update (a window's, in windowed truncated BPTT with a head on
    // every step), as checkpoints and schedules count them.
    let steps_per_epoch: u64 = first
        .iter()
        .map(|b| updates_per_batch(&cfg, &settings, files.shape(b).1))
        .sum();
    // A step budget without --epochs runs the epochs it needs; with both, the run ends
    // at whichever comes first (the epochs are kept in the run's settings).
    let epochs = match a.fit.max_steps {
        Some(n) if !a.given.iter().any(|g| g == "epochs") => n.div_ceil(steps_per_epoch.max(1)),
        _ => a.fit.epochs,
    };
    if let Some(d) = settings.data.as_mut() {
        d.epochs = epochs;
        d.max_steps = a.fit.max_steps;
    }
    fit_lengths::check(&cfg, &settings, &files, epochs, epoch_order)?;
    // Under mpirun, each rank reads its rows of every batch; only rank 0 prints and
    // writes files (the others run as --json does, their output skipped).
    let mut ranks = ranks::join(&a.ranks, a.batch)?;
    let root = ranks::is_root(&ranks);
    if !root {
        (a.json, a.save, a.checkpoint_dir) = (true, None, None);
    }
    let last = steps_per_epoch
        .saturating_mul(epochs)
        .min(a.fit.max_steps.unwrap_or(u64::MAX));
    let loaded = resumed.as_ref().map(|r| &r.loaded);
    let loaded_at = loaded.map(|(file, ck)| (file.as_path(), ck));
    let (optim_settings, optim) =
        optim_args::resolve(&a.optim, &a.given, a.lr, last, loaded_at, |id| a.origin(id))?;
    let eval_shape = val
        .as_ref()
        .and_then(|v| v.order.first().map(|b| v.files.shape(b)));
    // The run is planned once, for the bound every batch is within.
    let reading = ranks::reading_order(&ranks, first.clone()).0;
    let val_batches = val.as_ref().map(|v| (&v.files, &v.order[..]));
    let job = fit_lengths::bound(&files, &reading, max_len, val_batches);
    let params = match init {
        Some(p) => p,
        None => tensorfit::Model::new(cfg.clone(), a.seed)?.into_parameters(),
    };
    // Before any other collective, and before rank 0 writes anything.
    let run = rank_agree::Run {
        model: &cfg,
        params: &params,
        start,
        settings: &settings,
        optim: &optim_settings,
        task: rank_agree::Task::Files {
            data: &a.data,
            fit: &a.fit,
            identities: &identities,
            epoch: (first.len(), steps_per_epoch),
            first: (first.first().map(|b| files.shape(b)), eval_shape),
        },
    };
    rank_agree::agree(&mut ranks, &run)?;
    let _save_lock = a
        .save
        .as_deref()
        .map(|p| claim_output("--save", p))
        .transpose()?;
    let ck_dir = match root {
        true => open_checkpoint_dir(&a, loaded, &settings, start)?,
        false => None,
    };
    let metrics = match &ck_dir {
        Some(d) => {
            let path = d.dir().join("metrics.jsonl");
            // A resumed run adds to its metrics.
            let file = File::options()
                .create(true)
                .write(true)
                .append(resumed.is_some())
                .truncate(resumed.is_none())
                .open(&path)
                .with_context(|| format!("{}", path.display()))?;
            Some((path, file))
        }
        None => None,
    };
    let interrupts = Interrupts::install()?;
    let mut req = request(cfg.clone(), job, settings.tbptt, optim, &a.dev)?;
    req.tbptt_mode = a.tbptt_mode;
    req.seed = settings.seed;
    req.padded = files.padded || val.as_ref().is_some_and(|v| v.files.padded);
    req.carry_across = files.carry;
    req.data_parallel = ranks.as_ref().map(Ranks::data_parallel);
    // The validation reader starts while the training reader still holds its batches.
    req.read_ahead_bytes = files.read_ahead_bytes(a.batch, first.len()).saturating_add(
        val.as_ref()
            .map_or(0, |v| v.files.read_ahead_bytes(a.batch, v.order.len() + 1)),
    );
    let mut run = begin(&req, &params, a.json)?;
    ranks::choose_all_reduce(&mut ranks, &run, a.json)?;
    drop(params);
    if let Some((_, ck)) = loaded_at {
        run.restore_training(ck)?;
    }
    drop(resumed);

    // The state is read from the device once, then written to each of `paths`.
    let save = |run: &mut Runner,
                paths: &[PathBuf],
                at: Option<(Position, &CarriedState)>|
     -> Result<()> {
        // The run's host copy of the state (with the schedule's): no copy more while it
        // is written.
        let ck = run.state()?;
        if let Some((p, carried)) = at {
            p.store(&mut ck.extra);
            carried.store(&mut ck.extra);
        }
        settings.store(&mut ck.extra);
        identities.store(&mut ck.extra);
        optim_settings.store(&mut ck.extra);
        if let Some(v) = &files.vocab {
            v.store(&mut ck.extra);
        }
        for path in paths {
            ck.save(path)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    };
    let outputs: Vec<PathBuf> = ck_dir
        .as_ref()
        .map(|d| d.checkpoint_path())
        .into_iter()
        .chain(a.save.clone())
        .collect();
    let save_all = |run: &mut Runner| -> Result<()> { save(run, &outputs, None) };
    if !a.json {
        errln!(
            "training ({} parameters) on {}: {} sequences to train on, {} to validate on{}, batch {}, {} epochs of {steps_per_epoch} steps{}",
            cfg.trainable_parameters()?,
            files.path.display(),
            train.len(),
            val.as_ref().map_or(0, |v| v.order.iter().map(Vec::len).sum::<usize>()),
            match &a.fit.val {
                Some(p) => format!(", from {}", p.display()),
                None => String::new(),
            },
            a.batch,
            epochs,
            match (files.text.is_some(), files.carry, a.fit.batch_order, req.padded) {
                (true, true, ..) => ": each row a contiguous part of the text, starting from the state the row before it left",
                (true, false, ..) => ": each row a contiguous part of the text, every window from a zero state (--reset-state)",
                (false, _, BatchOrder::Shuffled, true) => ", batches shuffled and padded",
                (false, _, BatchOrder::Shuffled, false) => ", batches shuffled",
                (false, _, BatchOrder::LengthGrouped, true) => ", batches grouped by length and padded",
                (false, _, BatchOrder::LengthGrouped, false) => ", batches grouped by length",
            }
        );
    }
    // The latest state, to resume from.
    let last_file = ck_dir.as_ref().map(|d| d.dir().join(LAST_FILE));
    let save_last = |run: &mut Runner, at: Position, carried: &CarriedState| -> Result<()> {
        let at = Some((at, carried));
        match &last_file {
            Some(p) => save(run, std::slice::from_ref(p), at),
            None => Ok(()),
        }
    };
    let started = Instant::now();
    let mut step = start;
    // The step before the last batch: checkpoints and validations fall at each multiple
    // a batch passes.
    let mut before = start;
    let mut watch = Watch {
        loss_sum: position.loss_sum,
        loss_count: position.loss_count,
        best: position.best,
        since_best: position.since_best,
        patience: a.fit.stop_patience,
        // A run that stopped early (its latest state is past its patience) stays stopped.
        stopped_early: a
            .fit
            .stop_patience
            .is_some_and(|p| position.since_best >= p),
        last: None,
        metrics,
        json: a.json,
        quiet: !root,
        bar: None,
        started,
    };
    let mut interrupted: Option<Signal> = None;
    // The epoch of the next step and the batches of its order trained already.
    let mut at = (position.epoch, position.batches_done);
    // The state a text's batch starts from; a run resumed within an epoch continues from
    // the state it stopped in.
    let mut carried = CarriedState::new();
    let mut resumed_state = match position.batches_done {
        0 => None,
        _ => resumed_carried,
    };
    let first_epoch = match watch.stopped_early {
        true => epochs,
        false => position.epoch,
    };
    let budget_spent = |step: u64| a.fit.max_steps.is_some_and(|n| step >= n);
    'epochs: for epoch in first_epoch..epochs {
        if budget_spent(step) {
            break;
        }
        let mut order = if epoch == 0 {
            first.clone()
        } else {
            epoch_order(epoch)?
        };
        order.drain(..(at.1 as usize).min(order.len()));
        watch.start_epoch(epoch + 1, epochs, steps_per_epoch);
        let mut validated_at = None;
        let (order, parts) = ranks::reading_order(&ranks, order);
        let batches = files.batches(order)?;
        let buffers = batches.buffers();
        let mut within = false;
        for (k, batch) in batches.enumerate() {
            // The step budget ends the run within the epoch: it validates (below) and
            // its latest state resumes at the next batch.
            if budget_spent(step) {
                within = true;
                break;
            }
            // Ranks learn of a stop at a step's exchange and end after that step.
            let stop = interrupted.or_else(|| ranks::stop_before_step(&mut ranks, &interrupts));
            if let Some(signal) = stop {
                interrupted = Some(signal);
                break 'epochs;
            }
            if crossed(before, step, a.checkpoint_every) {
                let at = fit_resume::position_of(&watch, a.fit.val_fraction, at);
                if let Err(e) = save_last(&mut run, at, &carried) {
                    watch.say(&format!(
                        "warning: step {step}: {e:#}; training continues (the next checkpoint tries again)"
                    ));
                }
            }
            let batch = batch.with_context(|| format!("--data {}", files.path.display()))?;
            if !batch.continues {
                carried.reset();
            }
            if let Some(state) = resumed_state.take() {
                carried = state;
            }
            let (b, t) = (batch.size(), batch.steps);
            let inputs = trainer_inputs(batch)?;
            let eval = run.bound().parts().1;
            // Within the plan's bound: nothing to do (a shape outside it is planned again).
            let shape = Job::Train {
                batch: b,
                seq_len: t,
                eval,
            };
            for r in run.hold(shape)? {
                watch.say(&format!("note: step {}: {r}", step + 1));
            }
            let report = match files.carry {
                // A text's rows start from the state the batch before left (one process:
                // `TrainOptions::validate` refuses carrying across ranks).
                true => run
                    .train_batch_carrying(&inputs, &mut carried)
                    .map_err(anyhow::Error::from),
                false => {
                    let part = parts.as_ref().map(|p| &p[k]);
                    ranks::data_step(&mut run, &mut ranks, part, &inputs)
                }
            }
            .with_context(|| format!("training step {}", step + 1))?;
            buffers.give_back(inputs.x.data);
            interrupted = ranks::stop_after_step(&ranks);
            before = step;
            step += updates_per_batch(&cfg, &settings, t);
            at.1 += 1;
            watch.loss_sum += report.loss as f64;
            watch.loss_count += 1;
            if let Some(bar) = &watch.bar {
                bar.set_message(format!("loss {:.4}", report.loss));
                bar.inc(step - before);
            }
            if crossed(before, step, a.eval_every) {
                if let Some(v) = &val {
                    validated_at = Some(step);
                    let scores = validate(&mut run, v, &mut ranks)?;
                    if watch.validated(&mut run, scores, epoch + 1, step, &save_all)? {
                        break 'epochs;
                    }
                }
            }
        }
        if !within {
            at = (epoch + 1, 0);
        }
        // Every epoch ends with a validation (unless its last step just had one), and so
        // does a run at its step budget.
        match &val {
            Some(v) if validated_at != Some(step) => {
                let scores = validate(&mut run, v, &mut ranks)?;
                if watch.validated(&mut run, scores, epoch + 1, step, &save_all)? {
                    break;
                }
            }
            Some(_) => {}
            None if !within => watch.epoch_done(epoch + 1, epochs, step)?,
            None => {}
        }
    }
    if let Some(bar) = &watch.bar {
        bar.finish_and_clear();
    }
    let position_at_end = fit_resume::position_of(&watch, a.fit.val_fraction, at);
    // Without validation the outputs get the last state; with it they hold the best.
    let Watch {
        best,
        since_best,
        stopped_early,
        last: last_scores,
        metrics,
        ..
    } = watch;
    if best.is_none() && step > start {
        save_all(&mut run)?;
    }
    save_last(&mut run, position_at_end, &carried)?;
    let weights_hash = ranks::check_weights(&mut ranks, &mut run, step)?;
    let secs = started.elapsed().as_secs_f64();
    if !root {
        // Rank 0 reports for all.
    } else if a.json {
        let mut out = summary(&run);
        ranks::describe(&ranks, weights_hash, &mut out);
        out["steps"] = json!(step);
        out["best_val_loss"] = json!(best.map(|b| b.0));
        out["best_step"] = json!(best.map(|b| b.1));
        out["val_accuracy"] = json!(last_scores.map(|s| s.accuracy));
        out["stopped_early"] = json!(stopped_early);
        out["seconds"] = json!(secs);
        out["interrupted"] = json!(interrupted.map(Signal::name));
        outln!("{out}");
    } else {
        match (interrupted, stopped_early) {
            (Some(signal), _) => errln!("\nstopped by {} after step {step}", signal.name()),
            (None, true) => errln!(
                "stopped early after step {step}: {} validations without a lower loss",
                since_best
            ),
            (None, false) => errln!("done: {step} steps in {secs:.1} s"),
        }
        if let Some((loss, at)) = best {
            errln!("best validation loss {loss:.4} at step {at}");
        }
        print_memory(&run);
        for p in &outputs {
            errln!(
                "checkpoint written to {} ({})",
                p.display(),
                if best.is_some() {
                    "the best model validated"
                } else {
                    "the last step"
                }
            );
        }
        if let Some((p, _)) = &metrics {
            errln!("metrics of every validation in {}", p.display());
        }
    }
    if let Some((p, _)) = &metrics {
        let out = p.with_file_name(CURVES_FILE);
        let title = format!("{} on {}", a.model, files.path.display());
        match write_curves(p, &out, &title) {
            Ok(()) if !a.json => errln!("training and validation curves in {}", out.display()),
            Ok(()) => {}
            Err(e) => errln!("warning: no curves image: {e:#}"),
        }
    }
    ranks::finish(&mut ranks)?;
    Ok(interrupted.map_or(Exit::Success, Exit::Interrupted))
}

/// `--model` for a fresh run on `--data`: the figures it leaves to the data (`vocab =
/// "data"`, …) taken from what `--data` holds (read once more for them) and said.
fn described_for_data(a: &TrainArgs) -> Result<ModelDescription> {
    let mut file = a.model.load_leaving_to_data()?;
    let Some(path) = a.data.path().filter(|_| !file.from_data.is_empty()) else {
        return Ok(file.model);
    };
    let figures =
        data_figures(path, &file.model, a.data.max_seq_len, a.data.cut_long).context("--data")?;
    let keys: Vec<String> = file.from_data.iter().map(|p| p.key.clone()).collect();
    file.resolve(&figures)?;
    if !a.json {
        errln!(
            "{} from {}: {}",
            keys.join(", "),
            path.display(),
            file.model
        );
    }
    Ok(file.model)
}
