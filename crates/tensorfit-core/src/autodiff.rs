//! Reverse-mode automatic differentiation that appends the backward graph to the forward
//! graph.
//!
//! The backward pass is made of ordinary nodes (phase [`Phase::Backward`]), so it is
//! scheduled, planned and run exactly like the forward pass: the planner sees which
//! forward tensors the backward nodes read (those are the activations saved for
//! backward) and how long each gradient lives. Each forward op has one rule below giving
//! the nodes that compute its inputs' gradients from its outputs' gradients.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::graph::{Graph, NodeId, Phase, TensorId};
use crate::op::{BinaryOp, Op};

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
            graph.op1(&name, Op::Binary(BinaryOp::Add), &[prev, g])?
        }
    };
    grads.insert(t, sum);
    Ok(())
}

/// Gradient of `out` if given, else zeros of its shape.
fn grad_or_zeros(graph: &mut Graph, out: TensorId, g: Option<TensorId>) -> Result<TensorId> {
    match g {
        Some(g) => Ok(g),
        None => {
            let name = format!("zeros.{}", graph.tensor(out).name);
            let shape = graph.shape(out).clone();
            graph.op1(&name, Op::Fill { value: 0.0, shape }, &[])
        }
    }
}

/// The vector-Jacobian product of one forward node: its inputs' gradients.
fn vjp(
    graph: &mut Graph,
    node: &crate::graph::Node,
    out_grads: &[Option<TensorId>],
    needs: &[bool],
) -> Result<Vec<Option<TensorId>>> {
    let g = |k: usize| out_grads.get(k).copied().flatten();
    let x = |k: usize| node.inputs[k];
    let name = |what: &str| format!("{}.{}", node.name, what);
    let no_grad_for = |what: &str| {
        Error::Graph(format!(
            "node `{}` ({}): gradient of its {what} is not supported",
            node.name,
            node.op.name()
        ))
    };
    let dy = || g(0).ok_or_else(|| no_grad_for("main output missing"));
    match &node.op {
        Op::MatMul { trans_a, trans_b } => {
            let (ta, tb) = (*trans_a, *trans_b);
            let dc = dy()?;
            let da = if !needs[0] {
                None
            } else if !ta {
                let op = Op::MatMul {
                    trans_a: false,
                    trans_b: !tb,
                };
                Some(graph.op1(&name("grad_a"), op, &[dc, x(1)])?)
            } else {
                let op = Op::MatMul {
                    trans_a: tb,
                    trans_b: true,
                };
                Some(graph.op1(&name("grad_a"), op, &[x(1), dc])?)
            };
            let db = if !needs[1] {
                None
            } else if !tb {
                let op = Op::MatMul {
                    trans_a: !ta,
                    trans_b: false,
                };
                Some(graph.op1(&name("grad_b"), op, &[x(0), dc])?)
            } else {
                let op = Op::MatMul {
                    trans_a: true,
                    trans_b: ta,
                };
                Some(graph.op1(&name("grad_b"), op, &[dc, x(0)])?)
            };
            Ok(vec![da, db])
        }
        Op::Binary(bop) => {
            let dout = dy()?;
            let (da, db_full) = match bop {
                BinaryOp::Add => (Some(dout), Some(dout)),
                BinaryOp::Mul => {
                    let mul = Op::Binary(BinaryOp::Mul);
                    let da = if needs[0] {
                        Some(graph.op1(&name("grad_a"), mul.clone(), &[dout, x(1)])?)
                    } else {
                        None
                    };
                    let db = if needs[1] {
                        Some(graph.op1(&name("grad_b_full"), mul, &[dout, x(0)])?)
                    } else {
                        None
                    };
                    (da, db)
                }
            };
            let b_shape = graph.shape(x(1)).clone();
            let db = match db_full {
                Some(d) if needs[1] && graph.shape(d) != &b_shape => {
                    Some(graph.op1(&name("grad_b"), Op::SumToShape { shape: b_shape }, &[d])?)
                }
                other => other,
            };
            Ok(vec![da, db])
        }
        Op::Activation(f) => {
            let dx = graph.op1(
                &name("grad"),
                Op::ActivationBackward(*f),
                &[node.outputs[0], dy()?],
            )?;
            Ok(vec![Some(dx)])
        }
        Op::SliceTime { t } => {
            let steps = graph.shape(x(0)).dim(0);
            let dx = graph.op1(&name("grad"), Op::ScatterTime { t: *t, steps }, &[dy()?])?;
            Ok(vec![Some(dx)])
        }
        Op::LstmForward { keep_for_backward } => {
            if !keep_for_backward {
                return Err(Error::Graph(format!(
                    "LSTM `{}` was built for inference (keep_for_backward = false) and cannot be differentiated",
                    node.name
                )));
            }
            let (y, h_n, c_n, gates, cells) = (
                node.outputs[0],
                node.outputs[1],
                node.outputs[2],
                node.outputs[3],
                node.outputs[4],
            );
            let dy = grad_or_zeros(graph, y, g(0))?;
            let dh_n = grad_or_zeros(graph, h_n, g(1))?;
            let dc_n = grad_or_zeros(graph, c_n, g(2))?;
            let input_grad = needs[0];
            let inputs = [
                x(0),
                x(1),
                x(2),
                x(3),
                x(4),
                y,
                gates,
                cells,
                dy,
                dh_n,
                dc_n,
            ];
            let outs = graph.op(&name("grad"), Op::LstmBackward { input_grad }, &inputs)?;
            let dx = if input_grad { Some(outs[6]) } else { None };
            // Inputs: x, h0, c0, w_ih, w_hh, b_ih, b_hh; both biases share one gradient.
            Ok(vec![
                dx,
                Some(outs[1]),
                Some(outs[2]),
                Some(outs[3]),
                Some(outs[4]),
                Some(outs[5]),
                Some(outs[5]),
            ])
        }
        Op::BatchNorm { eps, training } => {
            if g(1).is_some() || g(2).is_some() {
                return Err(no_grad_for("batch statistics"));
            }
            let (mean, var) = if *training {
                (node.outputs[1], node.outputs[2])
            } else {
                (x(3), x(4))
            };
            let outs = graph.op(
                &name("grad"),
                Op::BatchNormBackward {
                    eps: *eps,
                    training: *training,
                },
                &[x(0), x(1), mean, var, dy()?],
            )?;
            let mut grads = vec![Some(outs[0]), Some(outs[1]), Some(outs[2])];
            if !training {
                grads.extend([None, None]);
            }
            Ok(grads)
        }
        Op::SoftmaxCrossEntropy => {
            if g(1).is_some() {
                return Err(no_grad_for("probabilities output"));
            }
            let dlogits = graph.op1(
                &name("grad"),
                Op::SoftmaxCrossEntropyBackward,
                &[node.outputs[1], x(1), dy()?],
            )?;
            Ok(vec![Some(dlogits), None])
        }
        Op::ActivationBackward(_)
        | Op::SumToShape { .. }
        | Op::Fill { .. }
        | Op::ScatterTime { .. }
        | Op::LstmBackward { .. }
        | Op::BatchNormBackward { .. }
        | Op::SoftmaxCrossEntropyBackward
        | Op::BatchNormStatsUpdate { .. }
        | Op::Adam(_)
        | Op::Copy => Err(Error::Graph(format!(
            "node `{}`: {} has no gradient (it is a backward or update op)",
            node.name,
            node.op.name()
        ))),
    }
}
