"""The every-step part of tensorfit's PyTorch reference data (called by make_reference.py).

Writes ``tests/data/every_step_reference.safetensors``: a small language model on token
ids ``0..V`` (V=7), read as their exact one-hot vectors by ``lstm = nn.LSTM(V, H=6,
num_layers=2)`` (time-major); its whole output ``y [T, B, H]`` is flattened to ``T·B``
rows, through ``head.0 = nn.BatchNorm1d(6)`` (statistics over every row) ->
``head.1 = nn.Linear(6, 5)`` -> tanh -> ``out = nn.Linear(5, V)``, and
``nn.CrossEntropyLoss(ignore_index=-1)`` over the rows (the mean over the rows not
ignored). ``Adam(lr=0.01)``, three steps on whole sequences (T=9, B=4, zero initial
state): step 1 labels every step; steps 2 and 3 ignore the steps past each sequence's
length (lengths 9, 4, 1, 6: a padded batch, whose padding cannot change the real steps'
outputs, since the LSTM reads forwards), then the trained model is evaluated on step 2's
batch.

Initialisation: PyTorch defaults after ``torch.manual_seed(3)``; then, in this order,
for each step: ids = randint(0, V, (T, B)), labels = randint(0, V, (T, B)).

Tensors (float32; ids and labels as whole numbers, ignored labels -1)::

    init.<name>                       state_dict before step 1 (no num_batches_tracked)
    step{s}.x [T, B], step{s}.labels [T, B]
    step{s}.loss [1], step{s}.probs [T, B, V]   the step's forward, before its update
    step{s}.grad.<param>              the step's float32 gradients
    step{s}.exact_grad.<param>        the same in float64 (stored as float32): BatchNorm
                                      amplifies rounding in the gradients below it
    step{s}.after.<name>              state_dict after the step (Adam, running statistics)
    eval.loss [1], eval.probs [T, B, V]         the trained model (eval mode) on step 2's batch

Metadata: vocab, hidden, layers, dense, batch, steps, lr, lengths, torch_version,
description.

Windowed truncated BPTT (DL4J's) goes to ``tests/data/windowed_tbptt_reference.safetensors``
(``build_windows``): ``lstm = nn.LSTM(V, H, 2)`` on one-hot ids -> ``out = nn.Linear(H,
V)`` on every step, ``CrossEntropyLoss()``, ``Adam(lr=0.01)``, from
``torch.manual_seed(4)``; one minibatch of T=10, B=3 cut into windows of L=4 (4, 4, 2),
each a forward from the carried (h, c), a backward, and ``opt.step()``, the state detached
between windows. Tensors: ``init.<param>``, ``x``, ``labels`` [T, B],
``window{w}.loss`` [1], ``window{w}.grad.<param>``, ``after.<param>`` (after the three
updates), ``h`` and ``c`` [2, B, H] (the state carried into the last window).
"""

import copy

import torch
from torch import nn

from reference_files import data_path

V = 7  # vocabulary = classes
H = 6  # hidden units
LAYERS = 2
D = 5  # head.0 units
B = 4  # batch
T = 9  # steps
LR = 0.01
LENGTHS = [9, 4, 1, 6]
IGNORE = -1

DEFAULT_OUT = data_path("every_step_reference.safetensors")


class LanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(V, H, num_layers=LAYERS)
        self.head = nn.Sequential(nn.BatchNorm1d(H), nn.Linear(H, D), nn.Tanh())
        self.out = nn.Linear(D, V)

    def forward(self, ids):
        x = nn.functional.one_hot(ids.long(), V).to(self.out.weight.dtype)
        y, _ = self.lstm(x)
        rows = self.head(y.reshape(T * B, H))
        return self.out(rows)  # [T·B, V]


WINDOWS_OUT = data_path("windowed_tbptt_reference.safetensors")
WT, WB, WL = 10, 3, 4  # steps, batch, window


class WindowModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(V, H, num_layers=LAYERS)
        self.out = nn.Linear(H, V)

    def forward(self, ids, state):
        x = nn.functional.one_hot(ids.long(), V).to(torch.float32)
        y, state = self.lstm(x, state)
        return self.out(y), state


def build_windows():
    torch.manual_seed(4)
    model = WindowModel()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    record = {f"init.{n}": p.detach().clone() for n, p in model.named_parameters()}
    x, labels = torch.randint(0, V, (WT, WB)), torch.randint(0, V, (WT, WB))
    record["x"], record["labels"] = x, labels
    state = (torch.zeros(LAYERS, WB, H), torch.zeros(LAYERS, WB, H))
    for w, s in enumerate(range(0, WT, WL), start=1):
        record["h"], record["c"] = state  # at the end: the state entering the last window
        opt.zero_grad()
        logits, state = model(x[s : s + WL], state)
        loss = nn.CrossEntropyLoss()(logits.reshape(-1, V), labels[s : s + WL].reshape(-1))
        loss.backward()
        opt.step()
        state = (state[0].detach(), state[1].detach())
        record[f"window{w}.loss"] = loss.detach().reshape(1)
        for n, p in model.named_parameters():
            record[f"window{w}.grad.{n}"] = p.grad.detach().clone()
    record.update({f"after.{n}": p.detach().clone() for n, p in model.named_parameters()})
    record = {k: v.to(torch.float32).contiguous() for k, v in record.items()}
    metadata = {
        "vocab": str(V),
        "hidden": str(H),
        "layers": str(LAYERS),
        "batch": str(WB),
        "steps": str(WT),
        "tbptt": str(WL),
        "lr": str(LR),
        "torch_version": torch.__version__,
        "description": "tensorfit windowed truncated-BPTT reference: one-hot ids (V=7) -> "
        "LSTM(7, 6, 2 layers) -> Linear(6, 7) on every step, CrossEntropyLoss, Adam(lr=0.01); "
        "T=10, B=3 in windows of 4, 4, 2, an update per window, state detached between; "
        "manual_seed(4), float32 CPU; generated by tools/make_reference.py",
    }
    return record, metadata


def state(model, prefix):
    return {
        f"{prefix}{n}": t.detach().clone()
        for n, t in model.state_dict().items()
        if not n.endswith("num_batches_tracked")
    }


def padded(labels):
    labels = labels.clone()
    for b, length in enumerate(LENGTHS):
        labels[length:, b] = IGNORE
    return labels


def exact_gradients(model, x, labels, loss_fn):
    """The step's gradients in float64 from the same weights and data."""
    m64 = copy.deepcopy(model).double()
    m64.zero_grad()
    loss_fn(m64(x).double(), labels.reshape(T * B).long()).backward()
    return {n: p.grad.detach().float().contiguous() for n, p in m64.named_parameters()}


def build():
    torch.manual_seed(3)
    model = LanguageModel()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    record = state(model, "init.")
    data = [(torch.randint(0, V, (T, B)), torch.randint(0, V, (T, B))) for _ in range(3)]
    data = [(x, y if s == 0 else padded(y)) for s, (x, y) in enumerate(data)]
    model.train()
    for s, (x, labels) in enumerate(data, start=1):
        exact = exact_gradients(model, x, labels, loss_fn)
        record.update({f"step{s}.exact_grad.{n}": g for n, g in exact.items()})
        opt.zero_grad()
        logits = model(x)
        loss = loss_fn(logits, labels.reshape(T * B).long())
        loss.backward()
        record[f"step{s}.x"] = x
        record[f"step{s}.labels"] = labels
        record[f"step{s}.loss"] = loss.detach().reshape(1)
        record[f"step{s}.probs"] = logits.detach().softmax(-1).reshape(T, B, V)
        for n, p in model.named_parameters():
            record[f"step{s}.grad.{n}"] = p.grad.detach().clone()
        opt.step()
        record.update(state(model, f"step{s}.after."))
    model.eval()
    with torch.no_grad():
        x, labels = data[1]
        logits = model(x)
        record["eval.loss"] = loss_fn(logits, labels.reshape(T * B).long()).reshape(1)
        record["eval.probs"] = logits.softmax(-1).reshape(T, B, V)
    record = {k: v.to(torch.float32).contiguous() for k, v in record.items()}
    metadata = {
        "vocab": str(V),
        "hidden": str(H),
        "layers": str(LAYERS),
        "dense": str(D),
        "batch": str(B),
        "steps": str(T),
        "lr": str(LR),
        "lengths": ",".join(map(str, LENGTHS)),
        "torch_version": torch.__version__,
        "description": "tensorfit every-step reference: one-hot ids (V=7) -> LSTM(7, 6, 2 "
        "layers) -> every step as T*B rows -> BatchNorm1d(6) -> Linear(6, 5) -> tanh -> "
        "Linear(5, 7), CrossEntropyLoss(ignore_index=-1), Adam(lr=0.01), three steps (T=9, "
        "B=4; steps 2-3 ignore steps past lengths 9, 4, 1, 6), then eval; manual_seed(3), "
        "float32 CPU; generated by tools/make_reference.py",
    }
    return record, metadata
