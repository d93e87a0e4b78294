//! The ops a 1-D convolution over time (PyTorch's `nn.Conv1d` over time-major sequences,
//! TCN-style stacks) is built from: [`Op::UnfoldTime`], the columns of its taps, and its
//! gradient [`Op::FoldTime`]; [`Op::Reshape`], the weight `[Cout, Cin, K]` as the matrix
//! `[Cout, Cin·K]`. The layer is `UnfoldTime(x, lengths) · Reshape(weight)ᵀ + bias` (one
//! GEMM over all steps). Their taps ([`ConvTaps`]), shape rules, gradients and kernels'
//! methods ([`ConvKernels`]); kept beside `op.rs` so that file stays small.
//!
//! Each sequence is convolved as if alone: row `b` of `L_b` steps
//! ([`crate::seq_lengths`]) is zero-padded before its first step and after its last, so
//! its outputs at steps `t < L_b` are PyTorch's for that one sequence with `padding` =
//! `left` on the left (and what the right needs to keep `L_b` steps), and its steps
//! `t ≥ L_b` are zero.

use crate::args::*;
use crate::error::{Error, Result};
use crate::graph::{Graph, TensorId};
use crate::kernels::KernelTypes;
use crate::op::Op;
use crate::op_shapes::named;
use crate::seq_lengths::check_shape;
use crate::shape::{rank, Shape};

/// The taps of a convolution over time: `kernel` taps `dilation` steps apart, the first
/// `left` steps before the output step. Output step `t` reads input steps
/// `t - left + k·dilation` for `k` in `0..kernel`; `left = (kernel - 1)·dilation` is a
/// causal convolution, `left = (kernel - 1)·dilation / 2` (rounded down) PyTorch's
/// `padding='same'`, which pads an odd span's extra step on the right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvTaps {
    pub kernel: usize,
    pub dilation: usize,
    pub left: usize,
}

impl ConvTaps {
    /// The taps of an [`Op::UnfoldTime`] or [`Op::FoldTime`]; an error naming any other op.
    pub fn of(op: &Op) -> Result<ConvTaps, String> {
        match *op {
            Op::UnfoldTime {
                kernel,
                dilation,
                left,
            }
            | Op::FoldTime {
                kernel,
                dilation,
                left,
            } => Ok(ConvTaps {
                kernel,
                dilation,
                left,
            }),
            ref other => Err(format!("{} has no convolution taps", other.name())),
        }
    }

    /// [`Op::UnfoldTime`] of these taps.
    pub fn unfold(self) -> Op {
        let ConvTaps {
            kernel,
            dilation,
            left,
        } = self;
        Op::UnfoldTime {
            kernel,
            dilation,
            left,
        }
    }

    /// [`Op::FoldTime`] of these taps.
    pub fn fold(self) -> Op {
        let ConvTaps {
            kernel,
            dilation,
            left,
        } = self;
        Op::FoldTime {
            kernel,
            dilation,
            left,
        }
    }

    /// `(kernel - 1)·dilation`: how many steps the taps reach past the first; none when it
    /// overflows.
    pub fn span(&self) -> Option<usize> {
        self.kernel.checked_sub(1)?.checked_mul(self.dilation)
    }

    /// Checks `kernel ≥ 1`, `dilation ≥ 1` and `left ≤ (kernel - 1)·dilation`.
    pub fn check(&self) -> Result<(), String> {
        let Self {
            kernel,
            dilation,
            left,
        } = *self;
        if kernel == 0 || dilation == 0 {
            return Err(format!(
                "kernel {kernel} and dilation {dilation} must both be at least 1"
            ));
        }
        match self.span() {
            Some(span) if left <= span => Ok(()),
            Some(span) => Err(format!(
                "left {left} exceeds the taps' span (kernel - 1)·dilation = {span}"
            )),
            None => Err(format!(
                "the taps' span (kernel {kernel} - 1)·dilation {dilation} overflows"
            )),
        }
    }

    /// The step of the input that tap `k` of output step `t` reads in a sequence of `len`
    /// steps, `t - left + k·dilation`; none where that lies outside `0..len` or `t` itself
    /// does (the zero padding).
    pub fn source(&self, t: usize, k: usize, len: usize) -> Option<usize> {
        let reach = k.saturating_mul(self.dilation);
        let s = match reach.checked_sub(self.left) {
            Some(ahead) => t.checked_add(ahead),
            None => t.checked_sub(self.left - reach),
        };
        s.filter(|&s| s < len && t < len)
    }

    /// The output step whose tap `k` reads input step `s` in a sequence of `len` steps,
    /// `s + left - k·dilation` (the inverse of [`ConvTaps::source`]); none where no step of
    /// `0..len` does, or `s` lies outside it.
    pub fn reader(&self, s: usize, k: usize, len: usize) -> Option<usize> {
        let reach = k.saturating_mul(self.dilation);
        let t = match reach.checked_sub(self.left) {
            Some(ahead) => s.checked_sub(ahead),
            None => s.checked_add(self.left - reach),
        };
        t.filter(|&t| t < len && s < len)
    }
}

/// The output shapes of the three ops, their inputs and attributes checked.
pub(crate) fn conv_shapes(op: &Op, list: Vec<&Shape>) -> Result<Vec<Shape>, String> {
    match op {
        Op::UnfoldTime { .. } => {
            let UnfoldTimeInputs { x, lengths } = named(list)?;
            let kernel = checked_taps(op)?.kernel;
            rank(x, 3, "x")?;
            check_shape(lengths, x.dim(1))?;
            let width = x.dim(2).checked_mul(kernel).ok_or_else(|| {
                format!("x {x} has too many columns at {kernel} taps per feature")
            })?;
            let cols = Shape::from([x.dim(0), x.dim(1), width]);
            Ok(UnfoldTimeOutputs { cols }.into_vec())
        }
        Op::FoldTime { .. } => {
            let FoldTimeInputs { dcols, lengths } = named(list)?;
            let kernel = checked_taps(op)?.kernel;
            rank(dcols, 3, "dcols")?;
            check_shape(lengths, dcols.dim(1))?;
            if dcols.dim(2) % kernel != 0 {
                return Err(format!(
                    "dcols {dcols} does not hold {kernel} taps per feature"
                ));
            }
            let dx = Shape::from([dcols.dim(0), dcols.dim(1), dcols.dim(2) / kernel]);
            Ok(FoldTimeOutputs { dx }.into_vec())
        }
        Op::Reshape { shape } => {
            let ReshapeInputs { x } = named(list)?;
            if x.numel() != shape.numel() {
                return Err(format!(
                    "x {x} ({} elements) cannot be reshaped to {shape} ({} elements)",
                    x.numel(),
                    shape.numel()
                ));
            }
            Ok(ReshapeOutputs { out: shape.clone() }.into_vec())
        }
        other => Err(format!("{} is not a convolution op", other.name())),
    }
}

/// The taps of `op`, checked.
fn checked_taps(op: &Op) -> Result<ConvTaps, String> {
    let taps = ConvTaps::of(op)?;
    taps.check()?;
    Ok(taps)
}

/// The inputs' gradients of an [`Op::UnfoldTime`] node `op` of inputs `x` given its
/// columns' gradient `dcols`: [`Op::FoldTime`] at the same taps and lengths (which get
/// none).
pub(crate) fn unfold_time_vjp(
    graph: &mut Graph,
    name: &str,
    op: &Op,
    x: UnfoldTimeInputs<TensorId>,
    dcols: TensorId,
) -> Result<Vec<Option<TensorId>>> {
    let op = ConvTaps::of(op).map_err(Error::Graph)?.fold();
    let lengths = x.lengths;
    let dx = graph.apply(name, op, FoldTimeInputs { dcols, lengths })?.dx;
    let grads = UnfoldTimeInputs {
        x: Some(dx),
        // The lengths are data: no gradient.
        lengths: lengths.map(|_| None),
    };
    Ok(grads.into_vec())
}

/// The inputs' gradients of an [`Op::FoldTime`] node `op`: [`Op::UnfoldTime`] of `dx`'s
/// gradient `ddx` at the same taps and lengths.
pub(crate) fn fold_time_vjp(
    graph: &mut Graph,
    name: &str,
    op: &Op,
    x: FoldTimeInputs<TensorId>,
    ddx: TensorId,
) -> Result<Vec<Option<TensorId>>> {
    let op = ConvTaps::of(op).map_err(Error::Graph)?.unfold();
    let lengths = x.lengths;
    let dcols = graph
        .apply(name, op, UnfoldTimeInputs { x: ddx, lengths })?
        .cols;
    let grads = FoldTimeInputs {
        dcols: Some(dcols),
        lengths: lengths.map(|_| None),
    };
    Ok(grads.into_vec())
}

/// The input's gradient of an [`Op::Reshape`] node of input `x`: `dout` reshaped back
/// to `x`'s shape.
pub(crate) fn reshape_vjp(
    graph: &mut Graph,
    name: &str,
    x: TensorId,
    dout: TensorId,
) -> Result<Vec<Option<TensorId>>> {
    let shape = graph.shape(x).clone();
    let dx = graph.apply(name, Op::Reshape { shape }, ReshapeInputs { x: dout })?;
    Ok(ReshapeInputs { x: Some(dx.out) }.into_vec())
}

/// The convolution ops' kernels (a supertrait of [`crate::OpKernels`]), which each
/// backend implements in its own `conv` file. `taps` are the op's attributes.
pub trait ConvKernels: KernelTypes {
    fn unfold_time(
        &mut self,
        taps: ConvTaps,
        s: UnfoldTimeInputs<&Shape>,
        i: UnfoldTimeInputs<Self::In>,
        o: UnfoldTimeOutputs<Self::Out>,
    ) -> Result<()>;

    fn fold_time(
        &mut self,
        taps: ConvTaps,
        s: FoldTimeInputs<&Shape>,
        i: FoldTimeInputs<Self::In>,
        o: FoldTimeOutputs<Self::Out>,
    ) -> Result<()>;

    /// `shape` is the output's (the op's attribute).
    fn reshape(
        &mut self,
        shape: &Shape,
        s: ReshapeInputs<&Shape>,
        i: ReshapeInputs<Self::In>,
        o: ReshapeOutputs<Self::Out>,
    ) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::graph::Phase;
    use crate::shape::shapes_of as shapes;

    fn taps(kernel: usize, dilation: usize, left: usize) -> ConvTaps {
        ConvTaps {
            kernel,
            dilation,
            left,
        }
    }

    fn unfold(kernel: usize, dilation: usize, left: usize) -> Op {
        taps(kernel, dilation, left).unfold()
    }

    fn fold(kernel: usize, dilation: usize, left: usize) -> Op {
        taps(kernel, dilation, left).fold()
    }

    #[test]
    fn the_columns_hold_every_tap_of_every_feature_and_fold_back() {
        let cols = vec![Shape::from([5, 3, 8])];
        let x = vec![Shape::from([5, 3, 2])];
        assert_eq!(shapes(unfold(4, 2, 6), &[&[5, 3, 2]]).unwrap(), cols);
        assert_eq!(shapes(unfold(4, 1, 0), &[&[5, 3, 2], &[3]]).unwrap(), cols);
        assert_eq!(shapes(fold(4, 2, 3), &[&[5, 3, 8]]).unwrap(), x);
        assert_eq!(shapes(fold(4, 2, 3), &[&[5, 3, 8], &[3]]).unwrap(), x);
        // One tap is a copy; no steps or no rows are shapes like any other.
        assert_eq!(
            shapes(unfold(1, 1, 0), &[&[0, 3, 2]]).unwrap(),
            [[0, 3, 2].into()]
        );
        assert_eq!(
            shapes(fold(1, 7, 0), &[&[4, 0, 2]]).unwrap(),
            [[4, 0, 2].into()]
        );
        for op in [unfold(3, 1, 1), fold(3, 1, 1)] {
            assert!(shapes(op.clone(), &[&[5, 3, 6], &[4]]).is_err());
            assert!(shapes(op.clone(), &[&[5, 6]]).is_err());
            assert!(shapes(op.clone(), &[&[5, 3, 6, 1]]).is_err());
            assert!(shapes(op, &[]).is_err());
        }
        let err = shapes(fold(3, 1, 1), &[&[5, 3, 7]]).unwrap_err();
        assert!(err.contains("3 taps per feature"), "{err}");
    }

    #[test]
    fn taps_need_a_kernel_a_dilation_and_a_left_inside_their_span() {
        for op in [unfold, fold] {
            let x: &[usize] = &[5, 3, 6];
            for bad in [op(0, 1, 0), op(3, 0, 0)] {
                let err = shapes(bad, &[x]).unwrap_err();
                assert!(err.contains("at least 1"), "{err}");
            }
            let err = shapes(op(3, 2, 5), &[x]).unwrap_err();
            assert!(err.contains("left 5") && err.contains("= 4"), "{err}");
            let err = shapes(op(3, usize::MAX, 0), &[x]).unwrap_err();
            assert!(err.contains("overflows"), "{err}");
            assert!(shapes(op(3, 2, 4), &[x]).is_ok());
            assert!(shapes(op(1, 5, 0), &[x]).is_ok());
            assert!(shapes(op(1, 5, 1), &[x]).is_err());
        }
    }

    #[test]
    fn a_graph_refuses_bad_taps_or_counts_with_a_shape_error_naming_the_op() {
        let mut g = Graph::new();
        let x = g.input("x", [5, 3, 2]);
        let inputs = UnfoldTimeInputs { x, lengths: None };
        let err = g.apply("conv", unfold(3, 1, 3), inputs).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Shape {
                    op: "unfold_time",
                    ..
                }
            ),
            "{err}"
        );
        let shape = Shape::from([7]);
        let err = g.apply("w", Op::Reshape { shape }, ReshapeInputs { x });
        let err = err.unwrap_err().to_string();
        assert!(err.contains("reshape") && err.contains("[5, 3, 2]") && err.contains("[7]"));
        let cols = g.apply("cols", unfold(2, 3, 3), inputs).unwrap().cols;
        assert_eq!(g.shape(cols), &Shape::from([5, 3, 4]));
    }

    #[test]
    fn each_op_is_differentiated_by_its_adjoint_at_the_same_taps_and_lengths() {
        let mut g = Graph::new();
        let x = g.input("x", [5, 3, 2]);
        let l = g.input("lengths", [3]);
        let lengths = Some(l);
        let same = unfold(3, 2, 2);
        let cols = g.apply("cols", same, UnfoldTimeInputs { x, lengths });
        let cols = cols.unwrap().cols;
        let dcols = g.input("dcols", [5, 3, 6]);
        let dx = g.apply("fold", fold(3, 2, 2), FoldTimeInputs { dcols, lengths });
        let dx = dx.unwrap().dx;
        let w = g.input("weight", [4, 2, 3]);
        let shape = Shape::from([4, 6]);
        let flat = g.apply("w", Op::Reshape { shape }, ReshapeInputs { x: w });
        let flat = flat.unwrap().out;
        let seeds = [cols, dx, flat].map(|t| {
            let shape = g.shape(t).clone();
            (t, g.input("seed", shape))
        });
        let grads = crate::autodiff::backward(&mut g, &seeds, &[x, dcols, w, l]).unwrap();
        let shape_of = |t: Option<TensorId>| t.map(|t| g.shape(t).clone());
        assert_eq!(shape_of(grads[0]), Some([5, 3, 2].into()));
        assert_eq!(shape_of(grads[1]), Some([5, 3, 6].into()));
        assert_eq!(shape_of(grads[2]), Some([4, 2, 3].into()));
        // The lengths are data: no gradient.
        assert_eq!(grads[3], None);
        // The gradient nodes, by op.
        let inputs_of = |want: Op| {
            let mut nodes = g.nodes().iter().filter(|n| n.phase == Phase::Backward);
            nodes.find(|n| n.op == want).map(|n| n.inputs.clone())
        };
        assert_eq!(inputs_of(fold(3, 2, 2)), Some(vec![seeds[0].1, l]));
        assert_eq!(inputs_of(unfold(3, 2, 2)), Some(vec![seeds[1].1, l]));
        let back = Op::Reshape {
            shape: [4, 2, 3].into(),
        };
        assert_eq!(inputs_of(back), Some(vec![seeds[2].1]));
    }

    #[test]
    fn a_reshape_keeps_the_element_count_and_names_both_shapes_otherwise() {
        let op = |shape: &[usize]| Op::Reshape {
            shape: Shape::from(shape),
        };
        let out = shapes(op(&[6, 4]), &[&[6, 2, 2]]).unwrap();
        assert_eq!(out, [Shape::from([6, 4])]);
        assert_eq!(shapes(op(&[0, 3]), &[&[2, 0]]).unwrap(), [[0, 3].into()]);
        let err = shapes(op(&[5, 5]), &[&[6, 4]]).unwrap_err();
        assert!(err.contains("[6, 4]") && err.contains("[5, 5]"), "{err}");
        assert!(shapes(op(&[4]), &[]).is_err());
        assert!(ConvTaps::of(&op(&[4])).is_err());
        assert_eq!(ConvTaps::of(&fold(3, 2, 1)), Ok(taps(3, 2, 1)));
    }

    #[test]
    fn a_tap_reads_its_step_inside_the_sequence_and_the_reader_inverts_it() {
        let causal = ConvTaps {
            kernel: 3,
            dilation: 2,
            left: 4,
        };
        // Step 5 reads 1, 3, 5; step 1 reads nothing before 0, then 1; step 5 of a row of
        // 5 steps is padding.
        let at = |taps: ConvTaps, t, len| (0..3).map(|k| taps.source(t, k, len)).collect();
        let v: Vec<Option<usize>> = at(causal, 5, 6);
        assert_eq!(v, [Some(1), Some(3), Some(5)]);
        let v: Vec<Option<usize>> = at(causal, 1, 6);
        assert_eq!(v, [None, None, Some(1)]);
        assert!(at(causal, 5, 5).iter().all(Option::is_none));
        let same = ConvTaps { left: 2, ..causal };
        let v: Vec<Option<usize>> = at(same, 3, 5);
        assert_eq!(v, [Some(1), Some(3), None]);
        for taps in [causal, same, ConvTaps { left: 0, ..causal }] {
            for len in 0..7 {
                for t in 0..8 {
                    for k in 0..3 {
                        if let Some(s) = taps.source(t, k, len) {
                            assert_eq!(taps.reader(s, k, len), Some(t));
                        }
                    }
                    for k in 0..3 {
                        if let Some(r) = taps.reader(t, k, len) {
                            assert_eq!(taps.source(r, k, len), Some(t));
                        }
                    }
                }
            }
        }
        let far = ConvTaps {
            kernel: 2,
            dilation: usize::MAX,
            left: 0,
        };
        assert_eq!((far.source(1, 1, 5), far.reader(1, 1, 5)), (None, None));
    }
}
