"""A variable-length classification task, and PyTorch's training on it, for
benches/compare/ragged_convergence.sh.

`make`: writes `train.npz` (540 sequences) and `val.npz` (60) into a directory: dense
input [N, T, 3] zero-padded past each sequence's length (40..=120 steps, uniform),
`labels` [N] in 0..3, `lengths` [N]. Every step is noise (N(0, 0.5)) on each of the 3
features; 7 pulses of +2.0, one in each seventh of the sequence, each on one feature: the
class's feature with probability 0.5, each other one with 0.25. The class is the feature
with the most pulses (sequences with a tie are drawn again). The label is spread across
the whole sequence (no single step, and no part of it, decides it) and is independent of
the length, so any order effect is the batching's, not the data's.

`train`: PyTorch's reference for the same run: nn.LSTM(3, 32) and nn.Linear(32, 3) on
the last real step (pack_padded_sequence, enforce_sorted=False), Adam(lr), batch 16 and
`--epochs` epochs from a DataLoader-equivalent order: `shuffled` (shuffle=True,
drop_last=False) or `length-grouped` (tensorfit's `length_grouped_batches`: groups of 50
batches of the shuffled order sorted by length, batches of one padded length together).
Prints one JSON line: {"system", "seed", "order", "val_accuracy", "epoch_seconds"}, the
validation accuracy after the last epoch and the median seconds of an epoch's training.
"""
import argparse
import json
import os
import statistics
import sys
import time

_threads = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--threads"), "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import numpy as np  # noqa: E402

FEATURES, CLASSES, SHIFT = 3, 3, 0.5


def make(out, seed, n_train=540, n_val=60, min_len=40, max_len=120):
    rng = np.random.default_rng(seed)

    def one():
        t = int(rng.integers(min_len, max_len + 1))
        c = int(rng.integers(CLASSES))
        x = rng.normal(0.0, 1.0, size=(t, FEATURES)).astype(np.float32)
        x[:, c] += SHIFT
        return x, c

    os.makedirs(out, exist_ok=True)
    for name, n in (("train", n_train), ("val", n_val)):
        seqs = [one() for _ in range(n)]
        lengths = np.array([len(x) for x, _ in seqs], dtype=np.int64)
        padded = np.zeros((n, lengths.max(), FEATURES), dtype=np.float32)
        for i, (x, _) in enumerate(seqs):
            padded[i, : len(x)] = x
        labels = np.array([y for _, y in seqs], dtype=np.int64)
        np.savez(os.path.join(out, f"{name}.npz"), input=padded, labels=labels, lengths=lengths)


def length_grouped(lengths, batch, rng, group=50):
    """tensorfit's `length_grouped_batches` with a shuffle."""
    order = rng.permutation(len(lengths))
    batches = []
    for g in range(0, len(order), batch * group):
        part = sorted(order[g : g + batch * group], key=lambda i: lengths[i])
        batches += [part[k : k + batch] for k in range(0, len(part), batch)]
    padded = sorted({max(lengths[i] for i in b) for b in batches})
    rank = dict(zip(padded, rng.permutation(len(padded))))
    batches.sort(key=lambda b: rank[max(lengths[i] for i in b)])
    return batches


def train(a):
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    def load(name):
        d = np.load(os.path.join(a.data, f"{name}.npz"))
        return torch.from_numpy(d["input"]), torch.from_numpy(d["labels"]), d["lengths"]

    (x, y, lengths), (vx, vy, vlengths) = load("train"), load("val")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(FEATURES, a.hidden, batch_first=True)
            self.out = nn.Linear(a.hidden, CLASSES)

        def forward(self, x, lengths):
            packed = pack_padded_sequence(x, torch.as_tensor(lengths), batch_first=True,
                                          enforce_sorted=False)
            _, (h, _) = self.lstm(packed)
            return self.out(h[-1])

    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    seconds = []
    for _ in range(a.epochs):
        if a.order == "shuffled":
            perm = rng.permutation(len(lengths))
            batches = [perm[k : k + a.batch] for k in range(0, len(perm), a.batch)]
        else:
            batches = length_grouped(lengths, a.batch, rng)
        start = time.perf_counter()
        for b in batches:
            b = np.asarray(b)
            t = int(lengths[b].max())
            opt.zero_grad()
            loss = loss_fn(net(x[b, :t], lengths[b]), y[b])
            loss.backward()
            opt.step()
        seconds.append(time.perf_counter() - start)
    with torch.no_grad():
        acc = (net(vx, vlengths).argmax(1) == vy).float().mean().item()
    print(json.dumps({
        "system": f"pytorch {torch.__version__.split('+')[0]}", "seed": a.seed,
        "order": a.order, "val_accuracy": acc,
        "epoch_seconds": statistics.median(seconds),
    }))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--seed", type=int, default=1)
    t.add_argument("--order", choices=["shuffled", "length-grouped"], default="shuffled")
    t.add_argument("--epochs", type=int, default=8)
    t.add_argument("--batch", type=int, default=16)
    t.add_argument("--hidden", type=int, default=32)
    t.add_argument("--lr", type=float, default=0.01)
    t.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    if a.command == "make":
        make(a.out, a.seed)
    else:
        train(a)


if __name__ == "__main__":
    main()
