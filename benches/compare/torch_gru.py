"""Times PyTorch's nn.GRU on the workloads of benches/gru_cpu.rs, for benches/compare/gru.sh.

A 3-layer nn.GRU(152, H) from a random h0, time-major. `train`: forward, then backward of
sum(y[-1] * R) to every weight (x needs no gradient; no optimizer step); `infer`: the
forward under torch.inference_mode(). Prints one JSON line per workload, as the Rust bench
does: {"system", "workload", "batch", "steps", "hidden", "ms", "gflops"}, `ms` the median
of --iters timed runs after two warm-ups; FLOPs: sum over layers 2*3*H*(I+H)*B*T,
training 3x.
"""
import argparse
import json
import os
import sys

# numpy's BLAS reads its thread count at import: set it from --threads first.
_threads = next((sys.argv[i + 1] for i, v in enumerate(sys.argv[:-1]) if v == "--threads"), "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import torch  # noqa: E402
from torch import nn  # noqa: E402

from torch_seed import median_ms  # noqa: E402  (the same timing as the seed's harness)

INPUT = 152
LAYERS = 3


def gru_flops(batch, steps, hidden):
    dims = [(INPUT, hidden)] + [(hidden, hidden)] * (LAYERS - 1)
    return sum(2 * 3 * h * (i + h) * batch * steps for i, h in dims)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--workloads", default="train:32:50:250,infer:100:200:250",
                   help="kind:batch:steps:hidden, comma-separated")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    system = f"pytorch {torch.__version__.split('+')[0]}"
    for spec in a.workloads.split(","):
        kind, batch, steps, hidden = spec.split(":")
        batch, steps, hidden = int(batch), int(steps), int(hidden)
        gru = nn.GRU(INPUT, hidden, LAYERS)
        x = torch.randn(steps, batch, INPUT)
        h0 = torch.randn(LAYERS, batch, hidden)
        if kind == "train":
            r = torch.randn(batch, hidden)

            def step():
                gru.zero_grad(set_to_none=True)
                y, _ = gru(x, h0)
                (y[-1] * r).sum().backward()

            passes = 3
        else:
            def step():
                with torch.inference_mode():
                    gru(x, h0)

            passes = 1
        ms = median_ms(step, a.iters)
        gflops = passes * gru_flops(batch, steps, hidden) / ms / 1e6
        print(json.dumps({"system": system, "workload": kind, "batch": batch, "steps": steps,
                          "hidden": hidden, "ms": ms, "gflops": gflops}), flush=True)


if __name__ == "__main__":
    main()
