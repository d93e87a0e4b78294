"""PyTorch reference data of tensorfit's attention ops (Op::AttentionScores and
Op::AttentionMix, their gradients through autodiff).

Writes ``tests/data/attention_reference.safetensors``: multi-head scaled dot-product
self-attention as ``nn.MultiheadAttention`` computes it after its input projection, on
time-major ``q``, ``k``, ``v`` [T, B, D] split into ``heads`` heads of ``D / heads``
features (head h owning features h·Dh..(h+1)·Dh), with a key padding mask from each
row's length (keys j >= L_b masked) and, in the causal case, PyTorch's square subsequent
mask (keys j > i masked); every row has at least one step (an empty row is NaN in
PyTorch, zeros in tensorfit). The output is ``F.scaled_dot_product_attention`` (its math
path, in float64), checked against the weights of ``nn.MultiheadAttention``'s
``need_weights`` math (softmax of the masked scaled scores) times ``v``; the gradients
are those of ``sum(out * w)`` for a drawn ``w``.

Tensors (float32), for each case c in ``whole`` (no mask), ``padded`` (lengths 5, 3, 1)
and ``causal`` (lengths 4, 5, 2 and the causal mask)::

    {c}.q, {c}.k, {c}.v, {c}.w [T, B, D]   the inputs and the output's weights
    {c}.lengths [B]                       each row's length (T for ``whole``)
    {c}.probs [B, heads, T, T]            the attention weights
    {c}.out [T, B, D]                     the attention's output
    {c}.dq, {c}.dk, {c}.dv [T, B, D]      the gradients of sum(out * w)

Metadata: steps, batch, features, heads, the cases' names and causal flags,
torch_version, description. Inputs from ``torch.manual_seed(11)``, drawn in the order
above, case by case.

Run from the repository root: ``python tools/attention_reference.py``.
"""

import math

import torch
import torch.nn.functional as F

from reference_files import data_path, write_checked

T = 5  # steps
B = 3  # batch
D = 8  # features
HEADS = 2
CASES = [("whole", None, False), ("padded", [5, 3, 1], False), ("causal", [4, 5, 2], True)]

OUT = data_path("attention_reference.safetensors")


def heads(x):
    """[T, B, D] -> [B, heads, T, Dh]."""
    return x.reshape(T, B, HEADS, D // HEADS).permute(1, 2, 0, 3)


def merged(x):
    """[B, heads, T, Dh] -> [T, B, D]."""
    return x.permute(2, 0, 1, 3).reshape(T, B, D)


def allowed(lengths, causal):
    """[B, 1, T, T]: true where query i may attend to key j."""
    j = torch.arange(T)
    keep = (j[None, None, :] < lengths[:, None, None]).expand(B, T, T)
    if causal:
        keep = keep & (j[None, None, :] <= j[None, :, None])
    return keep[:, None]


def case(name, lengths, causal):
    q, k, v, w = (torch.randn(T, B, D, dtype=torch.float64) for _ in range(4))
    lengths = torch.tensor(lengths if lengths else [T] * B, dtype=torch.int64)
    mask = allowed(lengths, causal)
    for t in (q, k, v):
        t.requires_grad_(True)
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        out = merged(F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=mask))
    (out * w).sum().backward()
    # nn.MultiheadAttention's need_weights path: the weights themselves.
    scores = heads(q) @ heads(k).transpose(-2, -1) / math.sqrt(D // HEADS)
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    assert torch.allclose(merged(probs @ heads(v)), out, atol=1e-12), name
    record = {"q": q, "k": k, "v": v, "w": w, "probs": probs, "out": out,
              "dq": q.grad, "dk": k.grad, "dv": v.grad}
    record = {f"{name}.{n}": t.detach().to(torch.float32).contiguous() for n, t in record.items()}
    record[f"{name}.lengths"] = lengths.to(torch.float32)
    return record


def build():
    torch.manual_seed(11)
    record = {}
    for name, lengths, causal in CASES:
        record.update(case(name, lengths, causal))
    metadata = {
        "steps": str(T),
        "batch": str(B),
        "features": str(D),
        "heads": str(HEADS),
        "cases": ",".join(name for name, _, _ in CASES),
        "causal": ",".join(str(causal).lower() for _, _, causal in CASES),
        "torch_version": torch.__version__,
        "description": "multi-head scaled dot-product self-attention (SDPA math path, float64 "
                       "stored as float32) with key padding and causal masks, and the "
                       "gradients of sum(out * w)",
    }
    return record, metadata


if __name__ == "__main__":
    record, metadata = build()
    write_checked(OUT, record, metadata)
