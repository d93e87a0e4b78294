"""The bidirectional part of tensorfit's PyTorch reference data (called by make_reference.py).

Two models with ``bidirectional=True`` stacks over padded batches (lengths 6, 3, 1, 4, 6;
the steps past a sequence's end hold random values that must not matter), each run as a
PyTorch user runs it: ``pack_padded_sequence(x, lengths, enforce_sorted=False)`` -> the
stack -> ``pad_packed_sequence(total_length=T)``.

``bidirectional_lstm_reference.safetensors``, a tagger::

    lstm = nn.LSTM(F=5, H=6, num_layers=2, bidirectional=True)   # time-major
    out  = nn.Linear(12, 4) on every step
    CrossEntropyLoss(ignore_index=-1) over the T·B steps, the padded ones labelled -1

``bidirectional_gru_reference.safetensors``, a sequence classifier reading each
direction's own last step, ``torch.cat((h_n[-2], h_n[-1]), 1)``::

    gru  = nn.GRU(F=5, H=6, num_layers=2, bidirectional=True)
    head = nn.Sequential(nn.Linear(12, 7), nn.Tanh()); out = nn.Linear(7, 4)
    CrossEntropyLoss() over the B sequences

Each: PyTorch defaults after ``torch.manual_seed(11)``, ``Adam(lr=0.01)`` for two steps
(zero initial state), then evaluated on step 1's batch. Tensors (float32)::

    init.<param>                        the parameters before step 1, PyTorch's names
    step{s}.x [T, B, F], step{s}.lengths [B], step{s}.labels ([T, B] or [B], class ids)
    step{s}.loss [1], step{s}.probs     the step's forward, before its update
    step{s}.grad.<param>                the step's gradients
    step{s}.after.<param>               the parameters after the step's Adam update
    eval.loss [1], eval.probs           the trained model on step 1's batch

``bidirectional_tagger_*`` (for ``tensorfit import`` and ``predict --data``, as
tools/per_step_predict_reference.py's): the tagger's untrained ``state_dict``
(``..._state_dict``), a padded batch-first file ``input [N=5, T=6, F]`` with 0 past each
length and ``lengths [N]`` (``..._data``), and PyTorch's per-step probabilities
``[N, T, C]``, 0 past each length (``..._probs``).
"""

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from reference_files import data_path

F, H, LAYERS, D, K = 5, 6, 2, 7, 4
B, T = 5, 6
LENGTHS = [6, 3, 1, 4, 6]
LR = 0.01


def packed(stack, x, lengths):
    """`x` [T, B, F] through `stack` as a padded batch: the padded output [T, B, 2H] (0
    past each length) and h_n [2·layers, B, H]."""
    seq = pack_padded_sequence(x, lengths, enforce_sorted=False)
    y, h_n = stack(seq)
    y, _ = pad_packed_sequence(y, total_length=x.shape[0])
    return y, h_n


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(F, H, num_layers=LAYERS, bidirectional=True)
        self.out = nn.Linear(2 * H, K)

    def forward(self, x, lengths):
        y, _ = packed(self.lstm, x, lengths)
        return self.out(y)  # [T, B, K]


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(F, H, num_layers=LAYERS, bidirectional=True)
        self.head = nn.Sequential(nn.Linear(2 * H, D), nn.Tanh())
        self.out = nn.Linear(D, K)

    def forward(self, x, lengths):
        _, h_n = packed(self.gru, x, lengths)
        ends = torch.cat((h_n[-2], h_n[-1]), 1)  # each direction's own last step
        return self.out(self.head(ends))  # [B, K]


def params(model, prefix):
    return {prefix + n: t.detach().clone() for n, t in model.named_parameters()}


def batch(every_step, features=F):
    x = torch.randn(T, B, features)
    lengths = torch.tensor(LENGTHS)
    if every_step:
        labels = torch.randint(0, K, (T, B))
        labels[torch.arange(T)[:, None] >= lengths[None, :]] = -1
    else:
        labels = torch.randint(0, K, (B,))
    return x, lengths, labels


def train(model, every_step, features=F):
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-1)

    def loss_of(logits, labels):
        return loss_fn(logits.reshape(-1, K), labels.reshape(-1))

    record = params(model, "init.")
    data = [batch(every_step, features) for _ in range(2)]
    for s, (x, lengths, labels) in enumerate(data, start=1):
        opt.zero_grad()
        logits = model(x, lengths)
        loss = loss_of(logits, labels)
        loss.backward()
        record[f"step{s}.x"] = x
        record[f"step{s}.lengths"] = lengths.to(torch.float32)
        record[f"step{s}.labels"] = labels.to(torch.float32)
        record[f"step{s}.loss"] = loss.detach().reshape(1)
        record[f"step{s}.probs"] = logits.detach().softmax(-1)
        record.update({f"step{s}.grad.{n}": p.grad.clone() for n, p in model.named_parameters()})
        opt.step()
        record.update(params(model, f"step{s}.after."))
    with torch.no_grad():
        x, lengths, labels = data[0]
        logits = model(x, lengths)
        record["eval.loss"] = loss_of(logits, labels).reshape(1)
        record["eval.probs"] = logits.softmax(-1)
    return {k: v.to(torch.float32).contiguous() for k, v in record.items()}


def metadata(cell, description):
    return {
        "cell": cell,
        "input": str(F),
        "hidden": str(H),
        "layers": str(LAYERS),
        "dense": str(D),
        "classes": str(K),
        "batch": str(B),
        "steps": str(T),
        "lr": str(LR),
        "torch_version": torch.__version__,
        "description": description + "; Adam(lr=0.01), two steps, float32 CPU; generated by "
        "tools/make_reference.py",
    }


def tagger_files():
    """The tagger for `tensorfit import` and `predict --data`, batch-first."""
    torch.manual_seed(12)
    model = Tagger().eval()
    lengths = torch.tensor(LENGTHS)
    x = torch.randn(B, T, F)
    past_end = torch.arange(T)[None, :] >= lengths[:, None]  # [N, T]
    x[past_end] = 0.0
    with torch.no_grad():
        probs = model(x.transpose(0, 1), lengths).softmax(-1).transpose(0, 1).contiguous()
    probs[past_end] = 0.0
    meta = {"torch_version": torch.__version__, "description": "tools/bidirectional_reference.py"}
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    return [
        (data_path("bidirectional_tagger_state_dict.safetensors"), state, meta),
        (
            data_path("bidirectional_tagger_data.safetensors"),
            {"input": x.contiguous(), "lengths": lengths},
            meta,
        ),
        (
            data_path("bidirectional_tagger_probs.safetensors"),
            {"probabilities": probs, "lengths": lengths},
            meta,
        ),
    ]


def build():
    """Every file: (path, tensors, metadata)."""
    torch.manual_seed(11)
    tagger = train(Tagger(), every_step=True)
    torch.manual_seed(11)
    classifier = train(Classifier(), every_step=False)
    files = [
        (
            data_path("bidirectional_lstm_reference.safetensors"),
            tagger,
            metadata("lstm", "LSTM(5, 6, 2 layers, bidirectional) -> Linear(12, 4) on every "
                     "step, padded, CrossEntropyLoss(ignore_index=-1)"),
        ),
        (
            data_path("bidirectional_gru_reference.safetensors"),
            classifier,
            metadata("gru", "GRU(5, 6, 2 layers, bidirectional) -> cat(h_n[-2], h_n[-1]) -> "
                     "Linear(12, 7) -> tanh -> Linear(7, 4), padded, CrossEntropyLoss"),
        ),
    ]
    return files + tagger_files()
