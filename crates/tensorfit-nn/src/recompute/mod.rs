//! Training with activation recomputation inside the truncated-BPTT window.
//!
//! A training segment of `L` steps normally keeps, for every layer and step, the gates,
//! the cell state and the output for backward. With recomputation (Chen et al. 2016;
//! Gruslys et al. 2016, memory-efficient BPTT) the segment is split into sub-segments of
//! `S` steps: the forward pass keeps only the carried state (h, c for the LSTM, h for
//! the GRU) at each sub-segment border, and the backward pass, from the last sub-segment
//! to the first, runs that sub-segment's forward again (this time keeping its
//! activations), then its backward, handing the state gradients to the sub-segment
//! before it. Memory for saved activations drops from `L` steps to `S`; the price is one
//! more forward pass. The gradients are those of the unsplit segment (only the order of
//! the weight-gradient sums changes).
//!
//! A head on the last step (its layers, the output layer and the loss) is differentiated
//! by autodiff as usual; a head on every step is recomputed with each sub-segment
//! ([`every_step`]). The input side (an embedding if any, the recurrent stack) is
//! differentiated here by hand, because the recomputed forward nodes must come between
//! backward nodes. An embedding is looked up again in each recomputed sub-segment (a
//! gather: cheaper than keeping its output), and its gradient comes from the first
//! layer's input gradient.
//!
//! Over a padded batch each sub-segment has its own input `lengths.{k}`: each sequence's
//! steps within the sub-segment, which the host cuts as it cuts a batch into programs
//! (`trainer::padded::lengths_within`; 0 for a sequence that ended before it, whose state
//! carries through). The top layer's final state is then each sequence's own last step,
//! what a head on the last step reads.

mod every_step;

use tensorfit_core::args::{BinaryInputs, FillInputs};
use tensorfit_core::{backward, BinaryOp, Error, Graph, Op, Phase, Result, Shape, TensorId};

use crate::description::{HeadOn, LossSpec, ModelDescription};
use crate::layers::{dropout, Between, Context, Embedding, LayerForward, RecurrentWeights};
use crate::model::{head, Leaves, Mode, Named};
use crate::network::{Network, NetworkTensors};
use crate::options::carry_chunks;
use crate::train_graph::{loss_grad_seed, no_gradient, TrainGraph};
use every_step::{check, Part, Span};

/// Whether training `model` can recompute its activations (what the planner offers):
/// all but a layer that reads each sequence whole and a head on every step holding a
/// BatchNorm (`every_step::check` says which).
pub fn recomputable(model: &ModelDescription) -> bool {
    model
        .network()
        .and_then(|net| {
            net.check_splits_in_time("recomputation in sub-segments")?;
            check(&net)
        })
        .is_ok()
}

fn zeros(g: &mut Graph, name: &str, shape: Shape) -> Result<TensorId> {
    let fill = Op::Fill { value: 0.0, shape };
    Ok(g.apply(name, fill, FillInputs::default())?.out)
}

/// One sub-segment's input, its lengths (padded), the state entering it (per layer, slot
/// order), and where its elements start in a layer's output over the whole segment.
type SubSegment<'a> = (TensorId, Option<TensorId>, &'a [Vec<TensorId>], usize);

/// The input side over one sub-segment: the embedding's output if any, then each layer's
/// input and its outputs. Each layer's output but the last passes through `between`'s
/// dropout, the sub-segment's elements numbered from its offset in the mask of the whole
/// segment.
fn stack_over(
    g: &mut Graph,
    prefix: &str,
    net: &Network,
    (x, lengths, border, offset): SubSegment<'_>,
    ids: &NetworkTensors<TensorId>,
    (keep, between): (bool, Between),
) -> Result<Vec<(TensorId, LayerForward)>> {
    let mut input = match &ids.embedding {
        Some(w) => Embedding::forward(g, &format!("{prefix}.embedding"), x, w)?,
        None => x,
    };
    let rec = &net.only_recurrent("recomputation")?.cells;
    let weights = recurrent_ids(ids)?;
    let mut layers = Vec::with_capacity(border.len());
    for (l, state) in border.iter().enumerate() {
        let name = format!("{prefix}.{}", rec.layer_name(l));
        let outs = rec.layer(g, &name, l, (input, lengths), state, weights, keep)?;
        layers.push((input, outs));
        input = between.after(g, (l, border.len()), outs.y(), offset)?;
    }
    Ok(layers)
}

/// The recurrent stack's leaves among `ids`.
fn recurrent_ids(ids: &NetworkTensors<TensorId>) -> Result<&RecurrentWeights<TensorId>> {
    ids.recurrent()
        .ok_or_else(|| Error::Graph("the network's tensors have no recurrent stack".into()))
}

/// `prev + next` for each pair, named after the parameters `names`; a pair equal to the
/// one before it (the LSTM's shared bias gradient) reuses that sum.
fn sum_grads(
    g: &mut Graph,
    names: &Named,
    seg: usize,
    prev: &[TensorId],
    next: &[TensorId],
) -> Result<Vec<TensorId>> {
    let mut out: Vec<TensorId> = Vec::with_capacity(prev.len());
    for (i, ((a, b), (name, _))) in prev.iter().zip(next).zip(names).enumerate() {
        if i > 0 && (prev[i - 1], next[i - 1]) == (*a, *b) {
            out.push(out[i - 1]);
            continue;
        }
        let add = Op::Binary(BinaryOp::Add);
        let node = format!("grad_sum.{name}.seg{seg}");
        out.push(g.apply(&node, add, BinaryInputs { a: *a, b: *b })?.out);
    }
    Ok(out)
}

/// The head by autodiff from `loss` (with the seed `one`): the gradient of the head's
/// input `rows` and of each head parameter `params`, in their order.
fn head_backward(
    g: &mut Graph,
    params: &Named,
    (loss, one): (TensorId, TensorId),
    rows: TensorId,
) -> Result<(TensorId, Vec<TensorId>)> {
    let mut wrt: Vec<TensorId> = params.iter().map(|(_, t)| *t).collect();
    wrt.push(rows);
    let mut grads = backward(g, &[(loss, one)], &wrt)?;
    let drows = grads
        .pop()
        .flatten()
        .ok_or_else(|| Error::Graph("the loss does not depend on the recurrent output".into()))?;
    let params = params
        .iter()
        .zip(grads)
        .map(|((name, _), grad)| grad.ok_or_else(|| no_gradient(name)))
        .collect::<Result<Vec<_>>>()?;
    Ok((drows, params))
}

/// Builds forward, loss and backward of one `steps`-step training segment of `batch`
/// sequences recomputing sub-segments of at most `segment` steps; over a padded batch
/// when `padded`.
pub(crate) fn train_graph(
    model: &ModelDescription,
    (batch, steps): (usize, usize),
    segment: usize,
    padded: bool,
) -> Result<TrainGraph> {
    let net = model.network()?;
    check(&net)?;
    if padded {
        crate::every_step::check_padded(&net, crate::model::Mode::Train)?;
    }
    let every_step = net.head_on == HeadOn::EveryStep;
    let stack = net.only_recurrent("recomputation")?;
    let rec = &stack.cells;
    let layers = rec.layers();
    let mut g = Graph::new();
    let leaves = Leaves::add(&mut g, &net);
    let ids = &leaves.ids;
    let lens = carry_chunks(steps, segment);
    let key = dropout::key_leaf(&mut g, net.has_dropout());
    let between = Between {
        p: stack.dropout,
        key,
    };
    // Each sub-segment's first step, and where its elements start in the mask of a
    // layer's whole output.
    let starts: Vec<usize> = lens
        .iter()
        .scan(0, |t0, &len| {
            let at = *t0;
            *t0 += len;
            Some(at)
        })
        .collect();
    let offsets: Vec<usize> = starts.iter().map(|t0| t0 * batch * rec.hidden()).collect();
    let xs: Vec<(TensorId, usize)> = lens
        .iter()
        .enumerate()
        .map(|(k, &s)| (g.input(&format!("x.{k}"), net.input_shape(batch, s)), s))
        .collect();
    let lengths: Vec<TensorId> = match padded {
        true => (0..xs.len())
            .map(|k| g.input(&format!("lengths.{k}"), [batch]))
            .collect(),
        false => Vec::new(),
    };
    let span = |k: usize| Span {
        t0: starts[k],
        len: lens[k],
        steps,
    };
    let loss_scale = match (every_step, net.out.loss) {
        (true, LossSpec::SoftmaxCrossEntropy { .. }) => Some(g.input("loss_scale", [1])),
        _ => None,
    };

    // Forward, keeping only the state at each sub-segment border: border[k][l] is the
    // state entering sub-segment k at layer l; with a head on every step, each
    // sub-segment's part of the head.
    let mut border: Vec<Vec<Vec<TensorId>>> = vec![(0..layers)
        .map(|l| rec.state_leaves(&mut g, l, batch))
        .collect()];
    let mut parts: Vec<Part> = Vec::new();
    for (k, &(x, _)) in xs.iter().enumerate() {
        let at = (x, lengths.get(k).copied(), &border[k][..], offsets[k]);
        let seg = stack_over(&mut g, &format!("seg{k}"), &net, at, ids, (false, between))?;
        if every_step {
            let y = seg[layers - 1].1.y();
            let part =
                every_step::part(&mut g, &net, ids, (k, span(k), y), None, (key, loss_scale))?;
            parts.push(part);
        }
        border.push(seg.iter().map(|(_, outs)| outs.finals()).collect());
    }
    // A head on the last step: the top layer's final h (each sequence's own last step),
    // its gradient from the head by autodiff.
    let one = loss_grad_seed(&mut g)?;
    let mut last_step = None;
    if !every_step {
        let last = border[xs.len()][layers - 1][0];
        let mut cx = Context::new(Mode::Train, batch, None, key);
        let h = head(&mut g, &net, ids, last, &mut cx)?;
        let (dlast, head_grads) = head_backward(&mut g, &leaves.head, (h.loss, one), last)?;
        last_step = Some((h, dlast, head_grads));
    }

    // The input side, sub-segment by sub-segment from the last, recomputing each. The
    // gradient arriving at each layer's final state: the head's at the top layer's h
    // (a head on the last step), zeros elsewhere.
    g.set_phase(Some(Phase::Backward));
    let mut dstate: Vec<Vec<TensorId>> = Vec::with_capacity(layers);
    for (l, slots) in border[0].iter().enumerate() {
        let mut d = Vec::with_capacity(slots.len());
        for s in 0..slots.len() {
            d.push(match (&last_step, l == layers - 1 && s == 0) {
                (Some((_, dlast, _)), true) => *dlast,
                _ => {
                    let part = if s == 0 { "h" } else { "c" };
                    let name = format!("zeros.d{part}_l{l}");
                    zeros(&mut g, &name, rec.state_shape(batch))?
                }
            });
        }
        dstate.push(d);
    }
    // The input side's parameter gradients in table order, summed over the sub-segments;
    // with a head on every step, the head's too.
    let mut acc: Option<Vec<TensorId>> = None;
    let mut head_acc: Option<Vec<TensorId>> = None;
    for (k, &(x, len)) in xs.iter().enumerate().rev() {
        let prefix = format!("seg{k}.recompute");
        let seg_lengths = lengths.get(k).copied();
        let at = (x, seg_lengths, &border[k][..], offsets[k]);
        let kept = stack_over(&mut g, &prefix, &net, at, ids, (true, between))?;
        let mut dy = match parts.get(k) {
            // The head's part again over the recomputed output, differentiated by
            // autodiff (which reads forward nodes only) for the top layer's `dy`.
            Some(p) => {
                g.set_phase(None);
                let y = kept[layers - 1].1.y();
                let again = (k, span(k), y);
                let part =
                    every_step::part(&mut g, &net, ids, again, Some(p.labels), (key, loss_scale))?;
                let (dy, head_grads) = head_backward(&mut g, &leaves.head, (part.loss, one), y)?;
                g.set_phase(Some(Phase::Backward));
                head_acc = Some(match head_acc {
                    None => head_grads,
                    Some(prev) => sum_grads(&mut g, &leaves.head, k, &prev, &head_grads)?,
                });
                dy
            }
            None => {
                let hidden = Shape::from([len, batch, rec.hidden()]);
                zeros(&mut g, &format!("seg{k}.zeros.dy"), hidden)?
            }
        };
        let mut grads: Vec<Vec<TensorId>> = vec![Vec::new(); layers];
        for l in (0..layers).rev() {
            let (input, outs) = &kept[l];
            let name = format!("seg{k}.{}.grad", rec.layer_name(l));
            let input_grad = l > 0 || net.embedding.is_some();
            let d = rec.layer_backward(
                &mut g,
                &name,
                l,
                (*input, seg_lengths, &border[k][l]),
                recurrent_ids(ids)?,
                outs,
                (dy, &dstate[l]),
                input_grad,
            )?;
            dstate[l] = d.dstate;
            grads[l] = d.weights;
            if let Some(dx) = d.dx {
                // Layer l read layer l-1's output through dropout; its gradient passes
                // back through the same mask (no dropout below layer 0).
                dy = match l {
                    0 => dx,
                    _ => between.after(&mut g, (l - 1, layers), dx, offsets[k])?,
                };
            }
        }
        let mut seg_grads: Vec<TensorId> = Vec::new();
        if let (Some(e), Some(_)) = (&net.embedding, &ids.embedding) {
            seg_grads.push(e.backward(&mut g, &format!("seg{k}.embedding.grad"), x, dy)?);
        }
        seg_grads.extend(grads.into_iter().flatten());
        acc = Some(match acc {
            None => seg_grads,
            Some(prev) => sum_grads(&mut g, &leaves.input, k, &prev, &seg_grads)?,
        });
    }
    g.set_phase(None);

    // In table order: the input side's gradients, then the head's.
    let mut grads = acc.unwrap_or_default();
    if grads.len() != leaves.input.len() {
        return Err(Error::Graph(format!(
            "{steps} steps gave no sub-segment to differentiate"
        )));
    }
    let (loss, labels, probs, batch_stats) = match last_step {
        Some((h, _, head_grads)) => {
            grads.extend(head_grads);
            (h.loss, vec![h.labels], vec![h.probs], h.batch_stats)
        }
        None => {
            grads.extend(head_acc.unwrap_or_default());
            let loss = every_step::total(&mut g, &parts)?;
            let labels = parts.iter().map(|p| p.labels).collect();
            (
                loss,
                labels,
                parts.iter().map(|p| p.probs).collect(),
                Vec::new(),
            )
        }
    };
    if grads.len() != leaves.input.len() + leaves.head.len() {
        return Err(Error::Graph("the head's parameters got no gradient".into()));
    }
    let carried = border[0].iter().flatten().copied().zip(rec.state_slots());
    let finals = border[xs.len()].iter().flatten().copied().collect();
    Ok(TrainGraph {
        finals,
        graph: g,
        xs,
        lengths,
        labels,
        probs,
        loss,
        loss_scale,
        batch_stats,
        params: leaves.params(),
        grads,
        carried: carried.collect(),
    })
}
