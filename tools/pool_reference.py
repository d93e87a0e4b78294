"""The pooling part of tensorfit's PyTorch reference data (called by make_reference.py).

Two sequence classifiers over the padded batches of tools/bidirectional_reference.py
(lengths 6, 3, 1, 4, 6 of T=6; the steps past a sequence's end hold random values that
must not matter), each reducing a stack's padded output over each sequence's own steps:

``pool_mean_reference.safetensors``::

    lstm = nn.LSTM(F=5, H=6, num_layers=2)            # time-major, through pack_padded_sequence
    mean = y summed over the steps inside each sequence, divided by its length
    out  = nn.Linear(6, 4); CrossEntropyLoss over the B sequences

``pool_max_reference.safetensors``::

    gru  = nn.GRU(F=5, H=6, num_layers=2, bidirectional=True)
    max  = y.masked_fill(past the end, -inf).amax(0)   # each feature's maximum
    head = nn.Sequential(nn.Linear(12, 7), nn.Tanh()); out = nn.Linear(7, 4)

Training, tensors and metadata as tools/bidirectional_reference.py's files (two Adam steps
from torch.manual_seed(13), then evaluation on step 1's batch).
"""

import torch
from torch import nn

from bidirectional_reference import D, F, H, K, LAYERS, T, metadata, packed, train
from reference_files import data_path


def past_end(lengths):
    """[T, B, 1]: true at the steps past each sequence's end."""
    return (torch.arange(T)[:, None] >= lengths[None, :])[:, :, None]


class MeanClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(F, H, num_layers=LAYERS)
        self.out = nn.Linear(H, K)

    def forward(self, x, lengths):
        y, _ = packed(self.lstm, x, lengths)  # 0 past each end
        return self.out(y.sum(0) / lengths[:, None].to(y.dtype))


class MaxClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, num_layers=LAYERS, bidirectional=True)
        self.head = nn.Sequential(nn.Linear(2 * H, D), nn.Tanh())
        self.out = nn.Linear(D, K)

    def forward(self, x, lengths):
        y, _ = packed(self.gru, x, lengths)
        pooled = y.masked_fill(past_end(lengths), float("-inf")).amax(0)
        return self.out(self.head(pooled))


def build():
    """Every file: (path, tensors, metadata)."""
    torch.manual_seed(13)
    mean = train(MeanClassifier(), every_step=False)
    torch.manual_seed(13)
    maximum = train(MaxClassifier(), every_step=False)
    return [
        (
            data_path("pool_mean_reference.safetensors"),
            mean,
            metadata("lstm", "LSTM(5, 6, 2 layers) -> mean over each sequence's steps -> "
                     "Linear(6, 4), padded, CrossEntropyLoss"),
        ),
        (
            data_path("pool_max_reference.safetensors"),
            maximum,
            metadata("gru", "GRU(5, 6, 2 layers, bidirectional) -> max over each sequence's "
                     "steps -> Linear(12, 7) -> tanh -> Linear(7, 4), padded, CrossEntropyLoss"),
        ),
    ]
