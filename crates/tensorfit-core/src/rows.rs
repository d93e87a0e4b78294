//! The shape rules of the ops that read a tensor `[.., F]` as rows of `F` values: the
//! product of all leading dimensions is the row count. So a head on every step applies
//! `MatMul`, `BatchNorm` and softmax cross-entropy to the recurrent output `[T, B, H]`
//! as to `[T·B, H]` (`nn.Linear` over a sequence; `nn.BatchNorm1d` on the flattened rows)
//! without a reshape op or a copy: tensors are contiguous and row-major, so the buffer
//! is the same. Kernels size themselves with [`crate::kernels::dims2`], which flattens
//! the same way. Kept beside `op.rs` so that file stays small.
//!
//! A class label of [`IGNORE_LABEL`] marks a row that neither counts in the loss nor gets
//! a gradient (PyTorch's `ignore_index`): the steps of a padded batch past a sequence's
//! end. The loss is still the sum over counted rows divided by all rows; the graph
//! rescales it to the mean over counted rows (see `tensorfit-nn`'s every-step head).

use crate::args::*;
use crate::op::{same, Op};
use crate::op_shapes::named;
use crate::shape::Shape;

/// The label of a row the softmax cross-entropy ignores (no loss, zero gradient).
pub const IGNORE_LABEL: f32 = -1.0;

/// `s`'s leading dimensions (all but the last): the shape of one value per row.
pub fn leading(s: &Shape) -> Shape {
    Shape(s.0[..s.rank().saturating_sub(1)].to_vec())
}

/// Checks that `s` (called `what`) has rank 2 or more: rows of its last dimension.
fn rows(s: &Shape, what: &str) -> Result<(), String> {
    if s.rank() >= 2 {
        Ok(())
    } else {
        Err(format!(
            "{what} must have rank 2 or more (rows of its last dimension), got {s}"
        ))
    }
}

/// `(rows, width)` of `s`, read as rows of its last dimension.
fn flat(s: &Shape) -> (usize, usize) {
    let width = s.0.last().copied().unwrap_or(0);
    (leading(s).numel(), width)
}

/// [`Op::MatMul`]: `a` `[.., K]` (rows of `M`), or with `trans_a` `[.., M]` (rows of `K`);
/// `b` likewise. `c` is `a`'s leading dimensions with `N` (`[T, B, N]` for `a` `[T, B, K]`),
/// or `[M, N]` when `a` is transposed (a weight gradient summed over every row).
pub(crate) fn matmul_shapes(
    trans_a: bool,
    trans_b: bool,
    list: Vec<&Shape>,
) -> Result<Vec<Shape>, String> {
    let MatMulInputs { a, b } = named(list)?;
    rows(a, "a")?;
    rows(b, "b")?;
    let ((ar, ac), (br, bc)) = (flat(a), flat(b));
    let (m, ka) = if trans_a { (ac, ar) } else { (ar, ac) };
    let (kb, n) = if trans_b { (bc, br) } else { (br, bc) };
    if ka != kb {
        return Err(format!(
            "inner dimensions differ: a {a} (trans {trans_a}) · b {b} (trans {trans_b})"
        ));
    }
    let c = if trans_a {
        Shape::from([m, n])
    } else {
        let mut dims = leading(a).0;
        dims.push(n);
        Shape(dims)
    };
    Ok(MatMulOutputs { c }.into_vec())
}

/// [`Op::BatchNorm`] and [`Op::BatchNormBackward`]: `x` `[.., C]`, statistics over all
/// its rows.
pub(crate) fn batchnorm_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        &Op::BatchNorm { training, .. } => {
            let want = if training { 3 } else { 5 };
            if list.len() != want {
                return Err(format!("expected {want} inputs, got {}", list.len()));
            }
            let i: BatchNormInputs<&Shape> = named(list)?;
            rows(i.x, "x")?;
            let (batch, width) = flat(i.x);
            let c = Shape::from([width]);
            let mut channels = vec![i.gamma, i.beta];
            channels.extend(i.running.iter().flat_map(|s| [s.mean, s.var]));
            for s in channels {
                same(s, &c, "gamma, beta and statistics")?;
            }
            if training && batch < 2 {
                return Err("training needs a batch of at least 2".into());
            }
            let batch = training.then(|| MeanVar {
                mean: c.clone(),
                var: c.clone(),
            });
            let y = i.x.clone();
            Ok(BatchNormOutputs { y, batch }.into_vec())
        }
        Op::BatchNormBackward { .. } => {
            let i: BatchNormBackwardInputs<&Shape> = named(list)?;
            rows(i.x, "x")?;
            let c = Shape::from([flat(i.x).1]);
            for s in [i.gamma, i.mean, i.var] {
                same(s, &c, "gamma and statistics")?;
            }
            same(i.dy, i.x, "dy")?;
            let outputs = BatchNormBackwardOutputs {
                dx: i.x.clone(),
                dgamma: c.clone(),
                dbeta: c,
            };
            Ok(outputs.into_vec())
        }
        other => Err(format!("{} is not a batch-norm op", other.name())),
    }
}

/// [`Op::LayerNorm`] and its backward: `x` `[.., F]` (at least one row of at least one
/// feature), `gamma` `[F]`, statistics one per row.
pub(crate) fn layernorm_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::LayerNorm { .. } => {
            let i: LayerNormInputs<&Shape> = named(list)?;
            rows(i.x, "x")?;
            let f = Shape::from([flat(i.x).1]);
            same(i.gamma, &f, "gamma")?;
            same(i.beta, &f, "beta")?;
            let stats = leading(i.x);
            let outputs = LayerNormOutputs {
                y: i.x.clone(),
                mean: stats.clone(),
                rstd: stats,
            };
            Ok(outputs.into_vec())
        }
        Op::LayerNormBackward => {
            let i: LayerNormBackwardInputs<&Shape> = named(list)?;
            rows(i.x, "x")?;
            let f = Shape::from([flat(i.x).1]);
            same(i.gamma, &f, "gamma")?;
            let stats = leading(i.x);
            same(i.mean, &stats, "mean")?;
            same(i.rstd, &stats, "rstd")?;
            same(i.dy, i.x, "dy")?;
            let outputs = LayerNormBackwardOutputs {
                dx: i.x.clone(),
                dgamma: f.clone(),
                dbeta: f,
            };
            Ok(outputs.into_vec())
        }
        other => Err(format!("{} is not a layer-norm op", other.name())),
    }
}

/// [`Op::SoftmaxCrossEntropy`] and its backward: `logits` (`probs`) `[.., K]`, `labels`
/// one per row (`[B]`, or `[T, B]` on every step).
pub(crate) fn softmax_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::SoftmaxCrossEntropy => {
            let SoftmaxCrossEntropyInputs { logits, labels } = named(list)?;
            rows(logits, "logits")?;
            same(labels, &leading(logits), "labels")?;
            let outputs = SoftmaxCrossEntropyOutputs {
                loss: Shape::from([1]),
                probs: logits.clone(),
            };
            Ok(outputs.into_vec())
        }
        Op::SoftmaxCrossEntropyBackward => {
            let i: SoftmaxCrossEntropyBackwardInputs<&Shape> = named(list)?;
            rows(i.probs, "probs")?;
            same(i.labels, &leading(i.probs), "labels")?;
            same(i.dloss, &Shape::from([1]), "dloss")?;
            let dlogits = i.probs.clone();
            Ok(SoftmaxCrossEntropyBackwardOutputs { dlogits }.into_vec())
        }
        other => Err(format!(
            "{} is not a softmax cross-entropy op",
            other.name()
        )),
    }
}

/// `(B, C)` of a batch normalisation over `x` `[B, C]` from the element counts of its `x`
/// and `gamma` (`C`) views, as a kernel called with views (not shapes) sizes itself; the
/// error names `kernel`.
pub fn batchnorm_dims(
    kernel: &str,
    x: usize,
    gamma: usize,
) -> std::result::Result<(usize, usize), String> {
    let channels = gamma;
    if channels == 0 {
        return match x {
            0 => Ok((0, 0)),
            _ => Err(format!("{kernel}: no channels for {x} elements")),
        };
    }
    if x % channels != 0 {
        return Err(format!(
            "{kernel}: x has {x} elements, not a multiple of {channels} channels"
        ));
    }
    Ok((x / channels, channels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(op: Op, list: &[Shape]) -> Result<Vec<Shape>, String> {
        op.infer_shapes(&list.iter().collect::<Vec<_>>())
    }

    #[test]
    fn a_matmul_reads_a_sequence_as_rows_and_keeps_its_leading_dimensions() {
        let mm = |trans_a, trans_b| Op::MatMul { trans_a, trans_b };
        let (x, w) = (Shape::from([5, 3, 4]), Shape::from([7, 4]));
        let c = shapes(mm(false, true), &[x.clone(), w.clone()]).unwrap();
        assert_eq!(c, vec![Shape::from([5, 3, 7])]);
        // The weight gradient dcᵀ · x sums over all 15 rows.
        let dw = shapes(mm(true, false), &[Shape::from([5, 3, 7]), x.clone()]).unwrap();
        assert_eq!(dw, vec![Shape::from([7, 4])]);
        let e = shapes(mm(false, true), &[x, Shape::from([7, 5])]).unwrap_err();
        assert!(e.contains("inner dimensions differ"), "{e}");
        let e = shapes(mm(false, false), &[Shape::from([4]), w]).unwrap_err();
        assert!(e.contains("rank 2 or more"), "{e}");
    }

    #[test]
    fn softmax_labels_are_one_per_row_of_the_logits() {
        let logits = Shape::from([5, 3, 7]);
        let ok = shapes(
            Op::SoftmaxCrossEntropy,
            &[logits.clone(), Shape::from([5, 3])],
        );
        assert_eq!(ok.unwrap()[1], logits);
        let e = shapes(Op::SoftmaxCrossEntropy, &[logits, Shape::from([15])]).unwrap_err();
        assert!(e.contains("labels must have shape [5, 3]"), "{e}");
    }

    #[test]
    fn batchnorm_over_a_sequence_normalises_each_channel_over_every_row() {
        let op = Op::BatchNorm {
            eps: 1e-5,
            training: true,
        };
        let c = Shape::from([4]);
        let out = shapes(op.clone(), &[Shape::from([5, 3, 4]), c.clone(), c.clone()]).unwrap();
        assert_eq!(out, vec![Shape::from([5, 3, 4]), c.clone(), c.clone()]);
        let e = shapes(op, &[Shape::from([1, 1, 4]), c.clone(), c]).unwrap_err();
        assert!(e.contains("at least 2"), "{e}");
    }
}
