"""Where the reference files live and how they are written: the tests' data folder, and
safetensors with a byte-stable layout, read back and checked after writing."""

import json
import os
import struct

import torch

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests", "data")


def data_path(name):
    """The path of reference file `name` in tests/data."""
    return os.path.join(DATA_DIR, name)


# The dtypes written: float32 values, and int64 (PyTorch's lengths and class ids).
DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def write_safetensors(path, tensors, metadata):
    """Write a safetensors file with a byte-stable layout.

    safetensors.torch.save_file emits the metadata keys in hash-map order, so
    its output differs between runs. Here the header JSON has sorted keys and
    the tensors are laid out in name order, so the same data always gives the
    same bytes. The result is validated by reading it back with
    safetensors.torch.load_file.
    """
    header = {"__metadata__": dict(sorted(metadata.items()))}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        assert t.dtype in DTYPES and t.is_contiguous(), (name, t.dtype)
        code, numpy_type = DTYPES[t.dtype]
        data = t.numpy().astype(numpy_type, copy=False).tobytes()
        header[name] = {
            "dtype": code,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
    head += b" " * (-len(head) % 8)  # pad the header to 8 bytes with spaces
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for data in chunks:
            f.write(data)


def write_checked(path, record, metadata, detail=""):
    """Writes `record` to `path` (write_safetensors), checks that it reads back equal and
    prints what was written (`detail` is added to the line)."""
    from safetensors.torch import load_file

    path = os.path.normpath(path)
    write_safetensors(path, record, metadata)
    back = load_file(path)
    assert all(torch.equal(back[k], v) for k, v in record.items()), path
    print(f"wrote {path} ({len(record)} tensors{detail})")
