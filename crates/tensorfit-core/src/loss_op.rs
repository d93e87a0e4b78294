//! The shape rules of the mean-squared-error ops ([`Op::MseLoss`],
//! [`Op::MseLossBackward`]), kept beside `op.rs` so that file stays small.

use crate::args::{
    Args, MseLossBackwardInputs, MseLossBackwardOutputs, MseLossInputs, MseLossOutputs,
};
use crate::op::{same, Op};
use crate::op_shapes::named;
use crate::shape::Shape;

/// [`Op::infer_shapes`] for [`Op::MseLoss`] and [`Op::MseLossBackward`]: `pred` of any
/// non-empty shape (a head on the last step gives `[B, K]`, one on every step
/// `[T, B, K]`), `target` of the same.
pub(crate) fn mse_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    let one = Shape::from([1]);
    let (pred, target) = match op {
        Op::MseLoss => {
            let MseLossInputs { pred, target } = named(list)?;
            (pred, target)
        }
        Op::MseLossBackward => {
            let i: MseLossBackwardInputs<&Shape> = named(list)?;
            same(i.dloss, &one, "dloss")?;
            (i.pred, i.target)
        }
        other => return Err(format!("{} is not a mean-squared-error op", other.name())),
    };
    if pred.rank() == 0 || pred.numel() == 0 {
        return Err(format!("pred must have at least one element, got {pred}"));
    }
    same(target, pred, "target")?;
    Ok(match op {
        Op::MseLoss => MseLossOutputs { loss: one }.into_vec(),
        _ => MseLossBackwardOutputs {
            dpred: pred.clone(),
        }
        .into_vec(),
    })
}
