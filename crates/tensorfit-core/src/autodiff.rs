//! Reverse-mode automatic differentiation that appends the backward graph to the forward
//! graph.
//!
//! The backward pass is made of ordinary nodes (phase [`Phase::Backward`]), so it is
//! scheduled, planned and run exactly like the forward pass: the planner sees which
//! forward tensors the backward nodes read (those are the activations saved for
//! backward) and how long each gradient lives. Each forward op has one rule below giving
//! the nodes that compute its inputs' gradients from its outputs' gradients, written with
//! the op's named structs (`crate::args`), never positions.

use std::collections::HashMap;

use crate::args::*;
use crate::attention_ops::{attention_mix_vjp, attention_scores_vjp};
use crate::bidir_ops::with_features;
use crate::conv_ops::{fold_time_vjp, reshape_vjp, unfold_time_vjp};
use crate::error::{Error, Result};
use crate::graph::{Graph, Node, NodeId, Phase, TensorId};
use crate::op::{BinaryOp, Op};
use crate::positions_ops::add_time_rows_vjp;

/// Appends to `graph` the nodes computing the gradients of `wrt` given the gradients
/// `seeds` = (output, gradient of that output) — for a scalar loss the seed is a `Fill`
/// of 1. Returns the gradient tensor of each `wrt` entry, or `None` where the seeds do
/// not depend on it.
pub fn backward(
    graph: &mut Graph,
    seeds: &[(TensorId, TensorId)],
    wrt: &[TensorId],
) -> Result<Vec<Option<TensorId>>> {
    let forward_count = graph.nodes().len();
    let tensor_count = graph.tensors().len();
    for &(t, g) in seeds {
        if graph.shape(t) != graph.shape(g) {
            return Err(Error::Graph(format!(
                "seed gradient `{}` {} does not match `{}` {}",
                graph.tensor(g).name,
                graph.shape(g),
                graph.tensor(t).name,
                graph.shape(t)
            )));
        }
    }
    // Which tensors depend on a `wrt` tensor (nodes were added in dependency order).
    let mut needs = vec![false; tensor_count];
    for &t in wrt {
        needs[t.0] = true;
    }
    for node in &graph.nodes()[..forward_count] {
        if !node.op.is_update() && node.inputs.iter().any(|t| needs[t.0]) {
            for &o in &node.outputs {
                needs[o.0] = true;
            }
        }
    }

    let previous_phase = graph.phase.replace(Phase::Backward);
    let result = (|| {
        let mut grads: HashMap<TensorId, TensorId> = HashMap::new();
        for &(t, g) in seeds {
            accumulate(graph, &mut grads, t, g)?;
        }
        for i in (0..forward_count).rev() {
            let node = graph.node(NodeId(i)).clone();
            if node.op.is_update() || node.phase != Phase::Forward {
                continue;
            }
            let input_needs: Vec<bool> = node.inputs.iter().map(|t| needs[t.0]).collect();
            if !input_needs.iter().any(|&b| b) {
                continue;
            }
            let out_grads: Vec<Option<TensorId>> =
                node.outputs.iter().map(|o| grads.get(o).copied()).collect();
            if out_grads.iter().all(Option::is_none) {
                continue;
            }
            let in_grads = vjp(graph, &node, &out_grads, &input_needs)?;
            for ((&t, g), need) in node.inputs.iter().zip(in_grads).zip(input_needs) {
                if let (Some(g), true) = (g, need) {
                    accumulate(graph, &mut grads, t, g)?;
                }
            }
        }
        Ok(wrt.iter().map(|t| grads.get(t).copied()).collect())
    })();
    graph.phase = previous_phase;
    result
}

fn accumulate(
    graph: &mut Graph,
    grads: &mut HashMap<TensorId, TensorId>,
    t: TensorId,
    g: TensorId,
) -> Result<()> {
    let sum = match grads.get(&t) {
        None => g,
        Some(&prev) => {
            let name = format!("grad_sum.{}", graph.tensor(t).name);
            add(graph, &name, prev, g)?
        }
    };
    grads.insert(t, sum);
    Ok(())
}

/// `a + b` of equal shapes.
fn add(graph: &mut Graph, name: &str, a: TensorId, b: TensorId) -> Result<TensorId> {
    let sum = graph.apply(name, Op::Binary(BinaryOp::Add), BinaryInputs { a, b })?;
    Ok(sum.out)
}

/// Gradient of `out` if given, else zeros of its shape.
fn grad_or_zeros(graph: &mut Graph, out: TensorId, g: Option<TensorId>) -> Result<TensorId> {
    match g {
        Some(g) => Ok(g),
        None => {
            let name = format!("zeros.{}", graph.tensor(out).name);
            let shape = graph.shape(out).clone();
            let zeros =
                graph.apply(&name, Op::Fill { value: 0.0, shape }, FillInputs::default())?;
            Ok(zeros.out)
        }
    }
}

/// The last dimension of `t` (its features).
fn last_dim(graph: &Graph, t: TensorId) -> usize {
    graph.shape(t).0.last().copied().unwrap_or(0)
}

/// `f()` when `need`, else nothing.
fn when(need: bool, f: impl FnOnce() -> Result<TensorId>) -> Result<Option<TensorId>> {
    need.then(f).transpose()
}

/// A node's list (its inputs, which of them need a gradient, its outputs' gradients) as
/// the op's struct.
fn named<A: Args<T>, T>(node: &Node, what: &str, list: Vec<T>) -> Result<A> {
    A::from_vec(what, list).map_err(|m| Error::Graph(format!("node `{}`: {m}", node.name)))
}

/// The vector-Jacobian product of one forward node: its inputs' gradients, in the order
/// of its inputs.
fn vjp(
    graph: &mut Graph,
    node: &Node,
    out_grads: &[Option<TensorId>],
    needs: &[bool],
) -> Result<Vec<Option<TensorId>>> {
    let name = |what: &str| format!("{}.{}", node.name, what);
    let no_grad_for = |what: &str| {
        Error::Graph(format!(
            "node `{}` ({}): gradient of its {what} is not supported",
            node.name,
            node.op.name()
        ))
    };
    let main = |g: Option<TensorId>| g.ok_or_else(|| no_grad_for("main output missing"));
    // The node's inputs (`x`), which need a gradient (`need`), its outputs (`out`) and
    // their gradients (`g`), each as the op's struct `$inputs` or its outputs struct.
    macro_rules! named {
        ($inputs:ident) => {{
            let x: $inputs<TensorId> = named(node, "inputs", node.inputs.clone())?;
            let need: $inputs<bool> = named(node, "inputs", needs.to_vec())?;
            let out: <$inputs<TensorId> as OpInputs<TensorId>>::Outputs =
                named(node, "outputs", node.outputs.clone())?;
            let g: <$inputs<Option<TensorId>> as OpInputs<Option<TensorId>>>::Outputs =
                named(node, "outputs", out_grads.to_vec())?;
            (x, need, out, g)
        }};
    }
    match &node.op {
        &Op::MatMul { trans_a, trans_b } => {
            let (x, need, _, g) = named!(MatMulInputs);
            let dc = main(g.c)?;
            let mut matmul = |what: &str, trans_a, trans_b, a, b| -> Result<TensorId> {
                let op = Op::MatMul { trans_a, trans_b };
                Ok(graph.apply(&name(what), op, MatMulInputs { a, b })?.c)
            };
            // For c = op(a)·op(b): da = dc·op(b)ᵀ (transposed back if a was), and
            // db = op(a)ᵀ·dc likewise.
            let a = when(need.a, || match trans_a {
                false => matmul("grad_a", false, !trans_b, dc, x.b),
                true => matmul("grad_a", trans_b, true, x.b, dc),
            })?;
            let b = when(need.b, || match trans_b {
                false => matmul("grad_b", !trans_a, false, x.a, dc),
                true => matmul("grad_b", true, trans_a, dc, x.a),
            })?;
            Ok(MatMulInputs { a, b }.into_vec())
        }
        Op::Binary(bop) => {
            let (x, need, _, g) = named!(BinaryInputs);
            let dout = main(g.out)?;
            let (a, b_full) = match bop {
                BinaryOp::Add => (Some(dout), Some(dout)),
                BinaryOp::Mul => {
                    let mut mul = |what: &str, a, b| -> Result<TensorId> {
                        let op = Op::Binary(BinaryOp::Mul);
                        Ok(graph.apply(&name(what), op, BinaryInputs { a, b })?.out)
                    };
                    let da = when(need.a, || mul("grad_a", dout, x.b))?;
                    let db = when(need.b, || mul("grad_b_full", dout, x.a))?;
                    (da, db)
                }
            };
            // `b` was repeated over `a`'s leading dimensions: its gradient sums over them.
            let b_shape = graph.shape(x.b).clone();
            let b = match b_full {
                Some(d) if need.b && graph.shape(d) != &b_shape => {
                    let op = Op::SumToShape { shape: b_shape };
                    let sum = graph.apply(&name("grad_b"), op, SumToShapeInputs { x: d })?;
                    Some(sum.out)
                }
                other => other,
            };
            Ok(BinaryInputs { a, b }.into_vec())
        }
        Op::Activation(f) => {
            let (x, _, out, g) = named!(ActivationInputs);
            let inputs = ActivationBackwardInputs {
                y: out.y,
                dy: main(g.y)?,
                x: f.needs_input().then_some(x.x),
            };
            let dx = graph.apply(&name("grad"), Op::ActivationBackward(*f), inputs)?;
            Ok(ActivationInputs { x: Some(dx.dx) }.into_vec())
        }
        Op::Dropout(p) => {
            // The mask is drawn again from the same key, site and offset: y = x · m / (1-p)
            // gives dx = dy · m / (1-p), the same op on dy.
            let (x, _, _, g) = named!(DropoutInputs);
            let inputs = DropoutInputs {
                x: main(g.y)?,
                key: x.key,
            };
            let dx = graph.apply(&name("grad"), Op::Dropout(*p), inputs)?;
            Ok(DropoutInputs {
                x: Some(dx.y),
                key: None,
            }
            .into_vec())
        }
        Op::SliceTime { t } => {
            let (x, _, _, g) = named!(SliceTimeInputs);
            let steps = graph.shape(x.x).dim(0);
            let op = Op::ScatterTime { t: *t, steps };
            let inputs = ScatterTimeInputs {
                x: main(g.out)?,
                lengths: x.lengths,
            };
            let dx = graph.apply(&name("grad"), op, inputs)?;
            let grads = SliceTimeInputs {
                x: Some(dx.out),
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::ReverseTime => {
            // A permutation that is its own adjoint: dx is dy reversed at the same lengths.
            let (x, _, _, g) = named!(ReverseTimeInputs);
            let inputs = ReverseTimeInputs {
                x: main(g.y)?,
                lengths: x.lengths,
            };
            let dx = graph.apply(&name("grad"), Op::ReverseTime, inputs)?;
            let grads = ReverseTimeInputs {
                x: Some(dx.y),
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::ConcatFeatures => {
            // Each operand's features of dout; an operand of no features gets an empty Fill.
            let (x, need, _, g) = named!(ConcatFeaturesInputs);
            let dout = main(g.out)?;
            let fa = last_dim(graph, x.a);
            let fb = last_dim(graph, x.b);
            let mut part = |what: &str, of: TensorId, start, width| -> Result<TensorId> {
                if width == 0 {
                    return grad_or_zeros(graph, of, None);
                }
                let op = Op::SliceFeatures { start, width };
                let inputs = SliceFeaturesInputs { x: dout };
                Ok(graph.apply(&name(what), op, inputs)?.out)
            };
            let a = when(need.a, || part("grad_a", x.a, 0, fa))?;
            let b = when(need.b, || part("grad_b", x.b, fa, fb))?;
            Ok(ConcatFeaturesInputs { a, b }.into_vec())
        }
        &Op::SliceFeatures { start, width } => {
            // dout at its features, between zeros of the features before and after them.
            let (x, _, _, g) = named!(SliceFeaturesInputs);
            let shape = graph.shape(x.x).clone();
            let after = last_dim(graph, x.x).saturating_sub(start + width);
            let mut dx = main(g.out)?;
            for (what, count, before) in [("before", start, true), ("after", after, false)] {
                if count == 0 {
                    continue;
                }
                let op = Op::Fill {
                    value: 0.0,
                    shape: with_features(&shape, count),
                };
                let fill = name(&format!("grad_zeros_{what}"));
                let zeros = graph.apply(&fill, op, FillInputs::default())?.out;
                let inputs = match before {
                    true => ConcatFeaturesInputs { a: zeros, b: dx },
                    false => ConcatFeaturesInputs { a: dx, b: zeros },
                };
                let concat = name(&format!("grad_{what}"));
                dx = graph.apply(&concat, Op::ConcatFeatures, inputs)?.out;
            }
            Ok(SliceFeaturesInputs { x: Some(dx) }.into_vec())
        }
        Op::MeanTime => {
            // Each step of a row gets its share of dout, at the same lengths.
            let (x, _, _, g) = named!(MeanTimeInputs);
            let op = Op::MeanTimeBackward {
                steps: graph.shape(x.x).dim(0),
            };
            let inputs = MeanTimeBackwardInputs {
                dout: main(g.out)?,
                lengths: x.lengths,
            };
            let dx = graph.apply(&name("grad"), op, inputs)?;
            let grads = MeanTimeInputs {
                x: Some(dx.dx),
                // The lengths are data: no gradient.
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::MaxTime => {
            // dout goes to the step each maximum came from; `at` is an index, not a value.
            let (x, _, out, g) = named!(MaxTimeInputs);
            if g.at.is_some() {
                return Err(no_grad_for("steps output `at`"));
            }
            let op = Op::MaxTimeBackward {
                steps: graph.shape(x.x).dim(0),
            };
            let inputs = MaxTimeBackwardInputs {
                dout: main(g.out)?,
                at: out.at,
            };
            let dx = graph.apply(&name("grad"), op, inputs)?;
            let grads = MaxTimeInputs {
                x: Some(dx.dx),
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::UnfoldTime { .. } => {
            let (x, _, _, g) = named!(UnfoldTimeInputs);
            unfold_time_vjp(graph, &name("grad"), &node.op, x, main(g.cols)?)
        }
        Op::FoldTime { .. } => {
            let (x, _, _, g) = named!(FoldTimeInputs);
            fold_time_vjp(graph, &name("grad"), &node.op, x, main(g.dx)?)
        }
        Op::Reshape { .. } => {
            let (x, _, _, g) = named!(ReshapeInputs);
            reshape_vjp(graph, &name("grad"), x.x, main(g.out)?)
        }
        Op::AddTimeRows => {
            let (x, need, _, g) = named!(AddTimeRowsInputs);
            add_time_rows_vjp(graph, &node.name, x, need, main(g.out)?)
        }
        &Op::AttentionScores { heads, causal } => {
            let (x, _, out, g) = named!(AttentionScoresInputs);
            let probs = (out.probs, main(g.probs)?);
            attention_scores_vjp(graph, &name("grad"), (heads, causal), x, probs)
        }
        &Op::AttentionMix { heads } => {
            let (x, _, _, g) = named!(AttentionMixInputs);
            attention_mix_vjp(graph, &name("grad"), heads, x, main(g.out)?)
        }
        Op::LstmForward { keep_for_backward } => {
            if !keep_for_backward {
                return Err(Error::Graph(format!(
                    "LSTM `{}` was built for inference (keep_for_backward = false) and cannot be differentiated",
                    node.name
                )));
            }
            let (x, need, out, g) = named!(LstmForwardInputs);
            let cells = out
                .cells
                .ok_or_else(|| no_grad_for("forward without cells"))?;
            let inputs = LstmBackwardInputs {
                x: x.x,
                h0: x.h0,
                c0: x.c0,
                w_ih: x.w_ih,
                w_hh: x.w_hh,
                y: out.y,
                gates: out.gates,
                cells,
                dy: grad_or_zeros(graph, out.y, g.y)?,
                dh_n: grad_or_zeros(graph, out.h_n, g.h_n)?,
                dc_n: grad_or_zeros(graph, out.c_n, g.c_n)?,
                lengths: x.lengths,
            };
            let op = Op::LstmBackward { input_grad: need.x };
            let d = graph.apply(&name("grad"), op, inputs)?;
            // Both biases share one gradient.
            let grads = LstmForwardInputs {
                x: d.dx,
                h0: Some(d.dh0),
                c0: Some(d.dc0),
                w_ih: Some(d.dw_ih),
                w_hh: Some(d.dw_hh),
                b_ih: Some(d.db),
                b_hh: Some(d.db),
                // The lengths are data: no gradient.
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::GruForward { keep_for_backward } => {
            if !keep_for_backward {
                return Err(Error::Graph(format!(
                    "GRU `{}` was built for inference (keep_for_backward = false) and cannot be differentiated",
                    node.name
                )));
            }
            let (x, need, out, g) = named!(GruForwardInputs);
            let inputs = GruBackwardInputs {
                x: x.x,
                h0: x.h0,
                w_ih: x.w_ih,
                w_hh: x.w_hh,
                y: out.y,
                gates: out.gates,
                hidden: out.hidden,
                dy: grad_or_zeros(graph, out.y, g.y)?,
                dh_n: grad_or_zeros(graph, out.h_n, g.h_n)?,
                lengths: x.lengths,
            };
            let op = Op::GruBackward { input_grad: need.x };
            let d = graph.apply(&name("grad"), op, inputs)?;
            let grads = GruForwardInputs {
                x: d.dx,
                h0: Some(d.dh0),
                w_ih: Some(d.dw_ih),
                w_hh: Some(d.dw_hh),
                b_ih: Some(d.db_ih),
                b_hh: Some(d.db_hh),
                // The lengths are data: no gradient.
                lengths: x.lengths.map(|_| None),
            };
            Ok(grads.into_vec())
        }
        Op::Embedding => {
            let (x, _, _, g) = named!(EmbeddingInputs);
            let vocab = graph.shape(x.table).dim(0);
            let inputs = EmbeddingBackwardInputs {
                ids: x.ids,
                dout: main(g.out)?,
            };
            let op = Op::EmbeddingBackward { vocab };
            let d = graph.apply(&name("grad"), op, inputs)?;
            let grads = EmbeddingInputs {
                table: Some(d.dtable),
                ids: None,
            };
            Ok(grads.into_vec())
        }
        &Op::BatchNorm { eps, training } => {
            let (x, _, out, g) = named!(BatchNormInputs);
            if g.batch.is_some_and(|s| s.mean.is_some() || s.var.is_some()) {
                return Err(no_grad_for("batch statistics"));
            }
            // The statistics the forward normalised with.
            let stats = out
                .batch
                .or(x.running)
                .ok_or_else(|| no_grad_for("statistics"))?;
            let inputs = BatchNormBackwardInputs {
                x: x.x,
                gamma: x.gamma,
                mean: stats.mean,
                var: stats.var,
                dy: main(g.y)?,
            };
            let op = Op::BatchNormBackward { eps, training };
            let d = graph.apply(&name("grad"), op, inputs)?;
            let grads = BatchNormInputs {
                x: Some(d.dx),
                gamma: Some(d.dgamma),
                beta: Some(d.dbeta),
                running: x.running.map(|_| MeanVar {
                    mean: None,
                    var: None,
                }),
            };
            Ok(grads.into_vec())
        }
        Op::LayerNorm { .. } => {
            let (x, _, out, g) = named!(LayerNormInputs);
            if g.mean.is_some() || g.rstd.is_some() {
                return Err(no_grad_for("row statistics"));
            }
            let inputs = LayerNormBackwardInputs {
                x: x.x,
                gamma: x.gamma,
                mean: out.mean,
                rstd: out.rstd,
                dy: main(g.y)?,
            };
            let d = graph.apply(&name("grad"), Op::LayerNormBackward, inputs)?;
            let grads = LayerNormInputs {
                x: Some(d.dx),
                gamma: Some(d.dgamma),
                beta: Some(d.dbeta),
            };
            Ok(grads.into_vec())
        }
        Op::SoftmaxCrossEntropy => {
            let (x, _, out, g) = named!(SoftmaxCrossEntropyInputs);
            if g.probs.is_some() {
                return Err(no_grad_for("probabilities output"));
            }
            let inputs = SoftmaxCrossEntropyBackwardInputs {
                probs: out.probs,
                labels: x.labels,
                dloss: main(g.loss)?,
            };
            let op = Op::SoftmaxCrossEntropyBackward;
            let d = graph.apply(&name("grad"), op, inputs)?;
            let grads = SoftmaxCrossEntropyInputs {
                logits: Some(d.dlogits),
                labels: None,
            };
            Ok(grads.into_vec())
        }
        Op::MseLoss => {
            let (x, _, _, g) = named!(MseLossInputs);
            let inputs = MseLossBackwardInputs {
                pred: x.pred,
                target: x.target,
                dloss: main(g.loss)?,
            };
            let d = graph.apply(&name("grad"), Op::MseLossBackward, inputs)?;
            let grads = MseLossInputs {
                pred: Some(d.dpred),
                target: None,
            };
            Ok(grads.into_vec())
        }
        Op::ActivationBackward(_)
        | Op::SumToShape { .. }
        | Op::Fill { .. }
        | Op::ScatterTime { .. }
        | Op::MeanTimeBackward { .. }
        | Op::MaxTimeBackward { .. }
        | Op::SumBatchToRows { .. }
        | Op::Sinusoids { .. }
        | Op::AttentionScoresBackward { .. }
        | Op::AttentionMixBackward { .. }
        | Op::LstmBackward { .. }
        | Op::GruBackward { .. }
        | Op::EmbeddingBackward { .. }
        | Op::BatchNormBackward { .. }
        | Op::LayerNormBackward
        | Op::SoftmaxCrossEntropyBackward
        | Op::MseLossBackward
        | Op::BatchNormStatsUpdate { .. }
        | Op::Adam(_)
        | Op::Sgd(_)
        | Op::SumSquares
        | Op::ClipGrad { .. }
        | Op::Copy => Err(Error::Graph(format!(
            "node `{}`: {} has no gradient (it is a backward or update op)",
            node.name,
            node.op.name()
        ))),
    }
}
