//! The optimizer, clipping and schedule settings as one flat struct whose fields are
//! named as the command-line flags (`--clip-norm` is `clip_norm`), so the command line
//! and the model description's `[training]` table fill the same struct and get the same
//! checks. [`OptimSettings::validate`] names the key of the first bad value;
//! [`OptimSettings::build`] turns valid settings into an [`OptimConfig`].

use std::fmt;

use super::schedule::{Decay, Schedule};
use super::{AdamConfig, Clip, OptimConfig, Optimizer, SgdConfig};

/// The optimizers by name.
pub const OPTIMIZERS: [&str; 3] = ["adam", "adamw", "sgd"];
/// The schedules by name.
pub const SCHEDULES: [&str; 5] = ["none", "step", "exponential", "cosine", "plateau"];

/// A setting with a bad value: `key` is its snake_case name (the flag is
/// [`InvalidSetting::flag`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidSetting {
    pub key: &'static str,
    pub message: String,
}

impl fmt::Display for InvalidSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {}", self.key, self.message)
    }
}

impl std::error::Error for InvalidSetting {}

impl InvalidSetting {
    /// The command-line flag of the key: `--clip-norm` for `clip_norm`.
    pub fn flag(&self) -> String {
        format!("--{}", self.key.replace('_', "-"))
    }
}

/// Everything about how parameters are updated, as flags and keys. `None` takes
/// PyTorch's default for the chosen optimizer or schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct OptimSettings {
    /// `adam`, `adamw` or `sgd`.
    pub optimizer: String,
    pub lr: f32,
    /// SGD's momentum (0 ≤ m < 1).
    pub momentum: f32,
    /// SGD's Nesterov momentum (needs momentum > 0).
    pub nesterov: bool,
    /// Adam, SGD: L2 term; AdamW: decoupled decay (default 0.01; others 0).
    pub weight_decay: Option<f32>,
    /// Clip the global gradient norm to this.
    pub clip_norm: Option<f32>,
    /// Clip every gradient element to ±this.
    pub clip_value: Option<f32>,
    /// `none`, `step`, `exponential`, `cosine` or `plateau`.
    pub schedule: String,
    /// Step: decay every this many steps.
    pub step_size: Option<u64>,
    /// Step, exponential: the decay factor (step 0.1, exponential required).
    pub gamma: Option<f64>,
    /// Cosine: the half period in steps (default: the run's steps after warm-up).
    pub t_max: Option<u64>,
    /// Cosine: the lowest learning rate (0).
    pub eta_min: f64,
    /// Plateau: the reduction factor (0.1).
    pub factor: f64,
    /// Plateau: observations without improvement before reducing (10).
    pub patience: u64,
    /// Plateau: relative improvement that counts (1e-4).
    pub threshold: f64,
    /// Plateau: observations to wait after a reduction (0).
    pub cooldown: u64,
    /// Plateau: the lowest learning rate (0).
    pub min_lr: f64,
    /// Steps of linear warm-up before the schedule (0).
    pub warmup_steps: u64,
    /// The warm-up's first factor of the learning rate (1/3, as `LinearLR`).
    pub warmup_start_factor: f64,
}

impl Default for OptimSettings {
    fn default() -> Self {
        OptimSettings {
            optimizer: "adam".into(),
            lr: 1e-3,
            momentum: 0.0,
            nesterov: false,
            weight_decay: None,
            clip_norm: None,
            clip_value: None,
            schedule: "none".into(),
            step_size: None,
            gamma: None,
            t_max: None,
            eta_min: 0.0,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            warmup_steps: 0,
            warmup_start_factor: 1.0 / 3.0,
        }
    }
}

fn bad(key: &'static str, message: impl Into<String>) -> InvalidSetting {
    InvalidSetting {
        key,
        message: message.into(),
    }
}

fn positive(key: &'static str, v: Option<f32>) -> Result<(), InvalidSetting> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => {
            Err(bad(key, format!("must be a positive number, got {x}")))
        }
        _ => Ok(()),
    }
}

impl OptimSettings {
    /// Checks every value; `steps` is the run's length in optimizer steps, when known.
    pub fn validate(&self, steps: Option<u64>) -> Result<(), InvalidSetting> {
        if !OPTIMIZERS.contains(&self.optimizer.as_str()) {
            let msg = format!(
                "is `{}`; expected one of {}",
                self.optimizer,
                OPTIMIZERS.join(", ")
            );
            return Err(bad("optimizer", msg));
        }
        positive("lr", Some(self.lr))?;
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(bad(
                "momentum",
                format!("must be in [0, 1), got {}", self.momentum),
            ));
        }
        let sgd = self.optimizer == "sgd";
        if self.momentum > 0.0 && !sgd {
            return Err(bad("momentum", "applies to --optimizer sgd only"));
        }
        if self.nesterov && (!sgd || self.momentum == 0.0) {
            return Err(bad(
                "nesterov",
                "needs --optimizer sgd with a --momentum above 0",
            ));
        }
        match self.weight_decay {
            Some(w) if !(w.is_finite() && w >= 0.0) => {
                return Err(bad("weight_decay", format!("must be 0 or more, got {w}")))
            }
            _ => {}
        }
        positive("clip_norm", self.clip_norm)?;
        positive("clip_value", self.clip_value)?;
        if !SCHEDULES.contains(&self.schedule.as_str()) {
            let msg = format!(
                "is `{}`; expected one of {}",
                self.schedule,
                SCHEDULES.join(", ")
            );
            return Err(bad("schedule", msg));
        }
        if let Some(n) = steps {
            if self.warmup_steps > n {
                let msg = format!("is {} but the run has {n} steps", self.warmup_steps);
                return Err(bad("warmup_steps", msg));
            }
        }
        if !(self.warmup_start_factor > 0.0 && self.warmup_start_factor <= 1.0) {
            let msg = format!("must be in (0, 1], got {}", self.warmup_start_factor);
            return Err(bad("warmup_start_factor", msg));
        }
        self.decay(steps).map(|_| ())
    }

    /// The schedule's decay, checking its parameters.
    fn decay(&self, steps: Option<u64>) -> Result<Decay, InvalidSetting> {
        let gamma = |default: Option<f64>| -> Result<f64, InvalidSetting> {
            match self.gamma.or(default) {
                Some(g) if g > 0.0 && g.is_finite() => Ok(g),
                Some(g) => Err(bad("gamma", format!("must be a positive number, got {g}"))),
                None => Err(bad(
                    "gamma",
                    format!("is required by --schedule {}", self.schedule),
                )),
            }
        };
        Ok(match self.schedule.as_str() {
            "step" => Decay::Step {
                step_size: match self.step_size {
                    Some(s) if s > 0 => s,
                    _ => {
                        return Err(bad(
                            "step_size",
                            "must be given, 1 or more, with --schedule step",
                        ))
                    }
                },
                gamma: gamma(Some(0.1))?,
            },
            "exponential" => Decay::Exponential {
                gamma: gamma(None)?,
            },
            "cosine" => {
                let after_warmup = steps.map(|n| n.saturating_sub(self.warmup_steps));
                let t_max = match self.t_max.or(after_warmup) {
                    Some(t) if t > 0 => t,
                    _ => {
                        return Err(bad(
                            "t_max",
                            "must be given, 1 or more, with --schedule cosine",
                        ))
                    }
                };
                if !(self.eta_min >= 0.0 && self.eta_min < self.lr as f64) {
                    return Err(bad(
                        "eta_min",
                        format!("must be in [0, lr), got {}", self.eta_min),
                    ));
                }
                Decay::Cosine {
                    t_max,
                    eta_min: self.eta_min,
                }
            }
            "plateau" => {
                if !(self.factor > 0.0 && self.factor < 1.0) {
                    return Err(bad(
                        "factor",
                        format!("must be in (0, 1), got {}", self.factor),
                    ));
                }
                if !(self.threshold >= 0.0 && self.threshold.is_finite()) {
                    return Err(bad(
                        "threshold",
                        format!("must be 0 or more, got {}", self.threshold),
                    ));
                }
                if !(self.min_lr >= 0.0 && self.min_lr.is_finite()) {
                    return Err(bad(
                        "min_lr",
                        format!("must be 0 or more, got {}", self.min_lr),
                    ));
                }
                Decay::Plateau {
                    factor: self.factor,
                    patience: self.patience,
                    threshold: self.threshold,
                    cooldown: self.cooldown,
                    min_lr: self.min_lr,
                }
            }
            _ => Decay::None,
        })
    }

    /// The configuration these settings describe, after [`OptimSettings::validate`].
    pub fn build(&self, steps: Option<u64>) -> Result<OptimConfig, InvalidSetting> {
        self.validate(steps)?;
        let adam = |defaults: AdamConfig| AdamConfig {
            lr: self.lr,
            weight_decay: self.weight_decay.unwrap_or(defaults.weight_decay),
            ..defaults
        };
        let optimizer = match self.optimizer.as_str() {
            "adamw" => Optimizer::AdamW(adam(AdamConfig::adamw())),
            "sgd" => Optimizer::Sgd(SgdConfig {
                lr: self.lr,
                momentum: self.momentum,
                nesterov: self.nesterov,
                weight_decay: self.weight_decay.unwrap_or(0.0),
                ..SgdConfig::default()
            }),
            _ => Optimizer::Adam(adam(AdamConfig::default())),
        };
        Ok(OptimConfig {
            optimizer,
            clip: Clip {
                max_norm: self.clip_norm,
                value: self.clip_value,
            },
            schedule: Schedule {
                warmup_steps: self.warmup_steps,
                warmup_start_factor: self.warmup_start_factor,
                decay: self.decay(steps)?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bad_value_is_reported_under_its_own_key() {
        let with = |f: &dyn Fn(&mut OptimSettings)| {
            let mut s = OptimSettings::default();
            f(&mut s);
            s
        };
        // SGD with the given momentum and Nesterov setting.
        let sgd = |momentum: f32, nesterov: bool| OptimSettings {
            optimizer: "sgd".into(),
            momentum,
            nesterov,
            ..OptimSettings::default()
        };
        let cases: [(OptimSettings, &str); 10] = [
            (with(&|s| s.clip_norm = Some(-1.0)), "clip_norm"),
            (with(&|s| s.clip_value = Some(0.0)), "clip_value"),
            (sgd(1.0, false), "momentum"),
            (sgd(-0.1, false), "momentum"),
            (sgd(0.0, true), "nesterov"),
            (with(&|s| s.schedule = "linear".into()), "schedule"),
            (with(&|s| s.warmup_steps = 11), "warmup_steps"),
            (with(&|s| s.lr = 0.0), "lr"),
            (with(&|s| s.optimizer = "lbfgs".into()), "optimizer"),
            (with(&|s| s.schedule = "exponential".into()), "gamma"),
        ];
        for (s, key) in cases {
            assert_eq!(s.validate(Some(10)).unwrap_err().key, key, "{s:?}");
        }
        let e = with(&|s| s.clip_norm = Some(-1.0))
            .validate(None)
            .unwrap_err();
        assert_eq!(e.flag(), "--clip-norm");
        assert!(e.to_string().contains("-1"), "{e}");
    }

    #[test]
    fn defaults_follow_pytorch_per_optimizer() {
        let build = |o: &str| {
            let s = OptimSettings {
                optimizer: o.into(),
                ..OptimSettings::default()
            };
            s.build(Some(10)).unwrap().optimizer
        };
        assert!(matches!(build("adam"), Optimizer::Adam(a) if a.weight_decay == 0.0));
        assert!(matches!(build("adamw"), Optimizer::AdamW(a) if a.weight_decay == 0.01));
        assert!(matches!(build("sgd"), Optimizer::Sgd(s) if s.momentum == 0.0));
        let cosine = OptimSettings {
            schedule: "cosine".into(),
            warmup_steps: 3,
            ..OptimSettings::default()
        };
        let c = cosine.build(Some(10)).unwrap().schedule;
        assert_eq!(
            c.decay,
            Decay::Cosine {
                t_max: 7,
                eta_min: 0.0
            }
        );
    }
}
