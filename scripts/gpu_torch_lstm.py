#!/usr/bin/env python3
"""PyTorch's cuDNN LSTM on tensorfit's seed workloads, for the GPU check's comparison table.

The same network as tensorfit's `seed` preset (152 one-hot inputs -> 3 x LSTM 250 -> last
time step -> BatchNorm 250 -> Dense 100 + tanh -> BatchNorm 100 -> Dense 6 -> softmax
cross-entropy; Adam, lr 1e-3) on the same workloads:

- training step: batch 100, length 2000, truncated BPTT 50: one step is the whole sequence
  in 40 segments of 50 steps, each segment forward + backward + one Adam update, the LSTM
  state carried (detached) from segment to segment, as tensorfit's trainer does it;
- inference: batch 100, length 2000, the whole sequence in one forward pass.

FP32 throughout, with TF32 off (tensorfit's cuBLAS GEMMs are plain FP32), and the GPU
synchronised inside the timed region. Prints one JSON object:
{"device": ..., "train_s_per_step": ..., "infer_s": ..., "torch": ..., "cudnn": ...}.
Needs only PyTorch with CUDA; data is random one-hot (timing does not depend on it).
"""

import argparse
import json
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--seq-len", type=int, default=2000)
    p.add_argument("--tbptt", type=int, default=50)
    p.add_argument("--steps", type=int, default=3, help="timed training steps (after 1 warm-up)")
    a = p.parse_args()

    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        print(json.dumps({"error": f"no PyTorch: {e}"}))
        return 1
    if not torch.cuda.is_available():
        print(json.dumps({"error": "PyTorch sees no CUDA device"}))
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    torch.manual_seed(1)

    features, hidden, layers, dense, classes = 152, 250, 3, 100, 6

    class Seed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(features, hidden, layers)  # time-major [T, B, F], as tensorfit
            self.bn1 = nn.BatchNorm1d(hidden)
            self.dense = nn.Linear(hidden, dense)
            self.bn2 = nn.BatchNorm1d(dense)
            self.out = nn.Linear(dense, classes)

        def forward(self, x, state=None):
            y, state = self.lstm(x, state)
            h = self.bn2(torch.tanh(self.dense(self.bn1(y[-1]))))
            return self.out(h), state

    model = Seed().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    b, t, k = a.batch, a.seq_len, min(a.tbptt, a.seq_len)

    def one_hot_batch():
        idx = torch.randint(0, features, (t, b), device=dev)
        return nn.functional.one_hot(idx, features).float(), torch.randint(0, classes, (b,), device=dev)

    def train_step(x, labels):
        model.train()
        state = None
        for s in range(0, t, k):
            logits, state = model(x[s : s + k], state)
            state = tuple(v.detach() for v in state)
            loss = loss_fn(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return loss

    x, labels = one_hot_batch()
    train_step(x, labels)  # warm-up (cuDNN plans, allocator)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.steps):
        train_step(x, labels)
    torch.cuda.synchronize()
    train_s = (time.perf_counter() - start) / a.steps

    model.eval()
    with torch.no_grad():
        model(x)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        model(x)
        torch.cuda.synchronize()
        infer_s = time.perf_counter() - start

    print(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "train_s_per_step": train_s,
                "infer_s": infer_s,
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "peak_bytes": torch.cuda.max_memory_allocated(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
