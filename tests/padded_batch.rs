//! A padded batch through the whole classifier (`classifier_at_lengths`, on the CPU
//! backend), with LSTM and with GRU layers: each row gets what its sequence alone at its own length gets — the class
//! probabilities, and, since the loss is the batch mean, the loss and every gradient
//! (parameters and initial state) are the mean of the sequences' own. The head has no
//! BatchNorm here: in training BatchNorm mixes the rows of a batch, padded or not. And the
//! padded graph runs inside the arenas its memory plan lays out, giving what it gives
//! unplanned (the `lengths` input lives as long as every layer and the head read it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::dense_head_model;
use tensorfit::core::args::FillInputs;
use tensorfit::core::{backward, Backend, Executable, Graph, Op, Shape, TensorId, TensorView};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::model::{classifier_at_lengths, Mode};
use tensorfit::nn::{Cell, ModelDescription, ParamStore, Rng};
use tensorfit::plan::{Limits, MemoryPlan, ProgramSpec};
use tensorfit_testing::assert_close;

/// What one run gives: probabilities `[B, classes]`, the loss, and the gradient of every
/// parameter (by name) and of each carried state tensor (by slot name, `state.h_l{k}`,
/// ...).
struct Run {
    probs: Vec<f32>,
    loss: f32,
    grads: HashMap<String, Vec<f32>>,
}

/// The inputs of a batch: `x` `[T, B, F]`, labels, each carried state tensor `[B, H]` in
/// slot order (per layer h, c for an LSTM, h for a GRU).
struct Batch {
    steps: usize,
    batch: usize,
    x: Vec<f32>,
    labels: Vec<f32>,
    state: Vec<Vec<f32>>,
}

/// How a run's tensors get their memory.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Memory {
    /// The executable allocates each tensor.
    Own,
    /// Bound into the arenas of the graph's memory plan.
    Planned,
}

/// The executable of `g` on `be`, its memory as `memory` says; `persistent` names the
/// parameter and state tensors, `outputs` what the host reads.
fn executable(
    g: Graph,
    be: &mut CpuBackend,
    memory: Memory,
    persistent: Vec<(TensorId, String)>,
    outputs: Vec<TensorId>,
) -> Executable {
    if memory == Memory::Own {
        return Executable::new(g, be, HashMap::new()).unwrap();
    }
    let spec = ProgramSpec {
        name: "train".to_string(),
        graph: &g,
        outputs,
        persistent: persistent.clone(),
    };
    let limits = Limits {
        max_buffer_bytes: 1 << 40,
        alignment_bytes: 64,
        overhead_bytes: 0,
    };
    let layout = MemoryPlan::new(&[spec], limits).unwrap().layout();
    let buffers: Vec<_> = (layout.arena_bytes.iter())
        .map(|&b| be.allocate(b).unwrap())
        .collect();
    let bound = persistent
        .iter()
        .map(|(t, key)| {
            let (arena, offset) = layout.persistent[key];
            let view = TensorView::at(buffers[arena], offset, g.shape(*t).clone());
            (*t, view)
        })
        .collect();
    let placement = &layout.programs["train"];
    Executable::in_buffers(g, bound, placement, &buffers).unwrap()
}

fn run(cfg: &ModelDescription, b: &Batch, lengths: Option<&[f32]>, memory: Memory) -> Run {
    let mut g = Graph::new();
    let dims = (b.batch, b.steps);
    let c = classifier_at_lengths(&mut g, cfg, dims, Mode::Train, lengths.is_some()).unwrap();
    let fill = Op::Fill {
        value: 1.0,
        shape: Shape::from([1]),
    };
    let one = g.apply("seed", fill, FillInputs::default()).unwrap().out;
    let mut wrt: Vec<(String, TensorId)> = c.params.clone();
    let carried = c.stack.carried.iter();
    wrt.extend(carried.map(|(leaf, slot)| (slot.name(), *leaf)));
    let ids: Vec<TensorId> = wrt.iter().map(|(_, t)| *t).collect();
    let grads = backward(&mut g, &[(c.loss, one)], &ids).unwrap();
    let mut persistent: Vec<(TensorId, String)> =
        c.params.iter().map(|(n, t)| (*t, n.clone())).collect();
    persistent.extend(wrt[c.params.len()..].iter().map(|(n, t)| (*t, n.clone())));
    let mut outputs = vec![c.probs, c.loss];
    outputs.extend(grads.iter().map(|g| g.unwrap()));

    let mut backend = CpuBackend::new();
    let exe = executable(g, &mut backend, memory, persistent, outputs);
    let init = ParamStore::init(cfg, 5).unwrap();
    for (name, t) in &c.params {
        exe.write(&mut backend, *t, &init.get(name).unwrap().data)
            .unwrap();
    }
    for ((leaf, _), v) in c.stack.carried.iter().zip(&b.state) {
        exe.write(&mut backend, *leaf, v).unwrap();
    }
    exe.write(&mut backend, c.stack.x, &b.x).unwrap();
    exe.write(&mut backend, c.labels, &b.labels).unwrap();
    if let (Some(l), Some(t)) = (lengths, c.stack.lengths) {
        exe.write(&mut backend, t, l).unwrap();
    }
    exe.run(&mut backend).unwrap();
    let grads = wrt
        .iter()
        .zip(grads)
        .map(|((name, _), g)| (name.clone(), exe.read(&mut backend, g.unwrap()).unwrap()))
        .collect();
    Run {
        probs: exe.read(&mut backend, c.probs).unwrap(),
        loss: exe.read(&mut backend, c.loss).unwrap()[0],
        grads,
    }
}

/// Row `r` of a `[B, w]` tensor.
fn row(v: &[f32], r: usize, w: usize) -> Vec<f32> {
    v[r * w..(r + 1) * w].to_vec()
}

#[test]
fn a_padded_batch_gives_each_sequence_what_it_gives_alone() {
    padded_batch_against_each_sequence_alone(Cell::Lstm);
}

#[test]
fn a_padded_batch_of_a_gru_gives_each_sequence_what_it_gives_alone() {
    padded_batch_against_each_sequence_alone(Cell::Gru);
}

fn padded_batch_against_each_sequence_alone(cell: Cell) {
    let mut cfg = dense_head_model(4, 3);
    cfg.recurrent_mut().unwrap().cell = cell;
    let slots = cfg
        .network()
        .unwrap()
        .recurrent()
        .unwrap()
        .cells
        .state_slots()
        .len();
    let (steps, batch, f, h, classes) = (5, 4, 3, 4, 3);
    let lengths = [5.0, 2.0, 1.0, 3.0];
    let mut rng = Rng::new(41);
    let mut normals = |n: usize| (0..n).map(|_| rng.normal()).collect::<Vec<f32>>();
    let padded = Batch {
        steps,
        batch,
        x: normals(steps * batch * f),
        labels: vec![0.0, 2.0, 1.0, 2.0],
        state: (0..slots).map(|_| normals(batch * h)).collect(),
    };
    let all = run(&cfg, &padded, Some(&lengths), Memory::Own);
    let planned = run(&cfg, &padded, Some(&lengths), Memory::Planned);
    assert_eq!(planned.probs, all.probs, "planned: probs");
    assert_eq!(planned.grads, all.grads, "planned: gradients");

    let mut mean: HashMap<String, Vec<f64>> = HashMap::new();
    let mut mean_loss = 0.0;
    for (r, &len) in lengths.iter().enumerate() {
        let t_r = len as usize;
        let alone = Batch {
            steps: t_r,
            batch: 1,
            x: (0..t_r)
                .flat_map(|t| row(&padded.x, t * batch + r, f))
                .collect(),
            labels: vec![padded.labels[r]],
            state: padded.state.iter().map(|s| row(s, r, h)).collect(),
        };
        let one = run(&cfg, &alone, None, Memory::Own);
        let what = format!("{cell:?} row {r} (length {len})");
        assert_close(
            &what,
            &row(&all.probs, r, classes),
            &one.probs.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            1e-6,
            1e-5,
        );
        mean_loss += one.loss as f64 / batch as f64;
        for (name, g) in &one.grads {
            if name.starts_with("state.") {
                // The state's gradient is per row: the row's own, over the batch size.
                let want: Vec<f64> = g.iter().map(|&v| v as f64 / batch as f64).collect();
                assert_close(
                    &format!("{what}: {name}"),
                    &row(&all.grads[name], r, h),
                    &want,
                    1e-6,
                    1e-4,
                );
            } else {
                let m = mean
                    .entry(name.clone())
                    .or_insert_with(|| vec![0.0; g.len()]);
                m.iter_mut()
                    .zip(g)
                    .for_each(|(m, &v)| *m += v as f64 / batch as f64);
            }
        }
    }
    assert_close("loss", &[all.loss], &[mean_loss], 1e-6, 1e-5);
    assert!(!mean.is_empty());
    for (name, want) in &mean {
        assert_close(name, &all.grads[name], want, 1e-6, 1e-4);
    }
}
