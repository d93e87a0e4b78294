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
//! The head (BatchNorm, Dense, BatchNorm, output) is differentiated by autodiff as usual;
//! the LSTM stack's backward is written here by hand, because the recomputed forward
//! nodes must come between backward nodes.

use std::collections::HashMap;

use tensorfit_core::args::{BinaryInputs, FillInputs, LstmBackwardInputs, LstmForwardOutputs};
use tensorfit_core::{backward, BinaryOp, Error, Graph, Op, Phase, Result, Shape, TensorId};

use crate::config::ModelConfig;
use crate::model::{find, head, input_shape, leaves, lstm_layer, Mode, Named};
use crate::programs::{carry_chunks, loss_grad_seed, no_gradient, TrainGraph};

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
    params: &Named,
    keep: bool,
) -> Result<Vec<(TensorId, LstmForwardOutputs<TensorId>)>> {
    let mut input = x;
    let mut layers = Vec::with_capacity(border.len());
    for (l, &(h0, c0)) in border.iter().enumerate() {
        let name = format!("{prefix}.lstm_l{l}");
        let outs = lstm_layer(g, &name, input, h0, c0, params, l, keep)?;
        layers.push((input, outs));
        input = outs.y;
    }
    Ok(layers)
}

/// Builds forward, loss and backward of one `steps`-step training segment recomputing
/// sub-segments of at most `segment` steps.
pub(crate) fn train_graph(
    cfg: &ModelConfig,
    batch: usize,
    steps: usize,
    segment: usize,
) -> Result<TrainGraph> {
    cfg.validate()?;
    let layers = cfg.layers;
    let state_shape = Shape::from([batch, cfg.hidden]);
    let mut g = Graph::new();
    let (params, running) = leaves(&mut g, cfg);
    let lens = carry_chunks(steps, segment);
    let xs: Vec<(TensorId, usize)> = lens
        .iter()
        .enumerate()
        .map(|(k, &s)| (g.input(&format!("x.{k}"), input_shape(cfg, batch, s)), s))
        .collect();

    // Forward, keeping only the state at each sub-segment border: border[k][l] is the
    // (h, c) entering sub-segment k at layer l.
    let mut border: Vec<Vec<(TensorId, TensorId)>> = vec![(0..layers)
        .map(|l| {
            (
                g.state(&format!("state.h_l{l}"), state_shape.clone()),
                g.state(&format!("state.c_l{l}"), state_shape.clone()),
            )
        })
        .collect()];
    for (k, &(x, _)) in xs.iter().enumerate() {
        let seg = stack_over(&mut g, &format!("seg{k}"), x, &border[k], &params, false)?;
        border.push(seg.iter().map(|(_, outs)| (outs.h_n, outs.c_n)).collect());
    }
    // The top layer's last output is its final h.
    let last = border[xs.len()][layers - 1].0;
    let h = head(&mut g, cfg, last, batch, &params, &running, Mode::Train)?;

    // The head by autodiff, with the gradient of `last` as one more result.
    let one = loss_grad_seed(&mut g)?;
    let head_params: Vec<&(String, TensorId)> = params
        .iter()
        .filter(|(n, _)| !n.starts_with("lstm."))
        .collect();
    let mut wrt: Vec<TensorId> = head_params.iter().map(|(_, t)| *t).collect();
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
    let mut acc: HashMap<String, TensorId> = HashMap::new();
    for (k, &(x, len)) in xs.iter().enumerate().rev() {
        let prefix = format!("seg{k}.recompute");
        let kept = stack_over(&mut g, &prefix, x, &border[k], &params, true)?;
        let mut dy = zeros(
            &mut g,
            &format!("seg{k}.zeros.dy"),
            Shape::from([len, batch, cfg.hidden]),
        )?;
        for l in (0..layers).rev() {
            let (input, outs) = kept[l];
            let (h0, c0) = border[k][l];
            let w = |n: &str| find(&params, &format!("lstm.{n}_l{l}"));
            let name = format!("seg{k}.lstm_l{l}.grad");
            let inputs = LstmBackwardInputs {
                x: input,
                h0,
                c0,
                w_ih: w("weight_ih"),
                w_hh: w("weight_hh"),
                y: outs.y,
                gates: outs.gates,
                cells: outs
                    .cells
                    .ok_or_else(|| Error::Graph(format!("{name}: the forward kept no cells")))?,
                dy,
                dh_n: dh[l],
                dc_n: dc[l],
            };
            let grads = g.apply(&name, Op::LstmBackward { input_grad: l > 0 }, inputs)?;
            dh[l] = grads.dh0;
            dc[l] = grads.dc0;
            for (name, t) in [
                ("weight_ih", grads.dw_ih),
                ("weight_hh", grads.dw_hh),
                ("bias", grads.db),
            ] {
                let key = format!("lstm.{name}_l{l}");
                let sum = match acc.get(&key) {
                    Some(&prev) => {
                        let add = Op::Binary(BinaryOp::Add);
                        let inputs = BinaryInputs { a: prev, b: t };
                        g.apply(&format!("grad_sum.{key}.seg{k}"), add, inputs)?.out
                    }
                    None => t,
                };
                acc.insert(key, sum);
            }
            if let Some(dx) = grads.dx {
                dy = dx;
            }
        }
    }
    g.set_phase(None);

    let mut grads = Vec::with_capacity(params.len());
    let mut head_iter = head_grads.iter();
    for (name, _) in &params {
        let grad = if let Some(rest) = name.strip_prefix("lstm.") {
            // Both bias vectors share one gradient.
            let key = match rest.split_once("_l") {
                Some(("bias_ih" | "bias_hh", layer)) => format!("lstm.bias_l{layer}"),
                _ => name.clone(),
            };
            acc.get(&key).copied()
        } else {
            head_iter.next().copied().flatten()
        };
        grads.push(grad.ok_or_else(|| no_gradient(name))?);
    }
    Ok(TrainGraph {
        graph: g,
        xs,
        head: h,
        params,
        running,
        grads,
    })
}
