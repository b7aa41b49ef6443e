"""A small safetensors reader (8-byte header length, JSON header, raw little-endian data)."""
import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "I32": np.int32, "F16": np.float16, "I64": np.int64, "U16": np.uint16}


def load(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        if e["dtype"] == "BF16":
            raw = np.frombuffer(buf[base + b : base + end], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(buf[base + b : base + end], dtype=_DTYPES[e["dtype"]])
        out[name] = arr.reshape(e["shape"]).copy()
    return out, meta
