#!/usr/bin/env python3
"""PyTorch state dicts for tensorfit's import test (tests/pytorch_import.rs), and the way
back: a tensorfit checkpoint loaded into PyTorch with load_state_dict.

The network is the seed network's PyTorch mirror (tools/make_reference.py):
nn.LSTM(F, H, 3) -> BatchNorm1d(H) `bn1` -> Linear(H, D) `dense` -> tanh ->
BatchNorm1d(D) `bn2` -> Linear(D, C) `out`, as tensorfit's `ModelConfig` names it.

    write-small DIR   the small seed-shaped network (F=10, H=8, D=5, C=6; torch.manual_seed(0),
                      BatchNorm statistics perturbed so they are not 0/1) saved with
                      safetensors.torch.save_file(model.state_dict(), ...) four times:
                      seed_small_state_dict_{f32,f16,bf16,f64}.safetensors, the model
                      converted with .float()/.half()/.bfloat16()/.double() (the int64
                      num_batches_tracked counters stay int64). Committed; rerun with
                      ~/torchvenv/bin/python crates/tensorfit-nn/tests/data/state_dicts.py \
                          write-small crates/tensorfit-nn/tests/data
    write-seed PATH   the full-size seed network (F=152, H=250, D=100, C=6) in float32; used by
                      the test when PyTorch is installed, not committed (5.7 MB).
    load-back CKPT STATE_DICT
                      loads the tensorfit checkpoint CKPT into a fresh model with
                      load_state_dict (the lines docs/models.md shows) and checks that every
                      tensor equals the one in STATE_DICT; prints "loaded back: N tensors equal".
"""

import os
import sys

import torch
from torch import nn
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 4, "tools"))
from make_reference import perturb_batchnorm  # noqa: E402

SMALL = dict(F=10, H=8, D=5, C=6)
SEED = dict(F=152, H=250, D=100, C=6)
LAYERS = 3


class Seed(nn.Module):
    def __init__(self, F, H, D, C):
        super().__init__()
        self.lstm = nn.LSTM(F, H, num_layers=LAYERS)
        self.bn1 = nn.BatchNorm1d(H)
        self.dense = nn.Linear(H, D)
        self.bn2 = nn.BatchNorm1d(D)
        self.out = nn.Linear(D, C)


def build(sizes):
    """The model as tools/make_reference.py starts it: the same seed, construction order
    and BatchNorm perturbation, so the small f32 state dict equals its `init.*` tensors."""
    torch.manual_seed(0)
    model = Seed(**sizes)
    perturb_batchnorm(model)
    for bn in (model.bn1, model.bn2):
        bn.num_batches_tracked.fill_(7)
    return model


def write_small(out_dir):
    for suffix, convert in [
        ("f32", nn.Module.float),
        ("f16", nn.Module.half),
        ("bf16", nn.Module.bfloat16),
        ("f64", nn.Module.double),
    ]:
        path = f"{out_dir}/seed_small_state_dict_{suffix}.safetensors"
        save_file(convert(build(SMALL)).state_dict(), path)
        print("wrote", path)


def load_back(checkpoint, state_dict):
    want = load_file(state_dict)
    sizes = dict(
        F=want["lstm.weight_ih_l0"].shape[1],
        H=want["lstm.weight_hh_l0"].shape[1],
        D=want["dense.weight"].shape[0],
        C=want["out.weight"].shape[0],
    )
    model = Seed(**sizes)
    # The way back, as docs/models.md shows it: a checkpoint holds the model's tensors under
    # PyTorch's names plus Adam's moments under `adam.`; BatchNorm's num_batches_tracked
    # counters are not in it and keep their values.
    state = {k: v for k, v in load_file(checkpoint).items() if not k.startswith("adam.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(k.endswith("num_batches_tracked") for k in missing), missing
    got = model.state_dict()
    n = 0
    for name, t in want.items():
        if name.endswith("num_batches_tracked"):
            continue
        assert torch.equal(got[name], t.float()), name
        n += 1
    print(f"loaded back: {n} tensors equal")


def main(argv):
    if len(argv) == 2 and argv[0] == "write-small":
        write_small(argv[1])
    elif len(argv) == 2 and argv[0] == "write-seed":
        save_file(build(SEED).state_dict(), argv[1])
    elif len(argv) == 3 and argv[0] == "load-back":
        load_back(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
