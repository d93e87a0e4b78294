//! The optimizer ops' attributes and shape rules ([`Op::Adam`], [`Op::Sgd`],
//! [`Op::SumSquares`], [`Op::ClipGrad`]), kept beside
//! `op.rs` so that file stays small.

use crate::args::{
    AdamInputs, AdamTargets, Args, ClipGradInputs, ClipGradOutputs, SgdInputs, SgdTargets,
    SumSquaresInputs, SumSquaresOutputs,
};
use crate::op::{same, Op};
use crate::op_shapes::named;
use crate::shape::Shape;

/// The constant hyper-parameters of [`Op::Adam`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamParams {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// L2 penalty added to the gradient (PyTorch's `Adam`; AdamW's decoupled decay is a
    /// host scalar instead, since it scales with the learning rate).
    pub weight_decay: f32,
}

/// The constant hyper-parameters of [`Op::Sgd`] (the learning rate and dampening arrive
/// as host scalars each step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdParams {
    pub momentum: f32,
    pub nesterov: bool,
    pub weight_decay: f32,
}

/// [`Op::infer_shapes`] for [`Op::Adam`], [`Op::Sgd`], [`Op::SumSquares`] and
/// [`Op::ClipGrad`].
pub(crate) fn optim_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    let one = Shape::from([1]);
    match op {
        Op::Adam(_) => {
            let AdamInputs { grad, scalars } = named(list)?;
            same(scalars, &Shape::from([3]), "scalars")?;
            let targets = AdamTargets {
                param: grad.clone(),
                m: grad.clone(),
                v: grad.clone(),
            };
            Ok(targets.into_vec())
        }
        Op::Sgd(_) => {
            let SgdInputs { grad, scalars } = named(list)?;
            same(scalars, &Shape::from([2]), "scalars")?;
            let targets = SgdTargets {
                param: grad.clone(),
                buf: grad.clone(),
            };
            Ok(targets.into_vec())
        }
        Op::SumSquares => {
            let SumSquaresInputs { x: _ } = named(list)?;
            Ok(SumSquaresOutputs { total: one }.into_vec())
        }
        Op::ClipGrad { .. } => {
            let ClipGradInputs { x, total_sq } = named(list)?;
            same(total_sq, &one, "total_sq")?;
            Ok(ClipGradOutputs { y: x.clone() }.into_vec())
        }
        other => Err(format!("{} is not an optimizer op", other.name())),
    }
}
