//! Gradient clipping in the training graph, before the optimizer's update: by global
//! norm (`torch.nn.utils.clip_grad_norm_`) and by value (`clip_grad_value_`).
//!
//! By norm: one `SumSquares` per gradient, their sum, and one `ClipGrad` per gradient
//! reading that sum, so the norm never leaves the device inside a step; the runner reads
//! the squared norm after the step to report it, as `clip_grad_norm_` returns it. When
//! both are set, the norm is clipped first, then the values.

use tensorfit_core::args::{BinaryInputs, ClipGradInputs, FillInputs, SumSquaresInputs};
use tensorfit_core::{BinaryOp, Error, Graph, Op, Result, Shape, TensorId};

/// Which clipping applies; `None` is off.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Clip {
    /// The largest global 2-norm of all gradients together.
    pub max_norm: Option<f32>,
    /// The largest absolute value of any gradient element.
    pub value: Option<f32>,
}

impl Clip {
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [("norm", self.max_norm), ("value", self.value)] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(Error::input(format!(
                        "the gradient clipping {what} must be a positive number, got {v}"
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn is_off(&self) -> bool {
        self.max_norm.is_none() && self.value.is_none()
    }

    /// The clipped gradients (`grads` itself when off) and, when clipping by norm, the
    /// squared global norm `[1]`.
    pub fn append(
        &self,
        g: &mut Graph,
        params: &[(String, TensorId)],
        grads: &[TensorId],
    ) -> Result<(Vec<TensorId>, Option<TensorId>)> {
        if self.is_off() {
            return Ok((grads.to_vec(), None));
        }
        let total_sq = match self.max_norm {
            Some(_) => {
                let mut total: Option<TensorId> = None;
                for ((name, _), &x) in params.iter().zip(grads) {
                    let sq = g
                        .apply(
                            &format!("clip.sq.{name}"),
                            Op::SumSquares,
                            SumSquaresInputs { x },
                        )?
                        .total;
                    total = Some(match total {
                        None => sq,
                        Some(a) => {
                            let add = Op::Binary(BinaryOp::Add);
                            g.apply(&format!("clip.sum.{name}"), add, BinaryInputs { a, b: sq })?
                                .out
                        }
                    });
                }
                total
            }
            None => None,
        };
        let factor_input = match total_sq {
            Some(t) => t,
            None => {
                let zero = Op::Fill {
                    value: 0.0,
                    shape: Shape::from([1]),
                };
                g.apply("clip.no_norm", zero, FillInputs::default())?.out
            }
        };
        let op = Op::ClipGrad {
            max_norm: self.max_norm.unwrap_or(f32::INFINITY),
            value: self.value.unwrap_or(f32::INFINITY),
        };
        let clipped = params
            .iter()
            .zip(grads)
            .map(|((name, _), &x)| {
                let inputs = ClipGradInputs {
                    x,
                    total_sq: factor_input,
                };
                Ok(g.apply(&format!("clip.{name}"), op.clone(), inputs)?.y)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((clipped, total_sq))
    }
}
