//! SGD with momentum, dampening and Nesterov, `torch.optim.SGD`'s formula, as update
//! nodes in the training graph.
//!
//! PyTorch starts the momentum buffer as the first gradient itself (not
//! `(1 - dampening)·g`); the host folds that into the gradient's weight, the second of
//! the `sgd.scalars` written each step (1 on the first step, `1 - dampening` after), so
//! one graph serves every step. The buffer starts at zero, so the first step's
//! `momentum·0 + 1·g` is PyTorch's initialisation exactly.

use tensorfit_core::args::{SgdInputs, SgdTargets};
use tensorfit_core::{Error, Graph, Op, Result, SgdParams, TensorId};

/// SGD's hyperparameters. `Default` is `torch.optim.SGD(lr=0.01)`'s (PyTorch requires
/// an lr; 0.01 is the conventional one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdConfig {
    pub lr: f32,
    pub momentum: f32,
    pub dampening: f32,
    pub nesterov: bool,
    /// L2 penalty added to the gradient.
    pub weight_decay: f32,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig {
            lr: 0.01,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }
}

impl SgdConfig {
    pub fn validate(&self) -> Result<()> {
        let ok = self.lr.is_finite()
            && self.lr > 0.0
            && (0.0..1.0).contains(&self.momentum)
            && (0.0..=1.0).contains(&self.dampening)
            && self.weight_decay.is_finite()
            && self.weight_decay >= 0.0;
        if !ok {
            return Err(Error::input(format!(
                "invalid SGD settings {self:?}: need lr > 0, 0 <= momentum < 1, 0 <= dampening <= 1, weight_decay >= 0"
            )));
        }
        if self.nesterov && (self.momentum == 0.0 || self.dampening != 0.0) {
            return Err(Error::input(
                "Nesterov momentum requires a momentum > 0 and zero dampening (as PyTorch)",
            ));
        }
        Ok(())
    }

    /// The `sgd.scalars` values for step `t` (1-based) at learning rate `lr`: `lr` and
    /// the gradient's weight in the buffer.
    pub fn scalars(&self, t: u64, lr: f64) -> [f32; 2] {
        let weight = if t <= 1 || self.momentum == 0.0 {
            1.0
        } else {
            1.0 - self.dampening
        };
        [lr as f32, weight]
    }

    /// Adds the SGD update of parameter `name` (`param`, by `grad`, with the step's
    /// `sgd.scalars` input `scalars`), its buffer named `sgd.momentum.<name>`. (Without
    /// momentum the buffer is still kept, holding the last gradient: one parameter-sized
    /// tensor that PyTorch does not allocate.)
    pub fn append_update(
        &self,
        g: &mut Graph,
        (name, param, grad): (&str, TensorId, TensorId),
        scalars: TensorId,
    ) -> Result<()> {
        let op = Op::Sgd(SgdParams {
            momentum: self.momentum,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
        });
        let shape = g.shape(param).clone();
        let buf = g.state(&format!("{}.{name}", super::SGD_STATES[0]), shape);
        g.update(
            &format!("sgd.{name}"),
            op,
            SgdInputs { grad, scalars },
            SgdTargets { param, buf },
        )?;
        Ok(())
    }
}
