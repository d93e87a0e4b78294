"""Times one PyTorch training step of the models of benches/compare/layers.sh, for that
script: the same layers, sizes and task shapes as its model files, trained by Adam on
random data of the built-in temporal-order task's shapes (152 features, 6 classes, one
label per sequence).

  bilstm: nn.LSTM(152, H, num_layers=2, bidirectional=True) -> torch.cat((h_n[-2],
          h_n[-1]), 1) -> nn.Linear(2H, 6), CrossEntropyLoss, Adam (H = --hidden, 256)
  transformer: ids -> nn.Embedding(152, 256) -> nn.TransformerEncoder(
          nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1), 4) ->
          mean over the steps -> nn.Linear(256, 6) (--hidden unused)

A step is zero_grad, forward, backward and Adam's update, as `tensorfit bench --mode
train` times one. Prints one JSON line per model: {"system", "model", "batch", "steps",
"ms"}, `ms` the median of --iters timed steps after two warm-ups.
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

FEATURES, CLASSES = 152, 6


class BiLstm(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, hidden, num_layers=2, bidirectional=True)
        self.out = nn.Linear(2 * hidden, CLASSES)

    def forward(self, x):
        _, (h_n, _) = self.lstm(x)
        return self.out(torch.cat((h_n[-2], h_n[-1]), 1))


class Transformer(nn.Module):
    def __init__(self, _hidden):
        super().__init__()
        self.embedding = nn.Embedding(FEATURES, 256)
        layer = nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.out = nn.Linear(256, CLASSES)

    def forward(self, x):
        return self.out(self.encoder(self.embedding(x)).mean(0))


MODELS = {"bilstm": BiLstm, "transformer": Transformer}
# Each model's input: features [T, B, 152], or symbol ids [T, B].
TOKENS = {"transformer"}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--models", default="bilstm")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    system = f"pytorch {torch.__version__.split('+')[0]}"
    for name in a.models.split(","):
        model = MODELS[name](a.hidden)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        if name in TOKENS:
            x = torch.randint(0, FEATURES, (a.steps, a.batch))
        else:
            x = torch.randn(a.steps, a.batch, FEATURES)
        labels = torch.randint(0, CLASSES, (a.batch,))

        def step():
            opt.zero_grad()
            loss_fn(model(x), labels).backward()
            opt.step()

        ms = median_ms(step, a.iters)
        print(json.dumps({"system": system, "model": name, "batch": a.batch,
                          "steps": a.steps, "hidden": a.hidden, "ms": ms}), flush=True)


if __name__ == "__main__":
    main()
