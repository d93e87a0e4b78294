//! Learning-rate schedules, stepped once per optimizer step, with PyTorch's formulas:
//! `StepLR`, `ExponentialLR`, `CosineAnnealingLR`, `ReduceLROnPlateau`, each optionally
//! after a linear warm-up (`LinearLR` from `start_factor` to 1 over `warmup_steps`, then
//! the schedule from its own step 0, as `SequentialLR` composes them).
//!
//! The host evaluates the schedule in f64 before each step and folds the learning rate
//! into the optimizer's scalars. Step `t` (1-based) uses PyTorch's `last_epoch = t - 1`.
//! Reduce-on-plateau is driven by [`ScheduleState::observe`], called with a validation
//! metric; during a warm-up its learning rate is scaled by the warm-up factor.

use tensorfit_core::{Error, Result};

/// The schedule after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Decay {
    /// A constant learning rate.
    #[default]
    None,
    /// `lr · gamma^⌊e / step_size⌋` (`StepLR`).
    Step { step_size: u64, gamma: f64 },
    /// `lr · gamma^e` (`ExponentialLR`).
    Exponential { gamma: f64 },
    /// `eta_min + (lr - eta_min)(1 + cos(π e / t_max)) / 2` (`CosineAnnealingLR`).
    Cosine { t_max: u64, eta_min: f64 },
    /// `ReduceLROnPlateau(mode="min", threshold_mode="rel")`.
    Plateau {
        factor: f64,
        patience: u64,
        threshold: f64,
        cooldown: u64,
        min_lr: f64,
    },
}

/// A warm-up and a decay.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Schedule {
    /// Steps of linear warm-up (0: none).
    pub warmup_steps: u64,
    /// The warm-up's first factor (`LinearLR`'s `start_factor`, PyTorch's default 1/3).
    pub warmup_start_factor: f64,
    pub decay: Decay,
}

impl Schedule {
    /// Checks the parameters ([`super::OptimSettings::validate`] names the bad key; this
    /// guards configurations built in code).
    pub fn validate(&self) -> Result<()> {
        let decay_ok = match self.decay {
            Decay::None => true,
            Decay::Step { step_size, gamma } => step_size > 0 && gamma > 0.0 && gamma.is_finite(),
            Decay::Exponential { gamma } => gamma > 0.0 && gamma.is_finite(),
            Decay::Cosine { t_max, eta_min } => t_max > 0 && eta_min >= 0.0,
            Decay::Plateau {
                factor,
                threshold,
                min_lr,
                ..
            } => factor > 0.0 && factor < 1.0 && threshold >= 0.0 && min_lr >= 0.0,
        };
        let f = self.warmup_start_factor;
        let warmup_ok = self.warmup_steps == 0 || (f > 0.0 && f <= 1.0);
        if decay_ok && warmup_ok {
            Ok(())
        } else {
            Err(Error::input(format!(
                "invalid learning-rate schedule {self:?}: need step_size, t_max >= 1, gamma > 0, 0 < factor < 1, eta_min, threshold, min_lr >= 0, 0 < warmup_start_factor <= 1"
            )))
        }
    }

    /// The warm-up's factor at PyTorch epoch `e` (1 after the warm-up).
    fn warmup_factor(&self, e: u64) -> f64 {
        if e >= self.warmup_steps {
            return 1.0;
        }
        let s = self.warmup_start_factor;
        s + (1.0 - s) * e as f64 / self.warmup_steps as f64
    }
}

/// What a schedule remembers between steps: reduce-on-plateau's learning rate, best
/// metric and counters (nothing changes for the others). Saved in checkpoints.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleState {
    /// Reduce-on-plateau's current learning rate (the base one for the others).
    pub plateau_lr: f64,
    pub best: f64,
    pub num_bad: u64,
    pub cooldown_left: u64,
}

impl ScheduleState {
    /// The state before the first step, at base learning rate `lr`.
    pub fn new(lr: f32) -> Self {
        ScheduleState {
            plateau_lr: lr as f64,
            best: f64::INFINITY,
            num_bad: 0,
            cooldown_left: 0,
        }
    }

    /// The learning rate of optimizer step `t` (1-based) from base rate `base`.
    pub fn lr(&self, s: &Schedule, base: f32, t: u64) -> f64 {
        let base = base as f64;
        let e = t.saturating_sub(1);
        let warm = s.warmup_factor(e);
        let d = e.saturating_sub(s.warmup_steps);
        let lr = match s.decay {
            Decay::None => base,
            Decay::Step { step_size, gamma } => base * powi(gamma, d / step_size),
            Decay::Exponential { gamma } => base * powi(gamma, d),
            Decay::Cosine { t_max, eta_min } => {
                let phase = std::f64::consts::PI * d as f64 / t_max as f64;
                eta_min + (base - eta_min) * (1.0 + phase.cos()) / 2.0
            }
            Decay::Plateau { .. } => self.plateau_lr,
        };
        if e < s.warmup_steps {
            // During the warm-up only the warm-up's factor applies (SequentialLR).
            let before = if matches!(s.decay, Decay::Plateau { .. }) {
                self.plateau_lr
            } else {
                base
            };
            return before * warm;
        }
        lr
    }

    /// Reduce-on-plateau's step with a validation metric (lower is better); nothing for
    /// the other schedules. Returns whether the learning rate was reduced.
    pub fn observe(&mut self, s: &Schedule, metric: f64) -> bool {
        let Decay::Plateau {
            factor,
            patience,
            threshold,
            cooldown,
            min_lr,
        } = s.decay
        else {
            return false;
        };
        if metric < self.best * (1.0 - threshold) {
            self.best = metric;
            self.num_bad = 0;
        } else {
            self.num_bad += 1;
        }
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            self.num_bad = 0;
        }
        if self.num_bad > patience {
            self.cooldown_left = cooldown;
            self.num_bad = 0;
            let new = (self.plateau_lr * factor).max(min_lr);
            // PyTorch's eps: changes smaller than 1e-8 are ignored.
            if self.plateau_lr - new > 1e-8 {
                self.plateau_lr = new;
                return true;
            }
        }
        false
    }
}

fn powi(x: f64, n: u64) -> f64 {
    x.powi(n.min(i32::MAX as u64) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warm_up_rises_linearly_then_hands_over_to_the_decay_at_its_own_step_zero() {
        let s = Schedule {
            warmup_steps: 4,
            warmup_start_factor: 0.25,
            decay: Decay::Step {
                step_size: 2,
                gamma: 0.5,
            },
        };
        let st = ScheduleState::new(1.0);
        let lrs: Vec<f64> = (1..=9).map(|t| st.lr(&s, 1.0, t)).collect();
        assert_eq!(lrs, [0.25, 0.4375, 0.625, 0.8125, 1.0, 1.0, 0.5, 0.5, 0.25]);
    }

    #[test]
    fn plateau_waits_for_patience_then_cools_down_and_stops_at_min_lr() {
        let s = Schedule {
            decay: Decay::Plateau {
                factor: 0.5,
                patience: 1,
                threshold: 1e-4,
                cooldown: 1,
                min_lr: 0.3,
            },
            ..Schedule::default()
        };
        let mut st = ScheduleState::new(1.0);
        let seen: Vec<bool> = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
            .iter()
            .map(|&m| st.observe(&s, m))
            .collect();
        assert_eq!(seen, [false, false, true, false, false, true, false, false]);
        assert_eq!(st.lr(&s, 1.0, 10), 0.3);
    }
}
