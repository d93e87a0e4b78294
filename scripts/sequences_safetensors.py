"""A safetensors file of labelled sequences as tensorfit's reader takes it (docs/data.md,
Tensors): `input` F32 `[n, t, f]` and `labels` I64 `[n]`, the header padded to 8 bytes.
The data scripts (data-throughput.sh, files-vs-memory.sh) write their files with it:

    sys.path.insert(0, "scripts")
    from sequences_safetensors import write_sequences
"""
import json
import struct


def write_sequences(path, x, shape, labels):
    """Writes `x`, little-endian f32 bytes of `shape` ([n, t, f]), and `labels`, the n
    class ids, to `path`."""
    y = struct.pack(f"<{len(labels)}q", *labels)
    head = {"input": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, len(x)]},
            "labels": {"dtype": "I64", "shape": [len(labels)],
                       "data_offsets": [len(x), len(x) + len(y)]}}
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)) + h + x + y)
