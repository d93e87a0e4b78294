//! Optimizers, gradient clipping and learning-rate schedules, as PyTorch users know them.
//!
//! [`OptimConfig`] is what a training program is built with: the [`Optimizer`] (Adam,
//! AdamW, SGD; each appends its update nodes and names its state tensors, so the planner
//! counts them), the [`Clip`] applied to the gradients first (on the device, in the same
//! graph), and the learning-rate [`Schedule`], which the host evaluates each step and
//! folds into the optimizer's scalars. [`OptimSettings`] is the flat, validated form the
//! command line and the model description's `[training]` table fill.

pub mod adam;
pub mod clip;
mod persist;
pub mod schedule;
pub mod settings;
pub mod sgd;

use tensorfit_core::{Graph, Result, TensorId};

pub use adam::AdamConfig;
pub use clip::Clip;
pub use schedule::{Schedule, ScheduleState};
pub use settings::{InvalidSetting, OptimSettings};
pub use sgd::SgdConfig;

/// The names of Adam's (and AdamW's) state tensors, before `.<parameter>`.
pub const ADAM_STATES: &[&str] = &["adam.m", "adam.v"];
/// The name of SGD's state tensor, before `.<parameter>`.
pub const SGD_STATES: &[&str] = &["sgd.momentum"];

/// Which optimizer, with its hyperparameters. Each `Default` is PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Optimizer {
    /// `torch.optim.Adam` (`weight_decay` is an L2 term added to the gradient).
    Adam(AdamConfig),
    /// `torch.optim.AdamW` (`weight_decay` is decoupled: the weight shrinks by
    /// `lr · weight_decay` each step; PyTorch's default 0.01).
    AdamW(AdamConfig),
    /// `torch.optim.SGD` with momentum, dampening and Nesterov.
    Sgd(SgdConfig),
}

impl Default for Optimizer {
    fn default() -> Self {
        Optimizer::Adam(AdamConfig::default())
    }
}

impl Optimizer {
    /// The name the command line and the checkpoint use: `adam`, `adamw`, `sgd`.
    pub fn name(&self) -> &'static str {
        match self {
            Optimizer::Adam(_) => "adam",
            Optimizer::AdamW(_) => "adamw",
            Optimizer::Sgd(_) => "sgd",
        }
    }

    /// The base learning rate (before any schedule).
    pub fn lr(&self) -> f32 {
        match self {
            Optimizer::Adam(a) | Optimizer::AdamW(a) => a.lr,
            Optimizer::Sgd(s) => s.lr,
        }
    }

    pub fn validate(&self) -> Result<()> {
        match self {
            Optimizer::Adam(a) | Optimizer::AdamW(a) => a.validate(),
            Optimizer::Sgd(s) => s.validate(),
        }
    }

    /// The names of the state tensors of parameter `param` (`adam.m.<param>`, ...).
    pub fn state_names(&self, param: &str) -> Vec<String> {
        let states = match self {
            Optimizer::Adam(_) | Optimizer::AdamW(_) => ADAM_STATES,
            Optimizer::Sgd(_) => SGD_STATES,
        };
        states.iter().map(|s| format!("{s}.{param}")).collect()
    }

    /// The host scalars of step `t` (1-based) at learning rate `lr`.
    pub fn scalars(&self, t: u64, lr: f64) -> Vec<f32> {
        match self {
            Optimizer::Adam(a) => a.scalars(t, lr, 0.0).to_vec(),
            Optimizer::AdamW(a) => a.scalars(t, lr, a.weight_decay).to_vec(),
            Optimizer::Sgd(s) => s.scalars(t, lr).to_vec(),
        }
    }

    /// Adds the scalars input (`adam.scalars` `[3]` or `sgd.scalars` `[2]`, written each
    /// step with [`Optimizer::scalars`]) and one update per parameter (gradients in
    /// `params` order); returns the scalars input.
    pub fn append_updates(
        &self,
        g: &mut Graph,
        params: &[(String, TensorId)],
        grads: &[TensorId],
    ) -> Result<TensorId> {
        let scalars = match self {
            Optimizer::Adam(_) | Optimizer::AdamW(_) => g.input("adam.scalars", [3]),
            Optimizer::Sgd(_) => g.input("sgd.scalars", [2]),
        };
        for ((name, p), &grad) in params.iter().zip(grads) {
            let update = (name.as_str(), *p, grad);
            match self {
                Optimizer::Adam(a) => a.append_update(g, update, scalars, false)?,
                Optimizer::AdamW(a) => a.append_update(g, update, scalars, true)?,
                Optimizer::Sgd(s) => s.append_update(g, update, scalars)?,
            }
        }
        Ok(scalars)
    }
}

/// How the parameters are updated: optimizer, clipping, schedule.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OptimConfig {
    pub optimizer: Optimizer,
    pub clip: Clip,
    pub schedule: Schedule,
}

/// The tensors of a training program's update the runner writes or reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateIds {
    /// The optimizer's host scalars, written each step.
    pub scalars: TensorId,
    /// The squared global gradient norm `[1]`, with clipping by norm.
    pub grad_norm_sq: Option<TensorId>,
    /// The gradients the optimizer reads: clipped, or the given ones.
    pub grads: Vec<TensorId>,
}

impl OptimConfig {
    /// With Adam at learning rate `lr` and nothing else: what tensorfit did before.
    pub fn adam(lr: f32) -> Self {
        OptimConfig {
            optimizer: Optimizer::Adam(AdamConfig {
                lr,
                ..AdamConfig::default()
            }),
            ..OptimConfig::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.optimizer.validate()?;
        self.clip.validate()?;
        self.schedule.validate()
    }

    /// Appends the clipping of `grads` and the optimizer's updates of `params`.
    pub fn append(
        &self,
        g: &mut Graph,
        params: &[(String, TensorId)],
        grads: &[TensorId],
    ) -> Result<UpdateIds> {
        let (grads, grad_norm_sq) = self.clip.append(g, params, grads)?;
        let scalars = self.optimizer.append_updates(g, params, &grads)?;
        Ok(UpdateIds {
            scalars,
            grad_norm_sq,
            grads,
        })
    }
}
