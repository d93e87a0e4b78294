//! The optimizer, clipping and schedule flags of `tensorfit train`, filling
//! [`OptimSettings`] (whose field names are these flags in snake_case, as the model
//! description's `[training]` keys are).

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Command};
use tensorfit::nn::optim::schedule::Decay;
use tensorfit::nn::optim::OptimConfig;
use tensorfit::nn::{Checkpoint, OptimSettings};

use super::train_settings;

#[derive(Args, Clone, Debug)]
pub struct OptimArgs {
    /// Optimizer: adam (torch.optim.Adam), adamw (decoupled weight decay, default 0.01)
    /// or sgd (momentum, dampening 0, optional Nesterov).
    #[arg(long, default_value = "adam")]
    pub optimizer: String,
    /// SGD's momentum, in [0, 1).
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    pub momentum: f32,
    /// SGD's Nesterov momentum (needs --momentum above 0).
    #[arg(long)]
    pub nesterov: bool,
    /// Weight decay: an L2 term for adam and sgd (default 0), decoupled for adamw
    /// (default 0.01).
    #[arg(long, allow_negative_numbers = true)]
    pub weight_decay: Option<f32>,
    /// Clip the global 2-norm of all gradients to this (clip_grad_norm_); the norm
    /// before clipping is reported each step.
    #[arg(long, allow_negative_numbers = true)]
    pub clip_norm: Option<f32>,
    /// Clip every gradient element to ±this (clip_grad_value_; after --clip-norm).
    #[arg(long, allow_negative_numbers = true)]
    pub clip_value: Option<f32>,
    /// Learning-rate schedule, stepped every optimizer step: none, step (--step-size,
    /// --gamma 0.1), exponential (--gamma), cosine (--t-max, default the steps after
    /// warm-up; --eta-min) or plateau (reduced on the held-out loss at each evaluation:
    /// --factor, --patience, --threshold, --cooldown, --min-lr).
    #[arg(long, default_value = "none")]
    pub schedule: String,
    /// step: decay every this many steps.
    #[arg(long)]
    pub step_size: Option<u64>,
    /// step, exponential: the decay factor.
    #[arg(long, allow_negative_numbers = true)]
    pub gamma: Option<f64>,
    /// cosine: half period in steps.
    #[arg(long)]
    pub t_max: Option<u64>,
    /// cosine: the lowest learning rate.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    pub eta_min: f64,
    /// plateau: factor the learning rate is multiplied by.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.1)]
    pub factor: f64,
    /// plateau: evaluations without improvement before a reduction.
    #[arg(long, default_value_t = 10)]
    pub patience: u64,
    /// plateau: relative improvement that counts.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1e-4)]
    pub threshold: f64,
    /// plateau: evaluations to wait after a reduction.
    #[arg(long, default_value_t = 0)]
    pub cooldown: u64,
    /// plateau: the lowest learning rate.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    pub min_lr: f64,
    /// Linear warm-up over this many steps before the schedule (LinearLR then the
    /// schedule, as SequentialLR).
    #[arg(long, default_value_t = 0)]
    pub warmup_steps: u64,
    /// The warm-up's first learning-rate factor, in (0, 1].
    #[arg(long, allow_negative_numbers = true, default_value_t = 1.0 / 3.0)]
    pub warmup_start_factor: f64,
}

/// The schedule flags, each with the schedules that read it.
const SCHEDULE_FLAGS: [(&str, &[&str]); 9] = [
    ("step_size", &["step"]),
    ("gamma", &["step", "exponential"]),
    ("t_max", &["cosine"]),
    ("eta_min", &["cosine"]),
    ("factor", &["plateau"]),
    ("patience", &["plateau"]),
    ("threshold", &["plateau"]),
    ("cooldown", &["plateau"]),
    ("min_lr", &["plateau"]),
];

impl OptimArgs {
    /// Refuses a schedule flag typed (`given`) for a schedule that does not read it, as
    /// `--momentum` is refused without sgd: the run would silently go without it.
    pub fn refuse_unused(&self, given: &[String]) -> Result<()> {
        let typed = |id: &str| given.iter().any(|g| g == id);
        for (id, schedules) in SCHEDULE_FLAGS {
            if typed(id) && !schedules.contains(&self.schedule.as_str()) {
                bail!(
                    "--{} applies to --schedule {} only, and the schedule is {}",
                    id.replace('_', "-"),
                    schedules.join(" or "),
                    self.schedule
                );
            }
        }
        if typed("warmup_start_factor") && self.warmup_steps == 0 {
            bail!("--warmup-start-factor needs --warmup-steps above 0");
        }
        Ok(())
    }

    /// The settings with learning rate `lr`.
    pub fn settings(&self, lr: f32) -> OptimSettings {
        OptimSettings {
            optimizer: self.optimizer.clone(),
            lr,
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
            clip_norm: self.clip_norm,
            clip_value: self.clip_value,
            schedule: self.schedule.clone(),
            step_size: self.step_size,
            gamma: self.gamma,
            t_max: self.t_max,
            eta_min: self.eta_min,
            factor: self.factor,
            patience: self.patience,
            threshold: self.threshold,
            cooldown: self.cooldown,
            min_lr: self.min_lr,
            warmup_steps: self.warmup_steps,
            warmup_start_factor: self.warmup_start_factor,
        }
    }
}

/// Refuses the optimizer flags typed (`given`) for a resumed run with other values than
/// the run's own (`run`, stored in `path`; `lr` is the run's rate), naming each flag and
/// both values; the run's own value typed again is its own.
fn refuse_changes(
    a: &OptimArgs,
    given: &[String],
    (lr, run): (f32, &OptimSettings),
    path: &Path,
) -> Result<()> {
    let flags = OptimArgs::augment_args(Command::new("train"));
    let switches: Vec<&str> = flags
        .get_arguments()
        .filter(|arg| !arg.get_action().takes_values())
        .map(|arg| arg.get_id().as_str())
        .collect();
    let shown = |id: &str, text: String| match (switches.contains(&id), text.as_str()) {
        // A switch is typed without a value.
        (true, "true") => String::new(),
        (true, _) => "off".to_string(),
        (false, "") => "none".to_string(),
        (false, _) => text,
    };
    let typed = a.settings(lr).texts();
    let values: Vec<(&str, String, String)> = typed
        .into_iter()
        .zip(run.texts())
        .filter(|((id, _), _)| flags.get_arguments().any(|arg| arg.get_id() == *id))
        .map(|((id, typed), (_, own))| (id, shown(id, typed), shown(id, own)))
        .collect();
    let what = "optimizer, clipping and schedule";
    train_settings::refuse_typed(given, &values, what, path)
}

/// This run's optimizer settings and configuration: a new run's from its flags (a run
/// of `last` steps); a resumed run's from its checkpoint, refusing typed optimizer flags
/// that differ from it.
/// The stored settings hold the cosine schedule's period as resolved at the start, so
/// that a resumed run (whose `last` differs) keeps it. `name` says how errors name a
/// setting (its flag, or the model file's key).
pub fn resolve(
    a: &OptimArgs,
    given: &[String],
    lr: f32,
    last: u64,
    resumed: Option<(&Path, &Checkpoint)>,
    name: impl Fn(&str) -> String,
) -> Result<(OptimSettings, OptimConfig)> {
    let stored = match resumed {
        Some((path, ck)) => OptimSettings::load(&ck.extra)?.map(|s| (path, s)),
        None => None,
    };
    let mut settings = match stored.clone() {
        Some((path, s)) => {
            refuse_changes(a, given, (lr, &s), path)?;
            s
        }
        None => a.settings(lr),
    };
    let optim = settings
        .build(Some(last))
        .map_err(|e| anyhow!("{} {}", name(e.key), e.message))?;
    if stored.is_none() {
        a.refuse_unused(given)?;
    }
    if let Decay::Cosine { t_max, .. } = optim.schedule.decay {
        settings.t_max = Some(t_max);
    }
    Ok((settings, optim))
}
