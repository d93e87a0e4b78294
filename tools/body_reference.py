"""The reference data of the layers over the steps besides recurrent stacks (called by
make_reference.py): convolutions (a TCN) and a Transformer encoder, over the padded
batches of tools/bidirectional_reference.py (lengths 6, 3, 1, 4, 6 of T=6; the steps past
a sequence's end hold random values that must not matter).

Each sequence is run as if alone: a convolution reads zeros outside its sequence (its
input zeroed past the end, `past_end`), and the encoder masks the padded keys
(``src_key_padding_mask``); the head reads the mean over each sequence's own steps.

``tcn_reference.safetensors``::

    conv1 = nn.Conv1d(F=5, C=8, 3)            # causal: 2 zeros before, relu
    conv2 = nn.Conv1d(8, 8, 2, dilation=2)    # "same": 1 zero before, 1 after, relu,
                                              # its input added to its output
    out   = nn.Linear(8, 4) of the mean over each sequence's steps

``encoder_reference.safetensors`` (post-norm, ReLU),
``encoder_prenorm_reference.safetensors`` (``norm_first=True``, GELU, causal) and
``encoder_learned_reference.safetensors`` (learned positions, ``norm_first=True``, ReLU,
and the encoder's final ``norm=nn.LayerNorm(8)``)::

    x + sinusoidal positions (sin at even features, cos at odd, 10000^(-2i/F)),
      or learned ones: x + positions.weight[:T], an nn.Embedding(MAX_LEN=10, F)'s table
      (rows T..9 unused, their gradient zero)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(F=8, 2 heads,
              dim_feedforward=16, dropout=0.0, ...), num_layers=2)
    out     = nn.Linear(8, 4) of the mean over each sequence's steps

``encoder_tagger_*`` (for ``tensorfit import`` and ``predict --data``, as
tools/bidirectional_reference.py's tagger files): the untrained ``state_dict`` of
``x + sinusoids -> encoder (2 layers, post-norm ReLU) -> out = nn.Linear(8, 4)`` on every
step (``..._state_dict``), a padded batch-first file ``input [N=5, T=6, 8]`` with 0 past
each length and ``lengths [N]`` (``..._data``), and PyTorch's per-step probabilities
``[N, T, 4]`` in evaluation, 0 past each length (``..._probs``). ``conv_tagger_*``
likewise: ``x + positions.weight[:T]`` (learned, ``MAX_LEN`` rows) -> the TCN's two
convolutions -> ``out = nn.Linear(8, 4)`` on every step.

Training, tensors and metadata as tools/bidirectional_reference.py's files (two Adam steps
from torch.manual_seed(13), then evaluation on step 1's batch), but for the TCN from
torch.manual_seed(14): seed 13 draws a conv2.weight whose first gradient (-2.8e-8) sits at
Adam's eps, where float32 rounding of the gradient moves the update by 3e-5 (as
tools/make_reference.py says of the GRU's seed 0); and for the encoders from
torch.manual_seed(15), the first seed from 13 with no gradient in (0, 1e-6) but the keys'
bias (whose gradient is zero but for rounding: a constant added to a query's scores
leaves its softmax unchanged; tests/sequence_layers_pytorch_agreement.rs leaves it out).
"""

import math

import torch
from torch import nn

from bidirectional_reference import B, K, LENGTHS, T, train
from reference_files import data_path

F_CONV, C = 5, 8
F_ENC, HEADS, FF, ENC_LAYERS = 8, 2, 16, 2
MAX_LEN = 10


def learned_positions(features):
    """nn.Embedding(MAX_LEN, features): its table is what a learned position adds."""
    return nn.Embedding(MAX_LEN, features)


def past_end(lengths):
    """[T, B, 1]: true at the steps past each sequence's end."""
    return (torch.arange(T)[:, None] >= lengths[None, :])[:, :, None]


def mean_over_steps(y, lengths):
    """[B, F]: the mean of y [T, B, F] over each sequence's own steps."""
    y = y.masked_fill(past_end(lengths), 0.0)
    return y.sum(0) / lengths[:, None].to(y.dtype)


def conv(layer, x, left, right):
    """x [T, B, F] through `layer` with `left` and `right` zeros around each sequence."""
    x = nn.functional.pad(x.permute(1, 2, 0), (left, right))  # [B, F, T + left + right]
    return layer(x).permute(2, 0, 1)  # [T, B, C]


class Tcn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(F_CONV, C, 3)
        self.conv2 = nn.Conv1d(C, C, 2, dilation=2)
        self.out = nn.Linear(C, K)

    def forward(self, x, lengths):
        end = past_end(lengths)
        y = torch.relu(conv(self.conv1, x.masked_fill(end, 0.0), 2, 0))
        y = y.masked_fill(end, 0.0)
        y = y + torch.relu(conv(self.conv2, y, 1, 1))
        return self.out(mean_over_steps(y, lengths))


def sinusoids(steps, dim):
    """[steps, dim]: the PyTorch tutorial's PositionalEncoding table."""
    position = torch.arange(steps, dtype=torch.float32)[:, None]
    rate = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(steps, dim)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate[: dim // 2])
    return table


class Encoder(nn.Module):
    def __init__(self, norm_first, activation, causal, learned=False):
        super().__init__()
        if learned:
            self.positions = learned_positions(F_ENC)
        layer = nn.TransformerEncoderLayer(
            F_ENC, HEADS, dim_feedforward=FF, dropout=0.0, activation=activation,
            norm_first=norm_first)
        # The learned-positions file also has the encoder's final norm.
        norm = nn.LayerNorm(F_ENC) if learned else None
        self.encoder = nn.TransformerEncoder(layer, ENC_LAYERS, norm=norm,
                                             enable_nested_tensor=False)
        self.out = nn.Linear(F_ENC, K)
        self.causal = causal

    def forward(self, x, lengths):
        table = self.positions.weight[:T] if hasattr(self, "positions") else sinusoids(T, F_ENC)
        x = x + table[:, None, :]
        padding = torch.arange(T)[None, :] >= lengths[:, None]  # [B, T]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1) if self.causal else None
        y = self.encoder(x, mask=mask, src_key_padding_mask=padding, is_causal=self.causal)
        return self.out(mean_over_steps(y, lengths))


def metadata(description, **sizes):
    meta = {k: str(v) for k, v in sizes.items()}
    meta.update({
        "classes": str(K),
        "batch": str(B),
        "steps": str(T),
        "lr": "0.01",
        "torch_version": torch.__version__,
        "description": description + "; padded (lengths " + str(LENGTHS) + "), "
        "CrossEntropyLoss, Adam(lr=0.01), two steps, float32 CPU; generated by "
        "tools/make_reference.py (tools/body_reference.py)",
    })
    return meta


def build():
    """Every file: (path, tensors, metadata)."""
    torch.manual_seed(14)
    tcn = train(Tcn(), False, features=F_CONV)
    files = [(
        data_path("tcn_reference.safetensors"),
        tcn,
        metadata("Conv1d(5, 8, 3) causal relu -> Conv1d(8, 8, 2, dilation 2) same relu "
                 "+ input -> mean over each sequence's steps -> Linear(8, 4)",
                 input=F_CONV, channels=C),
    )]
    for name, norm_first, activation, causal, learned in [
        ("encoder_reference.safetensors", False, "relu", False, False),
        ("encoder_prenorm_reference.safetensors", True, "gelu", True, False),
        ("encoder_learned_reference.safetensors", True, "relu", False, True),
    ]:
        torch.manual_seed(15)
        record = train(Encoder(norm_first, activation, causal, learned), False, features=F_ENC)
        positions = f"learned positions (nn.Embedding({MAX_LEN}, 8))" if learned else "sinusoids"
        final = ", norm=LayerNorm(8)" if learned else ""
        files.append((
            data_path(name),
            record,
            metadata(f"x + {positions} -> TransformerEncoder(2 x TransformerEncoderLayer(8, 2 "
                     f"heads, ff 16, dropout 0, {activation}, norm_first={norm_first}){final}, "
                     f"causal={causal}) -> mean over each sequence's steps -> Linear(8, 4)",
                     input=F_ENC, heads=HEADS, feedforward=FF, layers=ENC_LAYERS,
                     norm_first=str(norm_first).lower(), activation=activation,
                     causal=str(causal).lower(), **({"max_len": MAX_LEN} if learned else {})),
        ))
    return files + encoder_tagger_files() + conv_tagger_files()


class EncoderTagger(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(F_ENC, HEADS, dim_feedforward=FF, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, ENC_LAYERS, enable_nested_tensor=False)
        self.out = nn.Linear(F_ENC, K)

    def forward(self, x, lengths):
        x = x + sinusoids(T, F_ENC)[:, None, :]
        padding = torch.arange(T)[None, :] >= lengths[:, None]  # [B, T]
        return self.out(self.encoder(x, src_key_padding_mask=padding))  # [T, B, K]


class ConvTagger(nn.Module):
    """Learned positions -> the TCN's convolutions -> out on every step."""

    def __init__(self):
        super().__init__()
        self.positions = learned_positions(F_CONV)
        self.conv1 = nn.Conv1d(F_CONV, C, 3)
        self.conv2 = nn.Conv1d(C, C, 2, dilation=2)
        self.out = nn.Linear(C, K)

    def forward(self, x, lengths):
        end = past_end(lengths)
        x = x + self.positions.weight[:T][:, None, :]
        y = torch.relu(conv(self.conv1, x.masked_fill(end, 0.0), 2, 0))
        y = y.masked_fill(end, 0.0)
        y = y + torch.relu(conv(self.conv2, y, 1, 1))
        return self.out(y)  # [T, B, K]


def encoder_tagger_files():
    """The encoder tagger for `tensorfit import` and `predict --data`, batch-first."""
    return tagger_files("encoder_tagger", EncoderTagger, F_ENC)


def conv_tagger_files():
    """The convolutional tagger for `tensorfit import` and `predict --data`."""
    return tagger_files("conv_tagger", ConvTagger, F_CONV)


def tagger_files(name, make, features):
    """`make()`'s untrained state dict, a padded batch-first file and PyTorch's per-step
    probabilities on it, as files `{name}_state_dict`, `{name}_data`, `{name}_probs`."""
    torch.manual_seed(12)
    model = make().eval()
    lengths = torch.tensor(LENGTHS)
    x = torch.randn(B, T, features)
    past = torch.arange(T)[None, :] >= lengths[:, None]  # [N, T]
    x[past] = 0.0
    with torch.no_grad():
        probs = model(x.transpose(0, 1), lengths).softmax(-1).transpose(0, 1).contiguous()
    probs[past] = 0.0
    meta = {"torch_version": torch.__version__, "description": "tools/body_reference.py"}
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    return [
        (data_path(f"{name}_state_dict.safetensors"), state, meta),
        (data_path(f"{name}_data.safetensors"),
         {"input": x.contiguous(), "lengths": lengths}, meta),
        (data_path(f"{name}_probs.safetensors"),
         {"probabilities": probs, "lengths": lengths}, meta),
    ]
