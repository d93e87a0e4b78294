"""Streaming latency in PyTorch, for benches/compare/stream.sh: the seed network
(nn.LSTM(152, 250, 3) -> BatchNorm1d -> Linear -> tanh -> BatchNorm1d -> Linear ->
softmax) in eval mode under no_grad, batch 1, called one step at a time with (h, c)
passed back, as an app streams with PyTorch.

    python benches/compare/torch_stream.py [--threads 2] [--steps 2000] [--repeats 5]

Prints one JSON line: the median over the repeats of the mean microseconds per step, in
wall-clock time and in this process's CPU time (time.process_time).
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn


class Seed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(152, 250, 3)
        self.bn1 = nn.BatchNorm1d(250)
        self.dense = nn.Linear(250, 100)
        self.bn2 = nn.BatchNorm1d(100)
        self.out = nn.Linear(100, 6)

    def step(self, x, state):  # x: [1, B, 152]
        y, state = self.lstm(x, state)
        z = self.bn2(torch.tanh(self.dense(self.bn1(y[-1]))))
        return torch.softmax(self.out(z), dim=1), state


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = Seed().eval()
    inputs = [torch.nn.functional.one_hot(torch.tensor([[k]]), 152).float() for k in range(152)]
    with torch.no_grad():
        state = None
        for x in inputs + inputs[:48]:
            _, state = model.step(x, state)
        wall, cpu = [], []
        for _ in range(a.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            for s in range(a.steps):
                _, state = model.step(inputs[s % len(inputs)], state)
            wall.append((time.perf_counter() - t0) * 1e6 / a.steps)
            cpu.append((time.process_time() - c0) * 1e6 / a.steps)
    print(json.dumps({
        "system": "pytorch",
        "us_per_step": round(statistics.median(wall), 2),
        "cpu_us_per_step": round(statistics.median(cpu), 2),
    }))


if __name__ == "__main__":
    main()
