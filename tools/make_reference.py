#!/usr/bin/env python3
"""Generate the PyTorch reference data for tensorfit's small "seed" network (and, in
further files, the same network with a GRU stack, a small GRU layer: see
tools/gru_reference.py, token inputs, a padded batch: see tools/padded_reference.py, and
a regression: see tools/mse_reference.py, a head on every step: see
tools/every_step_reference.py).

What it produces
----------------
A safetensors file (default ``tests/data/seed_small_reference.safetensors``)
that holds a scaled-down version of the "seed" network and everything needed
to check the Rust engine against PyTorch, bit-for-bit reproducibly:

Model (time-major LSTM classifier)::

    lstm  = nn.LSTM(F=10, H=8, num_layers=3)      # input [T, B, F]
    bn1   = nn.BatchNorm1d(H)                     # eps 1e-5, momentum 0.1
    dense = nn.Linear(H, D=5)
    bn2   = nn.BatchNorm1d(D)
    out   = nn.Linear(D, C=6)
    head(h_last) = out(bn2(tanh(dense(bn1(h_last)))))   # h_last = lstm output at t = T-1

Loss ``nn.CrossEntropyLoss()`` (mean over the batch), optimiser
``torch.optim.Adam(lr=0.01)`` with all other arguments at their defaults.
Batch B=16 (small batches make BatchNorm amplify float32 rounding), sequence length T=9, truncated-BPTT length L=3.

Initialisation: PyTorch defaults after ``torch.manual_seed(0)``, then both
BatchNorm layers are perturbed (in this order, bn1 then bn2)::

    weight = 1 + 0.1*randn, bias = 0.1*randn,
    running_mean = 0.1*randn, running_var = 1 + 0.1*rand

After that the data are drawn: x1 = randn(T,B,F), labels1 = randint(0,C,(B,)),
x2, labels2 likewise.

One training step (truncated BPTT that carries the state)::

    model.train(); h = c = zeros(3, B, H)
    for s in range(0, T-L, L):                       # state carried, no gradient
        with torch.no_grad(): _, (h, c) = model.lstm(x[s:s+L], (h, c))
    y, _ = model.lstm(x[T-L:], (h.detach(), c.detach()))
    loss = CE(head(y[-1]), labels); loss.backward()
    <record>; opt.step(); opt.zero_grad()

The same network with ``gru = nn.GRU(F=10, H=8, num_layers=3)`` in place of the LSTM
(state h only, so no ``c_carry``; metadata ``cell = "gru"``), drawn and trained the same
way but from ``torch.manual_seed(1)``, goes to
``tests/data/seed_small_gru_reference.safetensors`` (``--seed-gru-out``). Seed 0 draws a
GRU weight whose first gradient (2.5e-8) sits at Adam's eps, where float32 rounding of
the gradient moves the update by 1e-4 (PyTorch's own float32 and float64 gradients
differ by 3% there): no float32 engine could match that step to 1e-5.

BatchNorm is only used (in train mode) in the last segment's head, so its
running statistics update once per step.

Tensors in the file (all float32; labels are stored as float32 whole numbers).
``<name>`` ranges over PyTorch's state_dict names minus ``num_batches_tracked``;
``<param>`` over the trainable parameters only (the same list without the
four ``running_*`` buffers)::

    init.<name>                         before training
    step{1,2}.x          [T, B, F]
    step{1,2}.labels     [B]
    step{1,2}.loss       [1]
    step{1,2}.probs      [B, C]         softmax of the logits
    step{1,2}.h_carry    [3, B, H]      state handed to the last segment
    step{1,2}.c_carry    [3, B, H]
    step{1,2}.grad.<param>              gradients before opt.step
    step{1,2}.grad64.<param>            the same gradients computed in float64 (stored as
                                        float32): the exact values, to tell rounding from error
    step{1,2}.after.<name>              parameters and buffers after opt.step
    eval.probs           [B, C]         after step 2: model.eval(), whole step1.x
                                        in one lstm call from zero state

The safetensors metadata (str -> str) records the sizes, lr, the dense
activation, the torch version and a short description.

Token inputs (a second file, default ``tests/data/token_lstm_reference.safetensors``,
written by the same run): ids [T=6, B=3] over a vocabulary of V=11, and two models
from ``torch.manual_seed(1)`` with zero initial state::

    embedding = nn.Embedding(V, E=5); lstm = nn.LSTM(E, H=7, num_layers=2)
        y, (h_n, c_n) = lstm(embedding(ids))                  prefix ``emb.``
    lstm = nn.LSTM(V, H=7)
        y, (h_n, c_n) = lstm(F.one_hot(ids, V).float())       prefix ``onehot.``

Each has ``<prefix>ids``, ``<prefix>init.<param>``, a random upstream gradient
``<prefix>dy`` [T, B, H], the outputs ``<prefix>y``, ``h_n``, ``c_n`` and the gradients
``<prefix>grad.<param>`` of ``sum(y * dy)``.

How to rerun
------------
Needs torch, safetensors and numpy (see tools/README.md for the venv)::

    ~/torchvenv/bin/python tools/make_reference.py \
        [--out tests/data/seed_small_reference.safetensors]

It runs on the CPU in float32 with one thread and deterministic algorithms,
so rerunning with the same PyTorch version gives the same file.
"""

import argparse
import copy
import os
import sys

import torch
from torch import nn
from safetensors.torch import load_file

import bidirectional_reference
import body_reference
import gru_reference
import every_step_reference
import layernorm_reference
import mse_reference
import padded_reference
import pool_reference
from reference_files import data_path, write_checked, write_safetensors

# Sizes of the scaled-down seed network.
F = 10  # input features
H = 8  # hidden units per LSTM layer
NUM_LAYERS = 3
D = 5  # dense units
C = 6  # classes
B = 16  # batch
T = 9  # sequence length
L = 3  # truncated-BPTT length
LR = 0.01

DEFAULT_OUT = data_path("seed_small_reference.safetensors")


SEED_GRU_OUT = data_path("seed_small_gru_reference.safetensors")


class Seed(nn.Module):
    """The scaled-down seed network with recurrent cell ``cell`` ("lstm" or "gru"),
    registered under that name as tensorfit names it."""

    def __init__(self, cell="lstm"):
        super().__init__()
        self.cell = cell
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        setattr(self, cell, rnn(F, H, num_layers=NUM_LAYERS))
        self.bn1 = nn.BatchNorm1d(H, eps=1e-5, momentum=0.1)
        self.dense = nn.Linear(H, D)
        self.bn2 = nn.BatchNorm1d(D, eps=1e-5, momentum=0.1)
        self.out = nn.Linear(D, C)

    def rnn(self, x, state):
        return getattr(self, self.cell)(x, state)

    def zero_state(self, dtype=torch.float32):
        h = torch.zeros(NUM_LAYERS, B, H, dtype=dtype)
        return (h, h.clone()) if self.cell == "lstm" else h

    def head(self, h_last):
        return self.out(self.bn2(torch.tanh(self.dense(self.bn1(h_last)))))


def state_tensors(model):
    """State dict without num_batches_tracked, as detached float32 copies."""
    return {
        k: v.detach().clone().contiguous()
        for k, v in model.state_dict().items()
        if not k.endswith("num_batches_tracked")
    }


def exact_gradients(model, x, labels):
    """The same step's gradients computed in float64 from the same weights and data,
    stored (as float32) so tests can tell rounding from error: float32 gradients of this
    network differ from the exact ones by up to ~2e-5 of a tensor's scale, in PyTorch
    as in any float32 engine (BatchNorm over a small batch amplifies rounding)."""
    m64 = copy.deepcopy(model).double()
    m64.zero_grad()
    x64 = x.double()
    state = m64.zero_state(torch.float64)
    with torch.no_grad():
        for s in range(0, T - L, L):
            _, state = m64.rnn(x64[s : s + L], state)
    y, _ = m64.rnn(x64[T - L :], state)
    nn.CrossEntropyLoss()(m64.head(y[-1]), labels).backward()
    return {n: p.grad.detach().float().contiguous() for n, p in m64.named_parameters()}


def train_step(model, opt, x, labels, prefix, record):
    model.train()
    state = model.zero_state()
    for s in range(0, T - L, L):
        with torch.no_grad():
            _, state = model.rnn(x[s : s + L], state)
    carry = state if model.cell == "lstm" else (state,)
    carry = tuple(t.detach() for t in carry)
    # Sanity check: chunking the no-grad prefix must match one call over it.
    with torch.no_grad():
        _, full = model.rnn(x[: T - L], model.zero_state())
    full = full if model.cell == "lstm" else (full,)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(full, carry))
    y, _ = model.rnn(x[T - L :], carry if model.cell == "lstm" else carry[0])
    logits = model.head(y[-1])
    loss = nn.CrossEntropyLoss()(logits, labels)
    loss.backward()

    record[f"{prefix}.x"] = x.clone()
    record[f"{prefix}.labels"] = labels.to(torch.float32)
    record[f"{prefix}.loss"] = loss.detach().reshape(1).clone()
    record[f"{prefix}.probs"] = torch.softmax(logits.detach(), dim=1).clone()
    for part, t in zip(("h_carry", "c_carry"), carry):
        record[f"{prefix}.{part}"] = t.clone()
    for name, p in model.named_parameters():
        record[f"{prefix}.grad.{name}"] = p.grad.detach().clone()
    for name, g in exact_gradients(model, x, labels).items():
        record[f"{prefix}.grad64.{name}"] = g

    opt.step()
    opt.zero_grad()
    for name, t in state_tensors(model).items():
        record[f"{prefix}.after.{name}"] = t
    return loss.item()


def perturb_batchnorm(model):
    """Moves both BatchNorm layers off their 1/0 start (bn1 then bn2), so that tests see
    their weights and running statistics used (crates/tensorfit-nn/tests/data/state_dicts.py
    builds its state dicts the same way)."""
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            n = bn.num_features
            bn.weight.copy_(1 + 0.1 * torch.randn(n))
            bn.bias.copy_(0.1 * torch.randn(n))
            bn.running_mean.copy_(0.1 * torch.randn(n))
            bn.running_var.copy_(1 + 0.1 * torch.rand(n))


def build(record, cell, seed):
    torch.manual_seed(seed)
    model = Seed(cell)
    perturb_batchnorm(model)
    for name, t in state_tensors(model).items():
        record[f"init.{name}"] = t

    x1 = torch.randn(T, B, F)
    labels1 = torch.randint(0, C, (B,))
    x2 = torch.randn(T, B, F)
    labels2 = torch.randint(0, C, (B,))

    opt = torch.optim.Adam(model.parameters(), lr=LR)
    losses = [
        train_step(model, opt, x1, labels1, "step1", record),
        train_step(model, opt, x2, labels2, "step2", record),
    ]

    model.eval()
    with torch.no_grad():
        y, _ = model.rnn(x1, model.zero_state())
        record["eval.probs"] = torch.softmax(model.head(y[-1]), dim=1).clone()
    return model, losses


def verify(path, model, losses, record, metadata):
    from safetensors import safe_open

    t = load_file(path)
    with safe_open(path, framework="pt") as f:
        assert f.metadata() == metadata
    assert all(torch.equal(t[k], v) for k, v in record.items())
    param_names = [n for n, _ in model.named_parameters()]
    state_names = list(state_tensors(model).keys())
    expect = {f"init.{n}" for n in state_names} | {"eval.probs"}
    for s in (1, 2):
        carried = ("h_carry", "c_carry") if model.cell == "lstm" else ("h_carry",)
        expect |= {f"step{s}.{k}" for k in ("x", "labels", "loss", "probs") + carried}
        expect |= {f"step{s}.grad.{n}" for n in param_names}
        expect |= {f"step{s}.grad64.{n}" for n in param_names}
        expect |= {f"step{s}.after.{n}" for n in state_names}
    assert set(t) == expect, (sorted(set(t) ^ expect))
    assert all(v.dtype == torch.float32 for v in t.values())
    assert t["step1.x"].shape == (T, B, F)
    assert t["step2.labels"].shape == (B,)
    assert t["step1.loss"].shape == (1,)
    assert t["step1.h_carry"].shape == (NUM_LAYERS, B, H)
    gates = {"lstm": 4, "gru": 3}[model.cell]
    assert t[f"init.{model.cell}.weight_ih_l0"].shape == (gates * H, F)
    assert t[f"init.{model.cell}.weight_hh_l2"].shape == (gates * H, H)
    assert t["step2.grad.out.weight"].shape == (C, D)
    assert t["eval.probs"].shape == (B, C)
    for s in (1, 2):
        probs = t[f"step{s}.probs"]
        labels = t[f"step{s}.labels"].long()
        assert torch.allclose(probs.sum(1), torch.ones(B), atol=1e-6)
        ce = -probs[torch.arange(B), labels].log().mean()
        assert torch.allclose(ce, t[f"step{s}.loss"][0], atol=1e-5), (ce, losses)
        # Running stats moved once (momentum 0.1) from their previous values.
        prev = "init" if s == 1 else "step1.after"
        assert not torch.equal(t[f"{prev}.bn1.running_mean"], t[f"step{s}.after.bn1.running_mean"])
    # The final state in the file is the model's current state.
    for n, v in state_tensors(model).items():
        assert torch.equal(t[f"step2.after.{n}"], v), n
    return t


TOKEN_OUT = data_path("token_lstm_reference.safetensors")
V, E, TOKEN_H, TOKEN_T, TOKEN_B = 11, 5, 7, 6, 3


def token_case(prefix, embedding, lstm, ids, one_hot):
    """The outputs and gradients of lstm(embedding(ids)) (or of lstm(one_hot(ids)))."""
    record = {f"{prefix}ids": ids.to(torch.float32)}
    modules = {"embedding": embedding, "lstm": lstm} if embedding else {"lstm": lstm}
    for m, module in modules.items():
        for n, p in module.named_parameters():
            record[f"{prefix}init.{m}.{n}"] = p.detach().clone()
    x = embedding(ids) if embedding else nn.functional.one_hot(ids, V).to(torch.float32)
    y, (h_n, c_n) = lstm(x)
    dy = torch.randn(y.shape)
    (y * dy).sum().backward()
    record.update({f"{prefix}dy": dy, f"{prefix}y": y, f"{prefix}h_n": h_n, f"{prefix}c_n": c_n})
    for m, module in modules.items():
        for n, p in module.named_parameters():
            record[f"{prefix}grad.{m}.{n}"] = p.grad.detach().clone()
    return {k: v.detach().to(torch.float32).contiguous() for k, v in record.items()}


def build_tokens():
    torch.manual_seed(1)
    ids = torch.randint(0, V, (TOKEN_T, TOKEN_B))
    record = token_case("emb.", nn.Embedding(V, E), nn.LSTM(E, TOKEN_H, num_layers=2), ids, False)
    record.update(token_case("onehot.", None, nn.LSTM(V, TOKEN_H), ids, True))
    metadata = {
        "vocab": str(V),
        "embedding": str(E),
        "hidden": str(TOKEN_H),
        "emb_layers": "2",
        "onehot_layers": "1",
        "steps": str(TOKEN_T),
        "batch": str(TOKEN_B),
        "torch_version": torch.__version__,
        "description": "tensorfit token-input reference: Embedding(11, 5) -> LSTM(5, 7, 2 layers) "
        "and LSTM(11, 7) on one_hot(ids), zero state, gradients of sum(y * dy); "
        "manual_seed(1), float32 CPU; generated by tools/make_reference.py",
    }
    write_checked(TOKEN_OUT, record, metadata)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=DEFAULT_OUT, help="output safetensors path")
    ap.add_argument(
        "--seed-gru-out",
        default=SEED_GRU_OUT,
        help="output path of the seed-shaped network with a GRU stack",
    )
    ap.add_argument(
        "--gru-out",
        default=gru_reference.DEFAULT_OUT,
        help="output path of the GRU reference (see tools/gru_reference.py)",
    )
    ap.add_argument(
        "--gru-tokens-only",
        action="store_true",
        help="write only the GRU token reference (tools/gru_reference.py, build_tokens)",
    )
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)

    write_gru_tokens()
    if args.gru_tokens_only:
        return 0

    for cell, seed, path in (("lstm", 0, args.out), ("gru", 1, args.seed_gru_out)):
        write_seed(cell, seed, path)
    build_tokens()

    # The GRU reference, in its own file (its contents: tools/gru_reference.py).
    write_checked(args.gru_out, *gru_reference.build())

    # The regression (MSE) reference, in its own file (its contents: tools/mse_reference.py).
    write_checked(mse_reference.DEFAULT_OUT, *mse_reference.build())
    # The LayerNorm head on every step (tools/layernorm_reference.py).
    write_checked(layernorm_reference.DEFAULT_OUT, *layernorm_reference.build())
    # The every-step references, each in its own file (tools/every_step_reference.py).
    write_checked(every_step_reference.DEFAULT_OUT, *every_step_reference.build())
    write_checked(every_step_reference.WINDOWS_OUT, *every_step_reference.build_windows())

    # A padded batch through pack_padded_sequence (contents: tools/padded_reference.py).
    padded_reference.write()
    # Bidirectional stacks over padded batches (tools/bidirectional_reference.py),
    # pooling over each sequence's steps (tools/pool_reference.py), convolutions and
    # Transformer encoders (tools/body_reference.py).
    built = bidirectional_reference.build() + pool_reference.build() + body_reference.build()
    for path, record, meta in built:
        write_checked(path, record, meta)
    return 0


def write_gru_tokens():
    """The GRU on token ids, in its own file (tools/gru_reference.py, build_tokens)."""
    write_checked(gru_reference.TOKENS_OUT, *gru_reference.build_tokens())


def write_seed(cell, seed, path):
    """Builds, writes and verifies the seed-shaped network with recurrent cell `cell`,
    from `torch.manual_seed(seed)`."""
    record = {}
    model, losses = build(record, cell, seed)
    record = {k: v.to(torch.float32).contiguous() for k, v in record.items()}
    name = {"lstm": "LSTM", "gru": "GRU"}[cell]
    metadata = {
        "input": str(F),
        "hidden": str(H),
        "layers": str(NUM_LAYERS),
        "dense": str(D),
        "classes": str(C),
        "batch": str(B),
        "steps": str(T),
        "tbptt": str(L),
        "lr": str(LR),
        "dense_activation": "tanh",
        "torch_version": torch.__version__,
        "description": (
            f"tensorfit reference: 3-layer {name}(10->8) + BN + Linear(8->5) + tanh + BN + "
            "Linear(5->6), CrossEntropy, Adam(lr=0.01); two truncated-BPTT training steps "
            f"(T=9, L=3, state carried), manual_seed({seed}), float32 CPU; "
            "generated by tools/make_reference.py"
        ),
    }

    if cell != "lstm":
        # The LSTM file predates the key: its absence means "lstm".
        metadata["cell"] = cell
    out = os.path.normpath(path)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    write_safetensors(out, record, metadata)

    verify(out, model, losses, record, metadata)
    print(f"{cell} step1 loss: {losses[0]:.7f}")
    print(f"{cell} step2 loss: {losses[1]:.7f}")
    print(f"tensors: {len(record)}")
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
