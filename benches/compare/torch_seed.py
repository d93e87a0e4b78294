"""Times PyTorch on the seed network's workloads, for benches/compare/run.sh.

Prints one JSON object per line: {"system": ..., "workload": "train"|"infer"|"gemm",
"ms": median milliseconds, "gflops": ...}. The network is the seed network as
tensorfit builds it: nn.LSTM(152, 250, 3) -> last step -> BatchNorm1d(250) ->
Linear(250, 100) -> tanh -> BatchNorm1d(100) -> Linear(100, 6), cross-entropy, Adam.
Inputs are dense one-hot vectors, as in tensorfit's bench. FLOPs use the same formula
as `tensorfit bench`: forward LSTM = sum over layers 2*4*H*(I+H)*B*T, training = 3x.
"""
import argparse
import json
import os
import statistics
import sys
import time

# numpy's BLAS reads its thread count at import: set it from --threads first.
_threads = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--threads"), "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import torch  # noqa: E402
from torch import nn


class Seed(nn.Module):
    """The seed network; `hidden` other than 250 gives the benchmark matrix's variants."""

    def __init__(self, hidden=250):
        super().__init__()
        self.lstm = nn.LSTM(152, hidden, 3)
        self.bn1 = nn.BatchNorm1d(hidden)
        self.dense = nn.Linear(hidden, 100)
        self.bn2 = nn.BatchNorm1d(100)
        self.out = nn.Linear(100, 6)

    def forward(self, x, state=None):  # x: [T, B, 152]; state: (h0, c0) or None
        y, _ = self.lstm(x, state)
        z = self.bn1(y[-1])
        z = self.bn2(torch.tanh(self.dense(z)))
        return self.out(z)


def lstm_flops(batch, steps, hidden=250):
    dims = [(152, hidden), (hidden, hidden), (hidden, hidden)]
    return sum(2 * 4 * h * (i + h) * batch * steps for i, h in dims)


def one_hot(steps, batch, gen):
    idx = torch.randint(0, 152, (steps, batch), generator=gen)
    return torch.nn.functional.one_hot(idx, 152).float()


def median_ms(fn, iters, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--train", default="32,50", help="batch,length (tbptt = length)")
    p.add_argument("--infer", default="100,200", help="batch,length")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    system = f"pytorch {torch.__version__.split('+')[0]}"

    # The machine's f32 GEMM ceiling: 1024^3 sgemm on the same threads.
    m1, m2 = torch.randn(1024, 1024), torch.randn(1024, 1024)
    ms = median_ms(lambda: m1 @ m2, max(a.iters, 10))
    print(json.dumps({"system": system, "workload": "gemm", "ms": ms,
                      "gflops": 2 * 1024**3 / ms / 1e6}), flush=True)
    try:
        import numpy as np

        n1 = np.random.rand(1024, 1024).astype(np.float32)
        n2 = np.random.rand(1024, 1024).astype(np.float32)
        ms = median_ms(lambda: n1 @ n2, max(a.iters, 10))
        print(json.dumps({"system": f"numpy {np.__version__}", "workload": "gemm-numpy",
                          "ms": ms, "gflops": 2 * 1024**3 / ms / 1e6}), flush=True)
    except ImportError:
        pass

    model = Seed()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    b, t = map(int, a.train.split(","))
    x, target = one_hot(t, b, gen), torch.randint(0, 6, (b,), generator=gen)
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), target).backward()
        opt.step()

    ms = median_ms(step, a.iters)
    print(json.dumps({"system": system, "workload": "train", "ms": ms,
                      "gflops": 3 * lstm_flops(b, t) / ms / 1e6}), flush=True)

    b, t = map(int, a.infer.split(","))
    x = one_hot(t, b, gen)
    model.eval()

    def infer():
        with torch.no_grad():
            torch.softmax(model(x), dim=-1)

    ms = median_ms(infer, a.iters)
    print(json.dumps({"system": system, "workload": "infer", "ms": ms,
                      "gflops": lstm_flops(b, t) / ms / 1e6}), flush=True)


if __name__ == "__main__":
    main()
