//! The shape rules of global pooling over time (Keras's `GlobalAveragePooling1D` and
//! `GlobalMaxPooling1D`, DL4J's `GlobalPoolingLayer`), each sequence over its own steps
//! ([`crate::seq_lengths`]): [`Op::MeanTime`] and its gradient [`Op::MeanTimeBackward`],
//! [`Op::MaxTime`] and its gradient [`Op::MaxTimeBackward`], and their kernels' methods
//! ([`PoolKernels`]). Kept beside `op.rs` so that file stays small.

use crate::args::*;
use crate::error::Result;
use crate::kernels::KernelTypes;
use crate::op::Op;
use crate::op_shapes::named;
use crate::seq_lengths::check_shape;
use crate::shape::{rank, same, Shape};

/// The output shapes of the four ops, their inputs checked.
pub(crate) fn pool_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::MeanTime => {
            let MeanTimeInputs { x, lengths } = named(list)?;
            let out = pooled(x, lengths)?;
            Ok(MeanTimeOutputs { out }.into_vec())
        }
        &Op::MeanTimeBackward { steps } => {
            let MeanTimeBackwardInputs { dout, lengths } = named(list)?;
            let dx = spread(dout, steps)?;
            check_shape(lengths, dout.dim(0))?;
            Ok(MeanTimeBackwardOutputs { dx }.into_vec())
        }
        Op::MaxTime => {
            let MaxTimeInputs { x, lengths } = named(list)?;
            let out = pooled(x, lengths)?;
            let at = out.clone();
            Ok(MaxTimeOutputs { out, at }.into_vec())
        }
        &Op::MaxTimeBackward { steps } => {
            let MaxTimeBackwardInputs { dout, at } = named(list)?;
            let dx = spread(dout, steps)?;
            same(at, dout, "at")?;
            Ok(MaxTimeBackwardOutputs { dx }.into_vec())
        }
        other => Err(format!("{} is not a pooling op", other.name())),
    }
}

/// `[B, F]` of a pooled `x` `[T, B, F]`, its `lengths` checked.
fn pooled(x: &Shape, lengths: Option<&Shape>) -> Result<Shape, String> {
    rank(x, 3, "x")?;
    check_shape(lengths, x.dim(1))?;
    Ok(Shape::from([x.dim(1), x.dim(2)]))
}

/// `[steps, B, F]` of a gradient spread back over `steps` from `dout` `[B, F]`.
fn spread(dout: &Shape, steps: usize) -> Result<Shape, String> {
    rank(dout, 2, "dout")?;
    if steps == 0 {
        return Err("a gradient over no steps (steps 0)".to_string());
    }
    Ok(Shape::from([steps, dout.dim(0), dout.dim(1)]))
}

/// The pooling ops' kernels (a supertrait of [`crate::OpKernels`]), which each backend
/// implements in its own `pool` file.
pub trait PoolKernels: KernelTypes {
    fn mean_time(
        &mut self,
        s: MeanTimeInputs<&Shape>,
        i: MeanTimeInputs<Self::In>,
        o: MeanTimeOutputs<Self::Out>,
    ) -> Result<()>;

    /// `steps` is the op's attribute: the steps of `dx`.
    fn mean_time_backward(
        &mut self,
        steps: usize,
        s: MeanTimeBackwardInputs<&Shape>,
        i: MeanTimeBackwardInputs<Self::In>,
        o: MeanTimeBackwardOutputs<Self::Out>,
    ) -> Result<()>;

    fn max_time(
        &mut self,
        s: MaxTimeInputs<&Shape>,
        i: MaxTimeInputs<Self::In>,
        o: MaxTimeOutputs<Self::Out>,
    ) -> Result<()>;

    /// `steps` is the op's attribute: the steps of `dx`.
    fn max_time_backward(
        &mut self,
        steps: usize,
        s: MaxTimeBackwardInputs<&Shape>,
        i: MaxTimeBackwardInputs<Self::In>,
        o: MaxTimeBackwardOutputs<Self::Out>,
    ) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::shape::shapes_of as shapes;

    #[test]
    fn pooling_over_time_leaves_one_row_of_features_per_sequence() {
        let bf = vec![Shape::from([3, 2])];
        assert_eq!(shapes(Op::MeanTime, &[&[5, 3, 2]]).unwrap(), bf);
        assert_eq!(shapes(Op::MeanTime, &[&[5, 3, 2], &[3]]).unwrap(), bf);
        let max = shapes(Op::MaxTime, &[&[5, 3, 2], &[3]]).unwrap();
        assert_eq!(max, [bf.clone(), bf].concat());
        for op in [Op::MeanTime, Op::MaxTime] {
            assert!(shapes(op.clone(), &[&[5, 3, 2], &[4]]).is_err());
            assert!(shapes(op.clone(), &[&[5, 3]]).is_err());
            assert!(shapes(op.clone(), &[&[5, 3, 2, 1]]).is_err());
            assert!(shapes(op, &[]).is_err());
        }
    }

    #[test]
    fn the_gradients_spread_over_their_steps_which_must_be_some() {
        let mean = |steps| Op::MeanTimeBackward { steps };
        let max = |steps| Op::MaxTimeBackward { steps };
        let dx = vec![Shape::from([4, 3, 2])];
        assert_eq!(shapes(mean(4), &[&[3, 2]]).unwrap(), dx);
        assert_eq!(shapes(mean(4), &[&[3, 2], &[3]]).unwrap(), dx);
        assert_eq!(shapes(max(4), &[&[3, 2], &[3, 2]]).unwrap(), dx);
        let err = shapes(mean(0), &[&[3, 2]]).unwrap_err();
        assert!(err.contains("steps 0"), "{err}");
        assert!(shapes(max(0), &[&[3, 2], &[3, 2]]).is_err());
        assert!(shapes(mean(4), &[&[3, 2], &[2]]).is_err());
        assert!(shapes(mean(4), &[&[4, 3, 2]]).is_err());
        assert!(shapes(max(4), &[&[3, 2], &[3, 1]]).is_err());
        // `at` is required.
        assert!(shapes(max(4), &[&[3, 2]]).is_err());
    }
}
