"""A tagger from PyTorch for `tensorfit import` and `predict --data` (tests/per_step_predict.rs).

A model with a head on every step, as a PyTorch user builds it: ``lstm = nn.LSTM(F=4,
H=6, num_layers=2, batch_first=True)`` -> ``tag = nn.Linear(6, 5)`` -> tanh ->
``out = nn.Linear(5, C=3)`` on every step, softmax over the classes. PyTorch defaults
after ``torch.manual_seed(5)``; then ``input = randn(N=5, T=7, F)`` with every step past a
sequence's length set to 0 (lengths 7, 3, 5, 1, 6: a padded file).

The expected probabilities are PyTorch's per-step output the way a PyTorch user gets it
from a padded batch: ``pack_padded_sequence`` -> LSTM -> ``pad_packed_sequence(batch_first
=True, total_length=T)`` -> head -> softmax, then 0 on every step past a sequence's
length (``pad_packed_sequence``'s default ``padding_value``), the layout ``predict --data``
writes.

Writes three files in tests/data (float32; lengths int64):

    per_step_state_dict.safetensors   the model's state_dict (for `tensorfit import`)
    per_step_data.safetensors         input [N, T, F], lengths [N]   (for `--data`)
    per_step_reference.safetensors    probabilities [N, T, C], lengths [N]

Run: /root/torchvenv/bin/python tools/per_step_predict_reference.py
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from reference_files import data_path, write_checked

F, H, LAYERS, D, C = 4, 6, 2, 5, 3
N, T = 5, 7
LENGTHS = [7, 3, 5, 1, 6]


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(F, H, num_layers=LAYERS, batch_first=True)
        self.tag = nn.Linear(H, D)
        self.out = nn.Linear(D, C)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return torch.softmax(self.out(torch.tanh(self.tag(y))), dim=-1)  # [N, T, C]


def build():
    torch.manual_seed(5)
    model = Tagger().eval()
    lengths = torch.tensor(LENGTHS, dtype=torch.int64)
    x = torch.randn(N, T, F)
    past_end = torch.arange(T)[None, :] >= lengths[:, None]  # [N, T]
    x[past_end] = 0.0
    with torch.no_grad():
        probs = model(x, lengths)
    probs[past_end] = 0.0
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    meta = {
        "torch_version": torch.__version__,
        "description": "tools/per_step_predict_reference.py",
    }
    return [
        (data_path("per_step_state_dict.safetensors"), state, meta),
        (data_path("per_step_data.safetensors"), {"input": x.contiguous(), "lengths": lengths}, meta),
        (
            data_path("per_step_reference.safetensors"),
            {"probabilities": probs.contiguous(), "lengths": lengths},
            meta,
        ),
    ]


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for path, record, meta in build():
        write_checked(path, record, meta)
