#!/usr/bin/env python3
"""Writes the small example data sets of docs/data.md into this directory (examples/data).

Run with any Python that has numpy:  /root/torchvenv/bin/python examples/data/make.py
The same seed gives the same files; the tests of crates/tensorfit-data read them.

A toy task in every format: sequences of 3 features whose class (0, 1 or 2) is the
feature with the largest mean; lengths vary from 4 to 9 steps.
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(7)
N, T, F, CLASSES = 12, 9, 3, 3

lengths = rng.integers(4, T + 1, size=N)
x = np.zeros((N, T, F), dtype=np.float32)
labels = np.zeros(N, dtype=np.int64)
step_labels = np.zeros((N, T), dtype=np.int64)
for i, n in enumerate(lengths):
    x[i, :n] = rng.normal(size=(n, F)).astype(np.float32)
    labels[i] = int(np.argmax(x[i, :n].mean(axis=0)))
    step_labels[i, :n] = np.argmax(x[i, :n], axis=1)


def write_safetensors(path, tensors):
    """The safetensors layout by hand: u64 header length, JSON header, data."""
    names = {np.float32: "F32", np.int64: "I64", np.int32: "I32"}
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        b = a.tobytes()
        header[name] = {"dtype": names[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


# Tensors: dense input with a label per sequence; tokens with a label per step.
write_safetensors(os.path.join(HERE, "classify.safetensors"),
                  {"input": x, "labels": labels, "lengths": lengths.astype(np.int64)})
tokens = rng.integers(0, 20, size=(N, T)).astype(np.int32)
write_safetensors(os.path.join(HERE, "tokens.safetensors"),
                  {"tokens": tokens, "labels": step_labels, "lengths": lengths})
np.save(os.path.join(HERE, "input.npy"), x)
np.savez(os.path.join(HERE, "classify.npz"), input=x, labels=labels, lengths=lengths)
np.savez_compressed(os.path.join(HERE, "classify_compressed.npz"),
                    input=x, labels=labels, lengths=lengths)

# DL4J's layout: features/<i>.csv (one step per line) and labels/<i>.csv (one label).
for sub in ("features", "labels"):
    os.makedirs(os.path.join(HERE, "dl4j", sub), exist_ok=True)
for i, n in enumerate(lengths):
    with open(os.path.join(HERE, "dl4j", "features", f"{i}.csv"), "w") as f:
        for t in range(n):
            f.write(",".join(f"{v:.6g}" for v in x[i, t]) + "\n")
    with open(os.path.join(HERE, "dl4j", "labels", f"{i}.csv"), "w") as f:
        f.write(f"{labels[i]}\n")

# One long CSV, a label per step.
with open(os.path.join(HERE, "sequences.csv"), "w") as f:
    f.write("sequence,step," + ",".join(f"f{k + 1}" for k in range(F)) + ",label\n")
    for i, n in enumerate(lengths):
        for t in range(n):
            vals = ",".join(f"{v:.6g}" for v in x[i, t])
            f.write(f"s{i},{t},{vals},{step_labels[i, t]}\n")

# Text: a corpus for a character language model, and label<TAB>text lines.
corpus = ("the quick brown fox jumps over the lazy dog. " * 8 +
          "pack my box with five dozen liquor jugs. " * 8)
with open(os.path.join(HERE, "corpus.txt"), "w", encoding="utf-8") as f:
    f.write(corpus)
reviews = [("pos", "a fine film"), ("neg", "dull and long"), ("pos", "loved it"),
           ("neg", "would not watch again"), ("pos", "great cast, great story"),
           ("neg", "boring")]
with open(os.path.join(HERE, "reviews.tsv"), "w", encoding="utf-8") as f:
    for label, text in reviews:
        f.write(f"{label}\t{text}\n")

# Token classification: the same lengths, token ids in 0..20, the class of a sequence
# its first token modulo 3 (tokens_classify.safetensors, tokens_model.toml).
token_x = rng.integers(0, 20, size=(N, T)).astype(np.int32)
for i, n in enumerate(lengths):
    token_x[i, n:] = 0
write_safetensors(os.path.join(HERE, "tokens_classify.safetensors"),
                  {"tokens": token_x, "labels": token_x[:, 0].astype(np.int64) % 3,
                   "lengths": lengths.astype(np.int64)})

# Regression: the dense sequences above, and as target the mean of their first feature
# (regress.safetensors, regress_model.toml).
targets = np.array([x[i, :n, 0].mean() for i, n in enumerate(lengths)], dtype=np.float32)
write_safetensors(os.path.join(HERE, "regress.safetensors"),
                  {"input": x, "labels": targets, "lengths": lengths.astype(np.int64)})

# Tagging that needs the future (examples/models/bidirectional_tagger.toml): sequences of
# 5 to 30 values, each step tagged 1 where the next value is larger, else 0 (the last
# step: 0). A stack reading forwards sees the next value one step too late and can only
# guess from the current one; a bidirectional one reads it. Its own generator, so the
# files above stay as they were.
tag_rng = np.random.default_rng(11)
TAG_N, TAG_T = 1200, 30
tag_lengths = tag_rng.integers(5, TAG_T + 1, size=TAG_N)
tag_x = np.zeros((TAG_N, TAG_T, 1), dtype=np.float32)
tag_labels = np.zeros((TAG_N, TAG_T), dtype=np.int32)
for i, n in enumerate(tag_lengths):
    values = tag_rng.normal(size=n).astype(np.float32)
    tag_x[i, :n, 0] = values
    tag_labels[i, :n - 1] = values[1:] > values[:-1]
np.savez_compressed(os.path.join(HERE, "rising.npz"), input=tag_x, labels=tag_labels,
                    lengths=tag_lengths.astype(np.int32))
