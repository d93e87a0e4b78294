"""The benchmark matrix, PyTorch's side (see benches/compare/matrix.py, which drives it).

Speaks the same JSON lines as tensorfit's `benches/matrix.rs`: each stdin line a cell
{"mode": "train"|"infer", "batch", "seq_len", "tbptt", "hidden", "min_runs",
"min_seconds"}, each stdout line {"ms", "runs", "gflops"} or {"error"}. The network is
torch_seed.Seed(hidden); training with tbptt < seq_len runs the first seq_len - tbptt
steps without gradients and carries (h, c) into the last tbptt steps, which are trained
(tensorfit's truncated-BPTT mode). `--flush-denormal` calls
torch.set_flush_denormal(True) before any thread starts, so every thread inherits it.
"""
import argparse
import json
import os
import sys
import time

_threads = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--threads"), "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_seed import Seed, lstm_flops, one_hot  # noqa: E402


def run(cell, gen):
    train = cell["mode"] == "train"
    b, t, h = cell["batch"], cell["seq_len"], cell["hidden"]
    last = min(cell.get("tbptt", t), t)
    model = Seed(h)
    x = one_hot(t, b, gen)
    target = torch.randint(0, 6, (b,), generator=gen)
    if train:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        model.train()

        def once():
            state = None
            if last < t:
                with torch.no_grad():
                    _, state = model.lstm(x[: t - last])
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x[t - last:], state), target).backward()
            opt.step()

        flops = 3 * lstm_flops(b, last, h) + lstm_flops(b, t - last, h)
    else:
        model.eval()

        def once():
            with torch.no_grad():
                torch.softmax(model(x), dim=-1)

        flops = lstm_flops(b, t, h)
    once()
    ms = []
    started = time.perf_counter()
    while len(ms) < cell.get("min_runs", 3) or time.perf_counter() - started < cell.get("min_seconds", 1.0):
        t0 = time.perf_counter()
        once()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    median = ms[len(ms) // 2]
    return {"ms": median, "runs": len(ms), "gflops": flops / median / 1e6}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--flush-denormal", action="store_true")
    a = p.parse_args()
    if a.flush_denormal and not torch.set_flush_denormal(True):
        sys.exit("torch.set_flush_denormal(True): this CPU does not support it")
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = run(json.loads(line), gen)
        except Exception as e:  # a failed cell is reported, the server goes on
            answer = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
