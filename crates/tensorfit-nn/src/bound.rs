//! Plans with bounds: one memory plan for every shape within a bound.
//!
//! A bound is a [`Job`] read as maxima: training batches of at most `batch` sequences of
//! at most `seq_len` steps, evaluations within `eval`. Its plan holds, for each *class*
//! of program (kind, lengths or not, and with recomputation the sub-segment length and
//! count), the program at the largest batch and length any shape within the bound runs
//! ([`TrainOptions::bound_programs`]): the carried chunks at the chunk length, the
//! training segment at the truncated-BPTT length, the evaluation chunk at the
//! micro-batch, so every strategy is planned at the bound.
//!
//! The ops are coarse, so a program over a smaller shape is its class's bound program
//! with every tensor no larger: the same nodes over the same tensors in the same order,
//! hence the same schedule and the same lifetimes. Each of its tensors can take its
//! counterpart's offset in the bound's arenas: its bytes are a prefix of the
//! counterpart's, and nothing alive at the same time overlaps those. The kernels run on
//! the program's own extents; nothing is planned or allocated. [`check_within`] checks
//! that correspondence node for node and tensor for tensor before a program is bound: a
//! program that does not correspond is refused, never misplaced. A shape whose programs
//! have no cover ([`cover`]) is outside the bound and must be planned again.

use std::collections::BTreeMap;

use tensorfit_core::{Error, Result};

use crate::description::ModelDescription;
use crate::options::{Job, ProgramKey, ProgramKind, TrainOptions};
use crate::programs::Program;

/// What a program's nodes depend on besides its batch and length: its kind, whether it
/// takes lengths, and with recomputation the sub-segment length and the number of
/// sub-segments (`carry_chunks` of the segment: one node group each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Class {
    kind: ProgramKind,
    padded: bool,
    recompute: Option<(usize, usize)>,
}

fn class(k: &ProgramKey) -> Class {
    Class {
        kind: k.kind,
        padded: k.padded,
        recompute: k.recompute.map(|r| (r, k.steps.div_ceil(r.max(1)))),
    }
}

impl TrainOptions {
    /// The programs a plan for the bound `bound` holds: per class, the largest batch and
    /// length that any training step (and evaluation) within the bound runs. Each program
    /// a shape within the bound runs has one of them as its [`cover`].
    pub fn bound_programs(&self, model: &ModelDescription, bound: Job) -> Vec<ProgramKey> {
        // Every length, at the largest batch: a key's batch is its shape's (or its
        // micro-batch's), largest at the largest batch; its length is not monotone in the
        // shape's (the carried chunks and the last window change with it). Runs, not
        // programs: a few keys per length however many chunks or micro-batches it has.
        let mut keys = Vec::new();
        let (train, eval) = bound.parts();
        if let Some((batch, seq_len)) = train {
            for t in 1..=seq_len {
                keys.extend(self.train_runs(model, batch, t).into_iter().map(|(k, _)| k));
            }
        }
        if let Some((batch, seq_len)) = eval {
            for t in 1..=seq_len {
                keys.extend(self.eval_runs(model, batch, t).into_iter().map(|(k, _)| k));
            }
        }
        let mut largest: BTreeMap<Class, ProgramKey> = BTreeMap::new();
        for k in keys {
            largest
                .entry(class(&k))
                .and_modify(|m| {
                    m.batch = m.batch.max(k.batch);
                    m.steps = m.steps.max(k.steps);
                })
                .or_insert(k);
        }
        largest.into_values().collect()
    }
}

/// The program of `planned` (a bound's programs) whose placement `key` takes: the
/// smallest of its class at least as large in batch and length; `None` when `key` is
/// outside the bound.
pub fn cover(planned: &[ProgramKey], key: ProgramKey) -> Option<ProgramKey> {
    planned
        .iter()
        .filter(|p| class(p) == class(&key) && p.batch >= key.batch && p.steps >= key.steps)
        .min_by_key(|p| (p.batch, p.steps))
        .copied()
}

/// The bound in words, for messages: `training batch ≤ 12 × 20 steps, evaluation batch
/// ≤ 12 × 20 steps`.
pub fn describe(bound: Job) -> String {
    let dims = |what: &str, (b, t): (usize, usize)| format!("{what} batch ≤ {b} × {t} steps");
    match bound {
        Job::Train {
            batch,
            seq_len,
            eval,
        } => {
            let mut s = dims("training", (batch, seq_len));
            if let Some(e) = eval {
                s += &format!(", {}", dims("evaluation", e));
            }
            s
        }
        Job::Eval { batch, seq_len } => dims("evaluation", (batch, seq_len)),
    }
}

/// Checks that `small` can run in the placement of `bound`, its cover: the same nodes
/// (op, phase, inputs and outputs), the same tensors (name, role, type, producer), each
/// no larger than its counterpart, and the same tensors read by the host and kept across
/// runs. Then every lifetime is the bound's and every tensor fits its counterpart's bytes.
pub fn check_within(small: &Program, bound: &Program) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::Graph(format!(
            "program `{}` does not correspond to `{}`, which the plan's bound holds: {why}",
            small.key, bound.key
        )))
    };
    let (s, b) = (&small.graph, &bound.graph);
    if s.nodes().len() != b.nodes().len() || s.tensors().len() != b.tensors().len() {
        return refuse(format!(
            "{} nodes and {} tensors, the bound's has {} and {}",
            s.nodes().len(),
            s.tensors().len(),
            b.nodes().len(),
            b.tensors().len()
        ));
    }
    for (x, y) in s.tensors().iter().zip(b.tensors()) {
        let same = x.name == y.name && x.role == y.role && x.dtype == y.dtype;
        if !same || x.producer != y.producer {
            return refuse(format!(
                "tensor `{}` stands where `{}` does",
                x.name, y.name
            ));
        }
        if x.bytes() > y.bytes() {
            return refuse(format!(
                "tensor `{}` {} is larger than the bound's {}",
                x.name, x.shape, y.shape
            ));
        }
    }
    for (x, y) in s.nodes().iter().zip(b.nodes()) {
        let same_op = x.op.name() == y.op.name() && x.op.is_update() == y.op.is_update();
        if !same_op || x.phase != y.phase || x.inputs != y.inputs || x.outputs != y.outputs {
            return refuse(format!("node `{}` stands where `{}` does", x.name, y.name));
        }
    }
    let ids = |p: &Program| p.persistent.iter().map(|(t, _)| *t).collect::<Vec<_>>();
    if small.outputs() != bound.outputs() || ids(small) != ids(bound) {
        return refuse("other tensors are read by the host or kept across runs".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::TbpttMode;
    use crate::SeedShape;

    fn small() -> ModelDescription {
        let mut d = SeedShape::SMALL_REFERENCE.description();
        d.recurrent_mut().unwrap().layers = 2;
        d
    }

    #[test]
    fn a_bound_holds_each_class_at_its_largest_shape() {
        let opts = TrainOptions {
            tbptt: 8,
            chunk: 5,
            micro_batch: Some(5),
            recompute: Some(3),
            ..TrainOptions::default()
        };
        let bound = Job::Train {
            batch: 12,
            seq_len: 20,
            eval: Some((12, 20)),
        };
        let names: Vec<String> = opts
            .bound_programs(&small(), bound)
            .iter()
            .map(|k| k.to_string())
            .collect();
        // The carried chunks of training and of evaluation are one class; the training
        // segment is plain up to 3 steps, then recomputed in 2 or 3 sub-segments.
        assert_eq!(
            names,
            [
                "carry b=12 t=5",
                "train b=12 t=3",
                "train b=12 t=6 recompute=3",
                "train b=12 t=8 recompute=3",
                "eval b=5 t=5",
            ]
        );
    }

    #[test]
    fn every_program_within_the_bound_has_a_cover_and_none_outside() {
        for mode in [TbpttMode::Last, TbpttMode::Windows] {
            let opts = TrainOptions {
                tbptt: 7,
                tbptt_mode: mode,
                chunk: 4,
                micro_batch: Some(5),
                recompute: Some(2),
                ..TrainOptions::default()
            };
            let model = small();
            let bound = Job::Train {
                batch: 9,
                seq_len: 15,
                eval: Some((9, 15)),
            };
            let planned = opts.bound_programs(&model, bound);
            for b in 1..=9 {
                for t in 1..=15 {
                    let mut keys = opts.train_programs(&model, b, t);
                    keys.extend(opts.eval_programs(&model, b, t));
                    for k in keys {
                        assert!(cover(&planned, k).is_some(), "{k} ({mode:?})");
                    }
                }
            }
            let outside = opts.train_programs(&model, 10, 15);
            assert!(outside.iter().any(|&k| cover(&planned, k).is_none()));
        }
    }

    #[test]
    fn a_program_that_does_not_correspond_to_its_cover_is_refused() {
        let (model, optim) = (small(), TrainOptions::default().optim);
        let key = |steps, recompute| ProgramKey {
            kind: ProgramKind::Train,
            batch: 4,
            steps,
            recompute,
            padded: false,
        };
        let build = |k| Program::build(&model, &optim, k).unwrap();
        // Within: fewer steps, the same sub-segment count.
        check_within(&build(key(5, Some(3))), &build(key(6, Some(3)))).unwrap();
        // Two sub-segments against three: other nodes.
        let e = check_within(&build(key(6, Some(3))), &build(key(8, Some(3)))).unwrap_err();
        assert!(e.to_string().contains("does not correspond"), "{e}");
        // Larger than its would-be cover.
        let e = check_within(&build(key(6, None)), &build(key(5, None))).unwrap_err();
        assert!(e.to_string().contains("is larger than the bound's"), "{e}");
    }
}
