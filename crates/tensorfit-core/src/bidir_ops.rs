//! The shape rules of the ops a bidirectional recurrent layer is built from, which move
//! values without computing with them: [`Op::ReverseTime`] (the reverse direction's view
//! of each sequence, [`crate::seq_lengths::reversed_step`]), [`Op::ConcatFeatures`] (both
//! directions' outputs side by side) and [`Op::SliceFeatures`] (one direction's part of
//! a gradient). Kept beside `op.rs` so that file stays small.

use crate::args::*;
use crate::op::Op;
use crate::op_shapes::named;
use crate::rows::leading;
use crate::seq_lengths::check_shape;
use crate::shape::Shape;

/// The output shapes of the three ops, their inputs checked.
pub(crate) fn bidir_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::ReverseTime => {
            let ReverseTimeInputs { x, lengths } = named(list)?;
            if !matches!(x.rank(), 2 | 3) {
                return Err(format!(
                    "x must be [T, B, F] features or [T, B] token ids, got {x}"
                ));
            }
            check_shape(lengths, x.dim(1))?;
            Ok(ReverseTimeOutputs { y: x.clone() }.into_vec())
        }
        Op::ConcatFeatures => {
            let ConcatFeaturesInputs { a, b } = named(list)?;
            let (fa, fb) = (features(a, "a")?, features(b, "b")?);
            if leading(a) != leading(b) {
                return Err(format!(
                    "a {a} and b {b} must have the same leading dimensions"
                ));
            }
            let width = fa
                .checked_add(fb)
                .ok_or_else(|| format!("{fa} + {fb} features overflow"))?;
            let out = with_features(a, width);
            Ok(ConcatFeaturesOutputs { out }.into_vec())
        }
        &Op::SliceFeatures { start, width } => {
            let SliceFeaturesInputs { x } = named(list)?;
            let f = features(x, "x")?;
            if width == 0 {
                return Err("a slice of no features (width 0)".to_string());
            }
            match start.checked_add(width) {
                Some(end) if end <= f => {}
                _ => {
                    return Err(format!(
                        "features {start}.. (width {width}) outside the {f} of x {x}"
                    ))
                }
            }
            let out = with_features(x, width);
            Ok(SliceFeaturesOutputs { out }.into_vec())
        }
        other => Err(format!("{} is not a bidirectional-layer op", other.name())),
    }
}

/// `(T, B, F)` of [`Op::ReverseTime`]'s `x`: `[T, B, F]` features, or `[T, B]` token ids
/// (a bidirectional stack reading ids directly), one value per step (F = 1).
pub fn time_dims(x: &Shape) -> (usize, usize, usize) {
    let width = if x.rank() == 2 { 1 } else { x.dim(2) };
    (x.dim(0), x.dim(1), width)
}

/// The last dimension of `s` (called `what`), which must have rank 1 or more.
fn features(s: &Shape, what: &str) -> Result<usize, String> {
    s.0.last()
        .copied()
        .ok_or_else(|| format!("{what} must have rank 1 or more (rows of features), got {s}"))
}

/// `s` with its last dimension replaced by `width`.
pub(crate) fn with_features(s: &Shape, width: usize) -> Shape {
    let mut dims = leading(s).0;
    dims.push(width);
    Shape(dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::shape::shapes_of as shapes;

    #[test]
    fn reverse_time_keeps_the_shape_of_a_sequence_and_checks_its_lengths() {
        let y = shapes(Op::ReverseTime, &[&[5, 3, 2], &[3]]).unwrap();
        assert_eq!(y, vec![Shape::from([5, 3, 2])]);
        assert!(shapes(Op::ReverseTime, &[&[5, 3, 2]]).is_ok());
        assert!(shapes(Op::ReverseTime, &[&[5, 3, 2], &[4]]).is_err());
        // Token ids, [T, B], one value per step.
        assert_eq!(
            shapes(Op::ReverseTime, &[&[5, 3], &[3]]).unwrap(),
            vec![Shape::from([5, 3])]
        );
        assert_eq!(time_dims(&Shape::from([5, 3])), (5, 3, 1));
        assert!(shapes(Op::ReverseTime, &[&[5]]).is_err());
        assert!(shapes(Op::ReverseTime, &[&[5, 3, 2, 1]]).is_err());
    }

    #[test]
    fn concat_features_needs_the_same_leading_dimensions() {
        let out = shapes(Op::ConcatFeatures, &[&[4, 2, 3], &[4, 2, 5]]).unwrap();
        assert_eq!(out, vec![Shape::from([4, 2, 8])]);
        let out = shapes(Op::ConcatFeatures, &[&[3], &[1]]).unwrap();
        assert_eq!(out, vec![Shape::from([4])]);
        let err = shapes(Op::ConcatFeatures, &[&[4, 2, 3], &[2, 4, 3]]).unwrap_err();
        assert!(err.contains("leading dimensions"), "{err}");
        assert!(shapes(Op::ConcatFeatures, &[&[4, 3], &[4, 1, 3]]).is_err());
        assert!(shapes(Op::ConcatFeatures, &[&[], &[]]).is_err());
    }

    #[test]
    fn slice_features_must_lie_inside_the_features() {
        let op = |start, width| Op::SliceFeatures { start, width };
        let out = shapes(op(2, 3), &[&[4, 2, 5]]).unwrap();
        assert_eq!(out, vec![Shape::from([4, 2, 3])]);
        for (start, width) in [(0, 0), (3, 3), (5, 1), (1, usize::MAX)] {
            assert!(
                shapes(op(start, width), &[&[4, 5]]).is_err(),
                "{start} {width}"
            );
        }
        assert!(shapes(op(0, 1), &[&[]]).is_err());
    }
}
