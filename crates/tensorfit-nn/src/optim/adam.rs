//! Adam and AdamW with PyTorch's formulas and defaults, as update nodes in the training
//! graph.
//!
//! The per-step bias corrections (and AdamW's decay factor `1 - lr·weight_decay`) are
//! computed on the host in f64 (as PyTorch does in Python floats) and written to a
//! three-element `adam.scalars` input each step, so one graph serves every step and the
//! device never waits on the host inside a step.

use tensorfit_core::args::{AdamInputs, AdamTargets};
use tensorfit_core::{AdamParams, Error, Graph, Op, Result, TensorId};

/// Adam's (and AdamW's) hyperparameters. `Default` is PyTorch's `torch.optim.Adam()`;
/// [`AdamConfig::adamw`] is `torch.optim.AdamW()`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConfig {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// Adam: L2 penalty added to the gradient; AdamW: the decoupled decay rate.
    pub weight_decay: f32,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

impl AdamConfig {
    /// PyTorch's `torch.optim.AdamW()` defaults: Adam's, with weight decay 0.01.
    pub fn adamw() -> Self {
        AdamConfig {
            weight_decay: 0.01,
            ..AdamConfig::default()
        }
    }

    pub fn validate(&self) -> Result<()> {
        let ok = self.lr.is_finite()
            && self.lr > 0.0
            && (0.0..1.0).contains(&self.beta1)
            && (0.0..1.0).contains(&self.beta2)
            && self.eps.is_finite()
            && self.eps > 0.0
            && self.weight_decay.is_finite()
            && self.weight_decay >= 0.0;
        if ok {
            Ok(())
        } else {
            Err(Error::input(format!(
                "invalid Adam settings {self:?}: need lr > 0, 0 <= betas < 1, eps > 0, weight_decay >= 0"
            )))
        }
    }

    /// The `adam.scalars` values for step `t` (1-based) at learning rate `lr`:
    /// `lr / (1 - β1^t)`, `sqrt(1 - β2^t)` and `1 - lr · decoupled_decay`.
    pub fn scalars(&self, t: u64, lr: f64, decoupled_decay: f32) -> [f32; 3] {
        let t = t.min(i32::MAX as u64) as i32;
        let bc1 = 1.0 - (self.beta1 as f64).powi(t);
        let bc2 = 1.0 - (self.beta2 as f64).powi(t);
        let decay = 1.0 - lr * decoupled_decay as f64;
        [(lr / bc1) as f32, bc2.sqrt() as f32, decay as f32]
    }

    /// Adds the Adam update of parameter `name` (`param`, by `grad`, with the step's
    /// `adam.scalars` input `scalars`), its (m, v) state tensors named `adam.m.<name>` and
    /// `adam.v.<name>`. With `decoupled` (AdamW) the weight decay is the scalars' third
    /// value rather than an L2 term.
    pub fn append_update(
        &self,
        g: &mut Graph,
        (name, param, grad): (&str, TensorId, TensorId),
        scalars: TensorId,
        decoupled: bool,
    ) -> Result<()> {
        let op = Op::Adam(AdamParams {
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: if decoupled { 0.0 } else { self.weight_decay },
        });
        let shape = g.shape(param).clone();
        let mut state = |s: &str| g.state(&format!("{s}.{name}"), shape.clone());
        let (m, v) = (state(super::ADAM_STATES[0]), state(super::ADAM_STATES[1]));
        g.update(
            &format!("adam.{name}"),
            op,
            AdamInputs { grad, scalars },
            AdamTargets { param, m, v },
        )?;
        Ok(())
    }
}
