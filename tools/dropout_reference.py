#!/usr/bin/env python3
"""PyTorch reference data for tensorfit's dropout, "given the same mask".

Writes ``tests/data/dropout_small_reference.safetensors``: a two-layer ``nn.LSTM(F=5,
H=6)`` with dropout 0.3 between its layers (time-major), the last step, then the head
``nn.Sequential(nn.Dropout(0.25), nn.Linear(6, 4), nn.Tanh())`` registered as ``head``,
then ``out = nn.Linear(4, 3)`` and ``nn.CrossEntropyLoss()``, trained with
``Adam(lr=0.01)`` for two steps on whole sequences (T=7, B=8, zero initial state), then
evaluated (no dropout).

PyTorch's own dropout draws its masks from its generator, which tensorfit does not
reproduce. Instead the masks are tensorfit's (``tensorfit_core::dropout``, transcribed
below in integer arithmetic: ``mix32``, ``site_key``, ``element_bits``, ``step_key``) for
the run seed ``SEED`` and steps 1 and 2, and applied here by multiplying: the LSTM is run
layer by layer (``lstm0``, ``lstm1``, saved under ``nn.LSTM``'s names ``lstm.*_l0`` and
``lstm.*_l1``) with ``y0 * mask`` between them, and the head's input is ``h_last *
mask``. A mask holds ``1/(1-p)`` (float32) where an element is kept, else 0. Site
numbers: recurrent layer k's output is site k, head layer i is site 65536 + i; an
element's index is its row-major index in the tensor.

Initialisation: PyTorch defaults after ``torch.manual_seed(3)`` (lstm0, lstm1, head,
out in that order); then, drawn in this order, step1.x (randn), step1.labels (randint),
step2.x, step2.labels.

Tensors (float32)::

    init.<param>                      the parameters before step 1 (tensorfit's names)
    step{s}.x [T, B, F], step{s}.labels [B]
    step{s}.mask.lstm_l0 [T, B, H]    the mask between the two LSTM layers
    step{s}.mask.head0 [B, H]         the head dropout's mask
    step{s}.loss [1], step{s}.probs [B, 3]   the step's forward, before its update
    step{s}.grad.<param>              the step's float32 gradients (PyTorch's)
    step{s}.after.<param>             the parameters after the step's Adam update
    eval.probs [B, 3]                 the trained model on step1.x, in eval mode

Metadata: input, hidden, dense, classes, batch, steps, lr, seed, p_between, p_head,
torch_version, description.
"""

import argparse

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from reference_files import data_path

F, H, D, C, B, T = 5, 6, 4, 3, 8, 7
LR = 0.01
SEED = 5
P_BETWEEN = 0.3
P_HEAD = 0.25
HEAD_SITES = 1 << 16
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

DEFAULT_OUT = data_path("dropout_small_reference.safetensors")


def mix32(x):
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def site_key(key, site):
    return mix32(key ^ mix32((site + 0x9E3779B9) & M32))


def element_bits(k, index):
    return mix32((mix32((index ^ k) & M32) + k) & M32)


def step_key(seed, step):
    """The first draw of SplitMix64 seeded ``seed ^ step * 0xd1b54a32d192ed03``, top half."""
    state = (seed ^ ((step * 0xD1B54A32D192ED03) & M64)) & M64
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return (z ^ (z >> 31)) >> 32


def mask(key, site, p, shape):
    p32 = np.float32(p)
    threshold = min(int(np.floor(float(p32) * 4294967296.0 + 0.5)), M32)
    scale = np.float32(1.0) / (np.float32(1.0) - p32)
    k = site_key(key, site)
    n = int(np.prod(shape))
    kept = np.array([element_bits(k, i) >= threshold for i in range(n)])
    values = np.where(kept, scale, np.float32(0.0)).astype(np.float32)
    return torch.from_numpy(values.reshape(shape))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm0 = nn.LSTM(F, H)
        self.lstm1 = nn.LSTM(H, H)
        self.head = nn.Sequential(nn.Dropout(P_HEAD), nn.Linear(H, D), nn.Tanh())
        self.out = nn.Linear(D, C)

    def forward(self, x, masks):
        y0, _ = self.lstm0(x)
        if masks is not None:
            y0 = y0 * masks[0]
        y1, _ = self.lstm1(y0)
        last = y1[-1]
        if masks is not None:
            last = last * masks[1]
        # head[0] (nn.Dropout) is replaced by the multiplication above.
        return self.out(self.head[2](self.head[1](last)))


def tensorfit_name(n):
    for k in (0, 1):
        prefix = f"lstm{k}."
        if n.startswith(prefix):
            return "lstm." + n[len(prefix):].replace("_l0", f"_l{k}")
    return n


def params(model, prefix):
    return {
        f"{prefix}{tensorfit_name(n)}": p.detach().clone()
        for n, p in model.named_parameters()
    }


def build():
    torch.manual_seed(3)
    model = Model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    record = params(model, "init.")
    data = [(torch.randn(T, B, F), torch.randint(0, C, (B,))) for _ in range(2)]
    model.train()
    for s, (x, labels) in enumerate(data, start=1):
        key = step_key(SEED, s)
        masks = (mask(key, 0, P_BETWEEN, (T, B, H)), mask(key, HEAD_SITES, P_HEAD, (B, H)))
        opt.zero_grad()
        logits = model(x, masks)
        loss = nn.CrossEntropyLoss()(logits, labels)
        loss.backward()
        record[f"step{s}.x"] = x
        record[f"step{s}.labels"] = labels.to(torch.float32)
        record[f"step{s}.mask.lstm_l0"] = masks[0]
        record[f"step{s}.mask.head0"] = masks[1]
        record[f"step{s}.loss"] = loss.detach().reshape(1)
        record[f"step{s}.probs"] = torch.softmax(logits.detach(), dim=1)
        for n, p in model.named_parameters():
            record[f"step{s}.grad.{tensorfit_name(n)}"] = p.grad.detach().clone()
        opt.step()
        record.update(params(model, f"step{s}.after."))
    model.eval()
    with torch.no_grad():
        record["eval.probs"] = torch.softmax(model(data[0][0], None), dim=1)
    record = {k: v.to(torch.float32).contiguous() for k, v in record.items()}
    metadata = {
        "input": str(F),
        "hidden": str(H),
        "dense": str(D),
        "classes": str(C),
        "batch": str(B),
        "steps": str(T),
        "lr": str(LR),
        "seed": str(SEED),
        "p_between": str(P_BETWEEN),
        "p_head": str(P_HEAD),
        "torch_version": torch.__version__,
        "description": "tensorfit dropout reference: LSTM(5, 6) x 2 with tensorfit's masks "
        "(p 0.3) between the layers, last step, tensorfit's mask (p 0.25), Linear(6, 4), "
        "tanh, Linear(4, 3), CrossEntropyLoss, Adam(lr=0.01), two steps on whole sequences "
        "(T=7, B=8); manual_seed(3), float32 CPU; generated by tools/dropout_reference.py",
    }
    return record, metadata


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()
    record, metadata = build()
    save_file(record, args.out, metadata=metadata)
    print(f"wrote {len(record)} tensors to {args.out}")


if __name__ == "__main__":
    main()
