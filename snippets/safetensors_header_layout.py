"""Read a safetensors file by hand: 8-byte length, JSON header, then the raw
tensor bytes."""

import json
import struct
from itertools import pairwise
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

state = {
    "w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
    "b": torch.tensor([1, 2], dtype=torch.int64),
}
save_file(state, "model.safetensors", metadata={"step": "100"})
raw = Path("model.safetensors").read_bytes()

(header_len,) = struct.unpack("<Q", raw[:8])  # unsigned 64-bit, little-endian
header = json.loads(raw[8 : 8 + header_len])
body = raw[8 + header_len :]
# The only non-tensor entry.
assert header.pop("__metadata__") == {"step": "100"}
# This version pads the header with spaces so the tensor bytes start 8-byte
# aligned.
assert (8 + header_len) % 8 == 0 and raw[8 : 8 + header_len].endswith(b" ")

NUMPY = {"F32": np.float32, "I64": np.int64}
spans = []
for name, entry in header.items():
    # Relative to the first byte after the header.
    start, end = entry["data_offsets"]
    dtype = NUMPY[entry["dtype"]]
    array = np.frombuffer(body[start:end], dtype=dtype).reshape(entry["shape"])
    assert torch.equal(torch.from_numpy(array.copy()), state[name])
    spans.append((start, end))
# The spans tile the body exactly: no gaps, no overlaps, nothing after the last
# tensor.
spans.sort()
assert spans[0][0] == 0 and spans[-1][1] == len(body)
assert all(a_end == b_start for (_, a_end), (b_start, _) in pairwise(spans))

# The library agrees with the hand-made reading.
loaded = load_file("model.safetensors")
assert loaded.keys() == state.keys() and all(
    torch.equal(loaded[k], state[k]) for k in state
)

print(f"bytes 0-7   header length = {header_len}")
print(f"bytes 8-{8 + header_len - 1} JSON header:")
print(raw[8 : 8 + header_len].decode().rstrip())
print(f"bytes {8 + header_len}-{len(raw) - 1} tensor data ({len(body)} bytes)")
