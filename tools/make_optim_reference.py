#!/usr/bin/env python3
"""Generate PyTorch reference data for tensorfit's optimizers, clipping and schedules.

Writes ``tests/data/optim_reference.safetensors`` (a few KB; float32 tensors),
read by ``tests/optim_agreement.rs``. Run with PyTorch installed outside the repo:

    /root/torchvenv/bin/python tools/make_optim_reference.py

Contents (``i`` = 0, 1 over two parameters ``p0`` [3, 4] and ``p1`` [5]; ``k`` = 1..5):

    init.p{i}                 initial values (torch.manual_seed(0), randn)
    grad{k}.p{i}              the gradient given at step k (randn · 0.5, seeded)
    <run>.step{k}.p{i}        the parameters after step k of optimizer run <run>:
        adam        Adam(lr=0.01, weight_decay=0.1)
        adamw       AdamW(lr=0.01, weight_decay=0.1)
        sgd         SGD(lr=0.1)
        sgd_damp    SGD(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01)
        sgd_nest_clip  SGD(lr=0.1, momentum=0.9, nesterov=True) after
                    clip_grad_norm_(max_norm=1.0) each step, with an lr from
                    CosineAnnealingLR(T_max=5, eta_min=0.01) stepped after each step
    clip.total_norm [1]       clip_grad_norm_(grad1, max_norm=1.0)'s return value
    clip.norm.p{i}            the gradients of step 1 after it
    clip.value.p{i}           the gradients of step 1 after clip_grad_value_(0.3)
    schedule.<name> [12]      the lr each of 12 optimizer steps used, base lr 0.1:
        step         StepLR(step_size=3, gamma=0.5)
        exponential  ExponentialLR(gamma=0.9)
        cosine       CosineAnnealingLR(T_max=10, eta_min=0.01)
        warmup_cosine SequentialLR([LinearLR(start_factor=0.25, total_iters=4),
                     CosineAnnealingLR(T_max=8)], milestones=[4])
        plateau      ReduceLROnPlateau(factor=0.5, patience=1, cooldown=1,
                     min_lr=0.01), stepped after each step with plateau.metric
    plateau.metric [12]       the metrics given to it
"""

import argparse

import torch
from safetensors.torch import save_file

STEPS = 5


def params_and_grads():
    torch.manual_seed(0)
    init = [torch.randn(3, 4), torch.randn(5)]
    grads = [[torch.randn_like(p) * 0.5 for p in init] for _ in range(STEPS)]
    return init, grads


def run(name, make_opt, init, grads, out, clip=None, sched=None):
    ps = [torch.nn.Parameter(p.clone()) for p in init]
    opt = make_opt(ps)
    s = sched(opt) if sched else None
    for k in range(STEPS):
        for p, g in zip(ps, grads[k]):
            p.grad = g.clone()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(ps, max_norm=clip)
        opt.step()
        if s is not None:
            s.step()
        for i, p in enumerate(ps):
            out[f"{name}.step{k + 1}.p{i}"] = p.detach().clone()


def lrs(make_sched, metrics=None, n=12):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    s = make_sched(opt)
    seq = []
    for k in range(n):
        seq.append(opt.param_groups[0]["lr"])
        opt.step()
        if metrics is None:
            s.step()
        else:
            s.step(metrics[k])
    return torch.tensor(seq, dtype=torch.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/optim_reference.safetensors")
    args = ap.parse_args()
    init, grads = params_and_grads()
    out = {}
    for i, p in enumerate(init):
        out[f"init.p{i}"] = p
    for k in range(STEPS):
        for i, g in enumerate(grads[k]):
            out[f"grad{k + 1}.p{i}"] = g
    O = torch.optim
    run("adam", lambda ps: O.Adam(ps, lr=0.01, weight_decay=0.1), init, grads, out)
    run("adamw", lambda ps: O.AdamW(ps, lr=0.01, weight_decay=0.1), init, grads, out)
    run("sgd", lambda ps: O.SGD(ps, lr=0.1), init, grads, out)
    run("sgd_damp", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5,
                                      weight_decay=0.01), init, grads, out)
    run("sgd_nest_clip", lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        init, grads, out, clip=1.0,
        sched=lambda o: O.lr_scheduler.CosineAnnealingLR(o, T_max=5, eta_min=0.01))

    ps = [torch.nn.Parameter(p.clone()) for p in init]
    for p, g in zip(ps, grads[0]):
        p.grad = g.clone()
    out["clip.total_norm"] = torch.nn.utils.clip_grad_norm_(ps, max_norm=1.0).reshape(1)
    for i, p in enumerate(ps):
        out[f"clip.norm.p{i}"] = p.grad.clone()
    for p, g in zip(ps, grads[0]):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_value_(ps, 0.3)
    for i, p in enumerate(ps):
        out[f"clip.value.p{i}"] = p.grad.clone()

    S = O.lr_scheduler
    out["schedule.step"] = lrs(lambda o: S.StepLR(o, step_size=3, gamma=0.5))
    out["schedule.exponential"] = lrs(lambda o: S.ExponentialLR(o, gamma=0.9))
    out["schedule.cosine"] = lrs(lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.01))
    out["schedule.warmup_cosine"] = lrs(lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.25, total_iters=4), S.CosineAnnealingLR(o, T_max=8)],
        milestones=[4]))
    metric = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85]
    out["plateau.metric"] = torch.tensor(metric)
    out["schedule.plateau"] = lrs(lambda o: S.ReduceLROnPlateau(
        o, factor=0.5, patience=1, cooldown=1, min_lr=0.01), metrics=metric)
    out = {k: v.detach().to(torch.float32).contiguous() for k, v in out.items()}
    save_file(out, args.out, metadata={"torch": torch.__version__})
    print(f"wrote {len(out)} tensors to {args.out}")


if __name__ == "__main__":
    main()
