//! Agreement with PyTorch on the optimizers (Adam, AdamW, SGD with dampening, SGD with
//! Nesterov after clip_grad_norm_ under a cosine schedule), on gradient clipping by norm
//! and by value, and on every learning-rate schedule's sequence.
//!
//! The reference is `tests/data/optim_reference.safetensors`, made by
//! `tools/make_optim_reference.py` (its docstring lists the contents); two parameter
//! tensors are updated for five steps with given gradients, through the same update
//! nodes a training program appends ([`OptimConfig::append`]), on the CPU. Tolerance as
//! the model's agreement test: |a − b| ≤ 1e-5 · |b| + 1e-5 · max|reference tensor|.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::check_reference as check;
use tensorfit::core::{Backend, Executable, Graph, TensorId};
use tensorfit::cpu::CpuBackend;
use tensorfit::nn::optim::schedule::{Decay, Schedule, ScheduleState};
use tensorfit::nn::{AdamConfig, Clip, OptimConfig, Optimizer, ParamStore, SgdConfig};

const FILE: &str = "tests/data/optim_reference.safetensors";
const STEPS: u64 = 5;
const PARAMS: [&str; 2] = ["p0", "p1"];

fn reference() -> ParamStore {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    ParamStore::load(&path, "").expect("reference file loads").0
}

fn data<'a>(r: &'a ParamStore, name: &str) -> &'a [f32] {
    &r.get(name)
        .unwrap_or_else(|| panic!("{name} in the reference"))
        .data
}

/// The parameters and their given gradients in a graph with `optim`'s update appended.
struct Run {
    exe: Executable,
    params: Vec<TensorId>,
    grads: Vec<TensorId>,
    norm_sq: Option<TensorId>,
    scalars: TensorId,
    clipped: Vec<TensorId>,
}

fn build(r: &ParamStore, optim: &OptimConfig, backend: &mut dyn Backend) -> Run {
    let mut g = Graph::new();
    let mut named = Vec::new();
    let mut grads = Vec::new();
    for name in PARAMS {
        let shape = r.get(&format!("init.{name}")).unwrap().shape.clone();
        named.push((name.to_string(), g.parameter(name, shape.clone())));
        grads.push(g.input(&format!("grad.{name}"), shape));
    }
    let ids = optim.append(&mut g, &named, &grads).unwrap();
    let exe = Executable::new(g, backend, HashMap::new()).unwrap();
    for (i, name) in PARAMS.iter().enumerate() {
        exe.write(backend, named[i].1, data(r, &format!("init.{name}")))
            .unwrap();
    }
    // Optimizer state starts at zero, as the trainer's does.
    for (id, t) in exe.graph().tensors().iter().enumerate() {
        if t.role == tensorfit::core::Role::State {
            exe.write(backend, TensorId(id), &vec![0.0; t.shape.numel()])
                .unwrap();
        }
    }
    Run {
        exe,
        params: named.into_iter().map(|(_, t)| t).collect(),
        grads,
        norm_sq: ids.grad_norm_sq,
        scalars: ids.scalars,
        clipped: ids.grads,
    }
}

/// Five steps of `optim` from the reference's start, compared after each step with
/// `<run>.step<k>.<param>`.
fn five_steps_agree(run_name: &str, optim: OptimConfig) {
    let r = reference();
    let mut backend = CpuBackend::new();
    let b: &mut dyn Backend = &mut backend;
    let run = build(&r, &optim, b);
    let state = ScheduleState::new(optim.optimizer.lr());
    for k in 1..=STEPS {
        for (i, name) in PARAMS.iter().enumerate() {
            run.exe
                .write(b, run.grads[i], data(&r, &format!("grad{k}.{name}")))
                .unwrap();
        }
        let lr = state.lr(&optim.schedule, optim.optimizer.lr(), k);
        run.exe
            .write(b, run.scalars, &optim.optimizer.scalars(k, lr))
            .unwrap();
        run.exe.run(b).unwrap();
        for (i, name) in PARAMS.iter().enumerate() {
            let got = run.exe.read(b, run.params[i]).unwrap();
            let key = format!("{run_name}.step{k}.{name}");
            check(&key, &got, data(&r, &key));
        }
    }
}

/// Only the optimizer, no clipping or schedule.
fn only(optimizer: Optimizer) -> OptimConfig {
    OptimConfig {
        optimizer,
        ..OptimConfig::default()
    }
}

const ADAM: AdamConfig = AdamConfig {
    lr: 0.01,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weight_decay: 0.1,
};

#[test]
fn adam_with_l2_weight_decay_agrees_with_pytorch_over_five_steps() {
    five_steps_agree("adam", only(Optimizer::Adam(ADAM)));
}

#[test]
fn adamw_with_decoupled_weight_decay_agrees_with_pytorch_over_five_steps() {
    five_steps_agree("adamw", only(Optimizer::AdamW(ADAM)));
}

#[test]
fn plain_sgd_agrees_with_pytorch_over_five_steps() {
    let sgd = SgdConfig {
        lr: 0.1,
        ..SgdConfig::default()
    };
    five_steps_agree("sgd", only(Optimizer::Sgd(sgd)));
}

#[test]
fn sgd_with_momentum_dampening_and_weight_decay_agrees_with_pytorch_over_five_steps() {
    let sgd = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.5,
        weight_decay: 0.01,
        ..SgdConfig::default()
    };
    five_steps_agree("sgd_damp", only(Optimizer::Sgd(sgd)));
}

#[test]
fn nesterov_sgd_after_norm_clipping_under_a_cosine_schedule_agrees_with_pytorch() {
    let optimizer = Optimizer::Sgd(SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        nesterov: true,
        ..SgdConfig::default()
    });
    let optim = OptimConfig {
        optimizer,
        clip: Clip {
            max_norm: Some(1.0),
            value: None,
        },
        schedule: Schedule {
            decay: Decay::Cosine {
                t_max: 5,
                eta_min: 0.01,
            },
            ..Schedule::default()
        },
    };
    five_steps_agree("sgd_nest_clip", optim);
}

/// One run of the clipping alone on step 1's gradients: the norm and the clipped values.
fn clipped(clip: Clip) -> (Option<f32>, Vec<Vec<f32>>) {
    let r = reference();
    let mut backend = CpuBackend::new();
    let b: &mut dyn Backend = &mut backend;
    let optim = OptimConfig {
        clip,
        ..OptimConfig::default()
    };
    let run = build(&r, &optim, b);
    for (i, name) in PARAMS.iter().enumerate() {
        run.exe
            .write(b, run.grads[i], data(&r, &format!("grad1.{name}")))
            .unwrap();
    }
    run.exe
        .write(b, run.scalars, &optim.optimizer.scalars(1, 1e-3))
        .unwrap();
    run.exe.run(b).unwrap();
    let norm = run.norm_sq.map(|t| run.exe.read(b, t).unwrap()[0].sqrt());
    let grads = run
        .clipped
        .iter()
        .map(|&t| run.exe.read(b, t).unwrap())
        .collect();
    (norm, grads)
}

#[test]
fn clipping_by_global_norm_agrees_with_clip_grad_norm() {
    let r = reference();
    let (norm, grads) = clipped(Clip {
        max_norm: Some(1.0),
        value: None,
    });
    check("total norm", &[norm.unwrap()], data(&r, "clip.total_norm"));
    for (g, name) in grads.iter().zip(PARAMS) {
        check(
            &format!("clip.norm.{name}"),
            g,
            data(&r, &format!("clip.norm.{name}")),
        );
    }
}

#[test]
fn clipping_by_value_agrees_with_clip_grad_value() {
    let r = reference();
    let (norm, grads) = clipped(Clip {
        max_norm: None,
        value: Some(0.3),
    });
    assert_eq!(
        norm, None,
        "no norm is computed when clipping by value only"
    );
    for (g, name) in grads.iter().zip(PARAMS) {
        check(
            &format!("clip.value.{name}"),
            g,
            data(&r, &format!("clip.value.{name}")),
        );
    }
}

fn schedule_agrees(name: &str, schedule: Schedule, metric: Option<&[f32]>) {
    let r = reference();
    let want = data(&r, &format!("schedule.{name}"));
    let mut state = ScheduleState::new(0.1);
    let mut got = Vec::new();
    for (k, _) in want.iter().enumerate() {
        got.push(state.lr(&schedule, 0.1, k as u64 + 1) as f32);
        if let Some(m) = metric {
            state.observe(&schedule, m[k] as f64);
        }
    }
    check(&format!("schedule.{name}"), &got, want);
}

#[test]
fn every_schedule_gives_pytorchs_learning_rates_step_by_step() {
    let with = |decay| Schedule {
        decay,
        ..Schedule::default()
    };
    schedule_agrees(
        "step",
        with(Decay::Step {
            step_size: 3,
            gamma: 0.5,
        }),
        None,
    );
    schedule_agrees("exponential", with(Decay::Exponential { gamma: 0.9 }), None);
    let cosine = Decay::Cosine {
        t_max: 10,
        eta_min: 0.01,
    };
    schedule_agrees("cosine", with(cosine), None);
    let warmup = Schedule {
        warmup_steps: 4,
        warmup_start_factor: 0.25,
        decay: Decay::Cosine {
            t_max: 8,
            eta_min: 0.0,
        },
    };
    schedule_agrees("warmup_cosine", warmup, None);
    let plateau = Decay::Plateau {
        factor: 0.5,
        patience: 1,
        threshold: 1e-4,
        cooldown: 1,
        min_lr: 0.01,
    };
    let r = reference();
    let metric = data(&r, "plateau.metric").to_vec();
    schedule_agrees("plateau", with(plateau), Some(&metric));
}
