//! Training with activation recomputation inside the truncated-BPTT window.
//!
//! A training segment of `L` steps normally keeps, for every layer and step, the gates,
//! the cell state and the output for backward. With recomputation (Chen et al. 2016;
//! Gruslys et al. 2016, memory-efficient BPTT) the segment is split into sub-segments of
//! `S` steps: the forward pass keeps only the (h, c) at each sub-segment border, and the
//! backward pass, from the last sub-segment to the first, runs that sub-segment's forward
//! again (this time keeping its activations), then its backward, handing the state
//! gradients (dh, dc) to the sub-segment before it. Memory for saved activations drops
//! from `L` steps to `S`; the price is one more forward pass. The gradients are those of
//! the unsplit segment (only the order of the weight-gradient sums changes).
//!
//! The head (its layers, the output layer and the loss) is differentiated by autodiff as usual;
//! the LSTM stack's backward is written here by hand, because the recomputed forward
//! nodes must come between backward nodes. Only an LSTM stack reading the sequence
//! directly is recomputed (a GRU stack or an embedding before the stack is refused here,
//! and the planner does not offer it: [`recomputable`]).

use tensorfit_core::args::{BinaryInputs, FillInputs, LstmForwardOutputs};
use tensorfit_core::{backward, BinaryOp, Error, Graph, Op, Phase, Result, Shape, TensorId};

use crate::description::ModelDescription;
use crate::layers::{Lstm, LstmGrads, LstmWeights, Recurrent, RecurrentWeights, Tensors};
use crate::model::{head, Leaves, Mode};
use crate::network::Network;
use crate::options::carry_chunks;
use crate::train_graph::{loss_grad_seed, no_gradient, TrainGraph};

fn zeros(g: &mut Graph, name: &str, shape: Shape) -> Result<TensorId> {
    let fill = Op::Fill { value: 0.0, shape };
    Ok(g.apply(name, fill, FillInputs::default())?.out)
}

/// The LSTM stack over one sub-segment, from the state `border` entering it (per layer):
/// each layer's input and its outputs.
fn stack_over(
    g: &mut Graph,
    prefix: &str,
    x: TensorId,
    border: &[(TensorId, TensorId)],
    weights: &[LstmWeights<TensorId>],
    keep: bool,
) -> Result<Vec<(TensorId, LstmForwardOutputs<TensorId>)>> {
    let mut input = x;
    let mut layers = Vec::with_capacity(border.len());
    for (l, (&state, w)) in border.iter().zip(weights).enumerate() {
        let name = format!("{prefix}.lstm_l{l}");
        let outs = Lstm::layer(g, &name, input, state, w, keep)?;
        layers.push((input, outs));
        input = outs.y;
    }
    Ok(layers)
}

/// The LSTM stack of `net` if this module can recompute it: no embedding before it.
fn recomputed_lstm(net: &Network) -> Option<Lstm> {
    match (&net.recurrent, &net.embedding) {
        (Recurrent::Lstm(l), None) => Some(*l),
        _ => None,
    }
}

/// Whether training `model` can recompute activations in sub-segments.
pub fn recomputable(model: &ModelDescription) -> bool {
    model
        .network()
        .is_ok_and(|net| recomputed_lstm(&net).is_some())
}

/// Builds forward, loss and backward of one `steps`-step training segment recomputing
/// sub-segments of at most `segment` steps.
pub(crate) fn train_graph(
    model: &ModelDescription,
    batch: usize,
    steps: usize,
    segment: usize,
) -> Result<TrainGraph> {
    let net = model.network()?;
    let refused = || {
        Error::input(format!(
            "recomputation is built for LSTM stacks reading the sequence directly; the model is {model}"
        ))
    };
    let lstm = recomputed_lstm(&net).ok_or_else(refused)?;
    let layers = lstm.layers;
    let state_shape = lstm.state_shape(batch);
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let RecurrentWeights::Lstm(weights) = &leaves.ids.recurrent else {
        return Err(refused());
    };
    let lens = carry_chunks(steps, segment);
    let xs: Vec<(TensorId, usize)> = lens
        .iter()
        .enumerate()
        .map(|(k, &s)| (g.input(&format!("x.{k}"), lstm.input_shape(batch, s)), s))
        .collect();

    // Forward, keeping only the state at each sub-segment border: border[k][l] is the
    // (h, c) entering sub-segment k at layer l.
    let mut border: Vec<Vec<(TensorId, TensorId)>> = vec![(0..layers)
        .map(|l| lstm.state_leaves(&mut g, l, batch))
        .collect()];
    for (k, &(x, _)) in xs.iter().enumerate() {
        let seg = stack_over(&mut g, &format!("seg{k}"), x, &border[k], weights, false)?;
        border.push(seg.iter().map(|(_, outs)| (outs.h_n, outs.c_n)).collect());
    }
    // The top layer's last output is its final h.
    let last = border[xs.len()][layers - 1].0;
    let h = head(&mut g, &net, &leaves.ids, last, batch, Mode::Train)?;

    // The head by autodiff, with the gradient of `last` as one more result.
    let one = loss_grad_seed(&mut g)?;
    let mut wrt: Vec<TensorId> = leaves.head.iter().map(|(_, t)| *t).collect();
    wrt.push(last);
    let head_grads = backward(&mut g, &[(h.loss, one)], &wrt)?;
    let dlast = head_grads
        .last()
        .copied()
        .flatten()
        .ok_or_else(|| Error::Graph("the loss does not depend on the LSTM output".into()))?;

    // The LSTM stack, sub-segment by sub-segment from the last, recomputing each.
    g.set_phase(Some(Phase::Backward));
    let mut dh: Vec<TensorId> = Vec::with_capacity(layers);
    let mut dc: Vec<TensorId> = Vec::with_capacity(layers);
    for l in 0..layers {
        dh.push(if l == layers - 1 {
            dlast
        } else {
            zeros(&mut g, &format!("zeros.dh_l{l}"), state_shape.clone())?
        });
        dc.push(zeros(
            &mut g,
            &format!("zeros.dc_l{l}"),
            state_shape.clone(),
        )?);
    }
    // Each layer's weight gradients, summed over the sub-segments.
    let mut acc: Vec<Option<LstmGrads<TensorId>>> = vec![None; layers];
    for (k, &(x, len)) in xs.iter().enumerate().rev() {
        let prefix = format!("seg{k}.recompute");
        let kept = stack_over(&mut g, &prefix, x, &border[k], weights, true)?;
        let mut dy = zeros(
            &mut g,
            &format!("seg{k}.zeros.dy"),
            Shape::from([len, batch, lstm.hidden]),
        )?;
        for l in (0..layers).rev() {
            let (input, outs) = &kept[l];
            let name = format!("seg{k}.lstm_l{l}.grad");
            let (d, grads) = Lstm::layer_backward(
                &mut g,
                &name,
                *input,
                border[k][l],
                &weights[l],
                outs,
                (dy, dh[l], dc[l]),
                l > 0,
            )?;
            dh[l] = d.dh0;
            dc[l] = d.dc0;
            acc[l] = Some(match acc[l] {
                None => grads,
                Some(prev) => {
                    let mut sum = |what: &str, a: TensorId, b: TensorId| -> Result<TensorId> {
                        let add = Op::Binary(BinaryOp::Add);
                        let name = format!("grad_sum.lstm.{what}_l{l}.seg{k}");
                        Ok(g.apply(&name, add, BinaryInputs { a, b })?.out)
                    };
                    LstmGrads {
                        w_ih: sum("weight_ih", prev.w_ih, grads.w_ih)?,
                        w_hh: sum("weight_hh", prev.w_hh, grads.w_hh)?,
                        bias: sum("bias", prev.bias, grads.bias)?,
                    }
                }
            });
            if let Some(dx) = d.dx {
                dy = dx;
            }
        }
    }
    g.set_phase(None);

    // In table order: the LSTM stack's gradients, then the head's.
    let mut grads: Vec<TensorId> = acc
        .iter()
        .flatten()
        .flat_map(|a| {
            a.per_weight()
                .items()
                .into_iter()
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    if grads.len() != leaves.input.len() {
        return Err(Error::Graph(format!(
            "{steps} steps gave no sub-segment to differentiate"
        )));
    }
    for (grad, (name, _)) in head_grads.iter().zip(&leaves.head) {
        grads.push(grad.ok_or_else(|| no_gradient(name))?);
    }
    let params = leaves.params();
    Ok(TrainGraph {
        graph: g,
        xs,
        head: h,
        params,
        grads,
        carried: border[0]
            .iter()
            .flat_map(|&(h, c)| [h, c])
            .zip(lstm.state_slots())
            .collect(),
    })
}
